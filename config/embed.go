// Package configfiles holds Kingdom's default configuration files, embedded
// into the binaries. start copies them into $BASE_DIR/config on first run
// with config.Install, which never overwrites a file that exists; the YAML
// files list every key with its default and are loaded by pkg/config.
package configfiles

import "embed"

// FS holds the default files, at the root of the tree as they appear in
// $BASE_DIR/config.
//
// It holds the role files, the built-in generals' manifests and prompt
// templates, and the workspace instructions given to every soldier.
//
//go:embed *.yaml *.example workspace-claude.md generals/*.yaml generals/templates/*.md
var FS embed.FS
