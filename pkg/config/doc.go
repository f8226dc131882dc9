// Package config owns Kingdom's configuration: one typed struct per file under
// $BASE_DIR/config (system.yaml, sentinel.yaml, king.yaml, envoy.yaml,
// chamberlain.yaml and one manifest per general in generals/<name>.yaml), the
// defaults of every key, strict decoding and validation, and the optional
// secrets file kingdom.env.
//
// A role loads only what it needs, once at start:
//
//	cfg, err := config.LoadKing(filepath.Join(dir, config.KingFile))
//
// start and doctor validate everything at once with LoadAll, which joins every
// error it finds. Loading fills the defaults first, then decodes the file with
// unknown keys refused, then calls Validate; a role file that does not exist
// means all defaults. Errors are *Error values that name the file, the line,
// the key path and what was expected, for example
//
//	config/king.yaml:7: retry.max_attempts: expected a non-negative integer, got "abc"
//
// Loading has no side effects: it never creates files and never reads the
// environment. The few environment overrides (SLACK_DEFAULT_CHANNEL) are
// resolved by accessor methods such as King.DefaultChannel, and secrets are
// put into the environment by ApplyEnvFile. Install copies the shipped default
// files (package github.com/kingdom-dev/kingdom/config) into a fresh
// installation without overwriting anything.
package config
