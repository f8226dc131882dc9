// Package schema enforces the JSON Schemas (embedded from the repository's
// schemas/ directory) of the files Kingdom's roles hand to each other
// (SPEC §3.3), and decodes them into their Go types.
//
// Drive it at the boundary where a role reads another role's file:
//
//	data, err := os.ReadFile(path)          // size-limited by the caller
//	ev, err := schema.DecodeEvent(data)     // JSON syntax, schema, then Go value
//	if errors.Is(err, doc.ErrInvalid) {  // poison file: reject it with
//		reason := err.Error()               // this one-line reason (§3.1)
//	}
//
// Validate checks bytes against one Kind without decoding them; producers
// may call it on what they are about to write. Validation is
// santhosh-tekuri/jsonschema (draft 2020-12, formats asserted); each kind's
// schema is compiled on its first use (a process pays only for the kinds
// it validates) and is safe for concurrent use. Violations are reported
// one per broken rule, on one line, sorted, with our long patterns named.
// Decode parses once: the parsed document feeds the schema and a walk that
// rejects a key differing from a field's JSON name only in case (which
// encoding/json would otherwise decode into that field).
//
// The Go types, constants and timestamp helpers are pkg/doc's: this
// package only checks bytes against the schemas and decodes them into those
// types. pkg/doc links no validator: soldier-spawn, which starts once per
// task, uses it and leaves validation to the general that reads its raw
// result.
package schema
