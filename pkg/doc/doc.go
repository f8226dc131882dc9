// Package doc holds the shapes of the files Kingdom's roles hand to each
// other (SPEC §3.3): the Go types of events, tasks, messages, results,
// inbox events, checkpoints and petition results, their constants, the
// document kinds, the timestamp helpers, and the JSON Schema an engine is
// given for an agent's structured output. It validates nothing and links
// no JSON Schema validator.
//
// Readers of another role's file decode it with pkg/schema, which adds
// Validate and the validating Decode* functions over these types. This
// package is apart from it for the one
// process that must start cheaply: soldier-spawn starts once per task and
// only produces documents (a raw result) that its reader, the general,
// validates; a JSON Schema validator's initialisation would cost it
// milliseconds per start. Unmarshal is its non-validating decode.
//
// Timestamps are strings in the JSON and in the Go types; build them with
// FormatTime (RFC 3339, UTC, 'Z', SPEC §9.23) and read them with ParseTime.
// Nullable fields are pointers: nil marshals as null (or is omitted when the
// field is optional). Payload and Context maps marshal as {} when nil, so a
// zero value never produces a null where the schema wants an object.
package doc
