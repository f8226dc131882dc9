// Package schema owns the shapes of the files Kingdom's roles hand to each
// other (SPEC §3.3): the Go types of events, tasks, messages, results,
// inbox events, checkpoints and petition results, their constants, and the
// enforcement of the JSON Schemas embedded from the repository's schemas/
// directory.
//
// Drive it at the boundary where a role reads another role's file:
//
//	data, err := os.ReadFile(path)          // size-limited by the caller
//	ev, err := schema.DecodeEvent(data)     // JSON syntax, schema, then Go value
//	if errors.Is(err, schema.ErrInvalid) {  // poison file: reject it with
//		reason := err.Error()               // this one-line reason (§3.1)
//	}
//
// Validate checks bytes against one Kind without decoding them; producers
// may call it on what they are about to write. Each kind's schema is
// compiled on its first use (a process pays only for the kinds it
// validates) and is safe for concurrent use. The validator is this
// package's own: it implements the draft 2020-12 keywords the schemas use
// (type, $ref, const, enum, format date-time, required, properties,
// additionalProperties, items, min/maxItems, min/maxLength, pattern,
// minimum, allOf, oneOf, if/then/else) and refuses to compile any other,
// so a process links no general-purpose validator (whose start-up cost
// every short-lived soldier paid). Its tests compare it with a complete
// validator on every fixture and thousands of mutations of them.
//
// Timestamps are strings in the JSON and in the Go types; build them with
// FormatTime (RFC 3339, UTC, 'Z', SPEC §9.23) and read them with ParseTime.
// Nullable fields are pointers: nil marshals as null (or is omitted when the
// field is optional). Payload and Context maps marshal as {} when nil, so a
// zero value never produces a null where the schema wants an object.
package schema
