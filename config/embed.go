// Package configfiles holds Kingdom's default configuration files, embedded
// into the binaries. start copies them into $BASE_DIR/config on first run
// with config.Install, which never overwrites a file that exists; the YAML
// files list every key with its default and are loaded by pkg/config.
package configfiles

import "embed"

// FS holds the default files, at the root of the tree as they appear in
// $BASE_DIR/config.
//
// When generals/*.yaml, generals/templates/*.md and workspace-claude.md are
// added, extend the directive with those patterns (a pattern that matches
// nothing is a build error, so they are listed only once they exist).
//
//go:embed *.yaml *.example
var FS embed.FS
