// Package schemas holds the JSON Schemas (draft 2020-12) of every file one
// Kingdom role reads from another (SPEC §3.3). They are embedded so each
// binary validates against exactly the schemas it was built with; package
// github.com/kingdom-dev/kingdom/pkg/schema compiles and applies them.
//
// Every schema has an absolute $id under https://kingdom.invalid/schemas/;
// shared definitions live in defs.json and are referenced relatively.
package schemas

import "embed"

// FS holds every *.json schema in this directory.
//
//go:embed *.json
var FS embed.FS

// BaseURL is the prefix of every schema's $id.
const BaseURL = "https://kingdom.invalid/schemas/"
