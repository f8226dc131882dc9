package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// decodeError is a document that passed its schema but does not fit the Go
// type (a number too large for an int, 1.0 for an integer field).
type decodeError struct {
	kind Kind
	err  error
}

func (e *decodeError) Error() string        { return fmt.Sprintf("%s: %v", e.kind, e.err) }
func (e *decodeError) Is(target error) bool { return target == ErrInvalid }
func (e *decodeError) Unwrap() error        { return e.err }

// Decode validates data against kind's schema and then unmarshals it into v.
// Errors match ErrInvalid when the document is at fault.
func Decode(kind Kind, data []byte, v any) error {
	doc, err := validate(kind, data)
	if err != nil {
		return err
	}
	if t := reflect.TypeOf(v); t != nil {
		if err := checkCase(doc, t, nil); err != nil {
			return &decodeError{kind: kind, err: err}
		}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return &decodeError{kind: kind, err: err}
	}
	return nil
}

func decode[T any](kind Kind, data []byte) (*T, error) {
	v := new(T)
	if err := Decode(kind, data, v); err != nil {
		return nil, err
	}
	return v, nil
}

// DecodeEvent checks and decodes an event file.
func DecodeEvent(data []byte) (*Event, error) { return decode[Event](KindEvent, data) }

// DecodeTask checks and decodes a task file.
func DecodeTask(data []byte) (*Task, error) { return decode[Task](KindTask, data) }

// DecodeMessage checks and decodes a message file.
func DecodeMessage(data []byte) (*Message, error) { return decode[Message](KindMessage, data) }

// DecodeRawResult checks and decodes a <task>-raw.json file.
func DecodeRawResult(data []byte) (*RawResult, error) {
	return decode[RawResult](KindRawResult, data)
}

// DecodeResult checks and decodes a final <task>.json result.
func DecodeResult(data []byte) (*Result, error) { return decode[Result](KindResult, data) }

// DecodeInboxEvent checks and decodes an inbox/*.json file.
func DecodeInboxEvent(data []byte) (*InboxEvent, error) {
	return decode[InboxEvent](KindInboxEvent, data)
}

// DecodeCheckpoint checks and decodes a <task>-checkpoint.json file.
func DecodeCheckpoint(data []byte) (*Checkpoint, error) {
	return decode[Checkpoint](KindCheckpoint, data)
}

// DecodePetitionResult checks and decodes a petition result.
func DecodePetitionResult(data []byte) (*PetitionResult, error) {
	return decode[PetitionResult](KindPetitionResult, data)
}
