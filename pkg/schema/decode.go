package schema

import (
	"encoding/json"
	"reflect"

	docpkg "github.com/kingdom-dev/kingdom/pkg/doc"
)

// Decode validates data against kind's schema and then unmarshals it into v.
// Errors match ErrInvalid when the document is at fault.
//
// A raw or final result's cost_usd or usage count out of range is clamped
// to its bound (MaxCostUSD, MaxTokens) and noted in the result's
// metrics[ClampedMetric]: an absurd figure does not cost the task its
// outcome.
func Decode(kind Kind, data []byte, v any) error {
	doc, clamped, err := validate(kind, data)
	if err != nil {
		return err
	}
	if clamped {
		if data, err = json.Marshal(doc); err != nil {
			return &docpkg.DecodeError{Kind: kind, Err: err}
		}
	}
	if t := reflect.TypeOf(v); t != nil {
		if err := checkCase(doc, t, nil); err != nil {
			return &docpkg.DecodeError{Kind: kind, Err: err}
		}
	}
	return docpkg.Unmarshal(kind, data, v) // valid JSON by now: only a type mismatch is left
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
