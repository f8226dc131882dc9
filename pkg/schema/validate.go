package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/kingdom-dev/kingdom/schemas"
)

// Kind names a document kind; its schema is schemas/<kind>.json.
type Kind string

// The document kinds with a schema.
const (
	KindEvent          Kind = "event"
	KindTask           Kind = "task"
	KindMessage        Kind = "message"
	KindRawResult      Kind = "raw-result"
	KindResult         Kind = "result"
	KindInboxEvent     Kind = "inbox-event"
	KindSessions       Kind = "sessions"
	KindResources      Kind = "resources"
	KindInternalEvent  Kind = "internal-event"
	KindPetitionResult Kind = "petition-result"
	KindCheckpoint     Kind = "checkpoint"
	KindState          Kind = "state" // the dashboard's /api/v1/state
)

// Kinds lists every document kind.
func Kinds() []Kind {
	return []Kind{KindEvent, KindTask, KindMessage, KindRawResult, KindResult,
		KindInboxEvent, KindSessions, KindResources, KindInternalEvent,
		KindPetitionResult, KindCheckpoint, KindState}
}

// URL is the $id of the kind's schema.
func (k Kind) URL() string { return schemas.BaseURL + string(k) + ".json" }

// ErrInvalid is matched (errors.Is) by every error meaning "this document is
// not acceptable": not JSON, schema violations, or values Go cannot hold.
// A reader rejects such a file instead of retrying it.
var ErrInvalid = errors.New("invalid document")

// ErrNotJSON is matched by errors for input that is not valid JSON at all.
var ErrNotJSON = errors.New("not valid JSON")

// maxViolations caps how many violations an error message lists.
const maxViolations = 8

// Violation is one schema rule a document breaks.
type Violation struct {
	// Pointer is the JSON pointer of the offending value ("" is the root).
	Pointer string
	// Message says what is wrong, e.g. `missing property 'id'`.
	Message string
}

func (v Violation) String() string { return fmt.Sprintf("at '%s': %s", v.Pointer, v.Message) }

// Error is a document that fails its kind's schema. Error() is one line:
// `event: at '/priority': value must be one of "high", "normal", "low"`.
type Error struct {
	Kind       Kind
	Violations []Violation
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(string(e.Kind))
	b.WriteString(": ")
	for i, v := range e.Violations {
		if i == maxViolations {
			fmt.Fprintf(&b, "; and %d more", len(e.Violations)-maxViolations)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(v.String())
	}
	return b.String()
}

// Is makes every *Error match ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// syntaxError is input that is not JSON; it matches ErrNotJSON and ErrInvalid.
type syntaxError struct {
	kind Kind
	err  error
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("%s: not valid JSON: %v", e.kind, e.err)
}
func (e *syntaxError) Is(target error) bool { return target == ErrInvalid || target == ErrNotJSON }
func (e *syntaxError) Unwrap() error        { return e.err }

// Each kind's schema is compiled the first time it is used, so a process
// pays only for the documents it validates (a soldier validates one raw
// result). Only the embedded documents are read; nothing is fetched.
var (
	compileMu sync.Mutex
	comp      *compiler
	compiled  = map[Kind]*node{}
)

// schemaFor compiles kind's schema on first use. Formats are asserted
// (created_at must really be a date-time).
func schemaFor(k Kind) (*node, error) {
	compileMu.Lock()
	defer compileMu.Unlock()
	if n, ok := compiled[k]; ok {
		return n, nil
	}
	if !slices.Contains(Kinds(), k) {
		return nil, fmt.Errorf("validate: unknown kind %q", k)
	}
	if comp == nil {
		comp = newCompiler()
	}
	n, err := comp.compileRef(string(k)+".json", "")
	if err != nil {
		// A broken embedded schema is a programming error; a fresh
		// compiler next time keeps no half-compiled nodes.
		comp = nil
		return nil, fmt.Errorf("compile schema %s: %w", k, err)
	}
	compiled[k] = n
	return n, nil
}

// Validate checks that data is JSON and satisfies kind's schema. Errors
// match ErrInvalid (and ErrNotJSON for non-JSON); an unknown kind or a
// broken embedded schema is a programming error and matches neither.
func Validate(kind Kind, data []byte) error {
	_, err := validate(kind, data)
	return err
}

// validate returns the parsed document (objects as map[string]any, numbers
// as json.Number) once it satisfies kind's schema.
func validate(kind Kind, data []byte) (any, error) {
	sch, err := schemaFor(kind)
	if err != nil {
		return nil, err
	}
	doc, err := parseJSON(data)
	if err != nil {
		// json.Unmarshal describes a syntax error best (offset and
		// character, "unexpected end of JSON input").
		var v any
		if jerr := json.Unmarshal(data, &v); jerr != nil {
			err = jerr
		}
		return nil, &syntaxError{kind: kind, err: err}
	}
	if vs := sch.check(doc, make([]string, 0, 8), nil); len(vs) > 0 {
		return nil, &Error{Kind: kind, Violations: sortViolations(vs)}
	}
	return doc, nil
}

// patternNames replaces our long regular expressions with what they mean.
var patternNames = map[string]string{
	`^[A-Za-z0-9](?:\.?[A-Za-z0-9_:@-])*\.?$`:                                  "a safe id (letters, digits, . _ : @ -; starting with a letter or digit; no '..')",
	`^task-[0-9]{8}-[0-9]{3,}$`:                                                "a task id (task-YYYYMMDD-NNN)",
	`^gen-[a-z][a-z0-9-]*$`:                                                    "a general name (gen-<lowercase>)",
	`^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+$`:                                       "an event type (category.name, lowercase)",
	`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]*[A-Za-z0-9_-][A-Za-z0-9_.-]*$`: "owner/name",
}

func quote(s string) string {
	const max = 80
	if len(s) > max {
		s = s[:max] + "…"
	}
	return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}
