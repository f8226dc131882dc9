package doc

import (
	"encoding/json"
	"errors"
	"fmt"

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
	KindCheck          Kind = "check" // chamberlain --once --json
)

// Kinds lists every document kind.
func Kinds() []Kind {
	return []Kind{KindEvent, KindTask, KindMessage, KindRawResult, KindResult,
		KindInboxEvent, KindSessions, KindResources, KindInternalEvent,
		KindPetitionResult, KindCheckpoint, KindState, KindCheck}
}

// URL is the $id of the kind's schema.
func (k Kind) URL() string { return schemas.BaseURL + string(k) + ".json" }

// ErrInvalid is matched (errors.Is) by every error meaning "this document is
// not acceptable": not JSON, schema violations, or values Go cannot hold.
// A reader rejects such a file instead of retrying it.
var ErrInvalid = errors.New("invalid document")

// ErrNotJSON is matched by errors for input that is not valid JSON at all.
var ErrNotJSON = errors.New("not valid JSON")

// SyntaxError is input of a kind that is not JSON; it matches ErrNotJSON
// and ErrInvalid.
type SyntaxError struct {
	Kind Kind
	Err  error
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s: not valid JSON: %v", e.Kind, e.Err)
}

// Is makes a SyntaxError match ErrInvalid and ErrNotJSON.
func (e *SyntaxError) Is(target error) bool { return target == ErrInvalid || target == ErrNotJSON }
func (e *SyntaxError) Unwrap() error        { return e.Err }

// DecodeError is a JSON document that does not fit the Go value it is
// decoded into (a string where a number is, a number too large for an int,
// 1.0 for an integer field). It matches ErrInvalid.
type DecodeError struct {
	Kind Kind
	Err  error
}

func (e *DecodeError) Error() string { return fmt.Sprintf("%s: %v", e.Kind, e.Err) }

// Is makes a DecodeError match ErrInvalid.
func (e *DecodeError) Is(target error) bool { return target == ErrInvalid }
func (e *DecodeError) Unwrap() error        { return e.Err }

// Unmarshal decodes data, a document of the given kind, into v WITHOUT
// checking it against the kind's schema: for a process that hands the
// document on to a reader that validates it (pkg/schema's Decode), and
// must not pay for a validator itself (soldier-spawn, once per task).
// Errors match ErrInvalid, and ErrNotJSON when data is not JSON.
func Unmarshal(kind Kind, data []byte, v any) error {
	// json.Unmarshal checks the whole input's syntax before it decodes.
	if err := json.Unmarshal(data, v); err != nil {
		if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
			return &SyntaxError{Kind: kind, Err: err}
		}
		return &DecodeError{Kind: kind, Err: err}
	}
	return nil
}
