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
func Decode(kind docpkg.Kind, data []byte, v any) error {
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
func decode[T any](kind docpkg.Kind, data []byte) (*T, error) {
	v := new(T)
	if err := Decode(kind, data, v); err != nil {
		return nil, err
	}
	return v, nil
}

// DecodeEvent checks and decodes an event file.
func DecodeEvent(data []byte) (*docpkg.Event, error) {
	return decode[docpkg.Event](docpkg.KindEvent, data)
}

// DecodeTask checks and decodes a task file.
func DecodeTask(data []byte) (*docpkg.Task, error) { return decode[docpkg.Task](docpkg.KindTask, data) }

// DecodeMessage checks and decodes a message file.
func DecodeMessage(data []byte) (*docpkg.Message, error) {
	return decode[docpkg.Message](docpkg.KindMessage, data)
}

// DecodeRawResult checks and decodes a <task>-raw.json file.
func DecodeRawResult(data []byte) (*docpkg.RawResult, error) {
	return decode[docpkg.RawResult](docpkg.KindRawResult, data)
}

// DecodeResult checks and decodes a final <task>.json result.
func DecodeResult(data []byte) (*docpkg.Result, error) {
	return decode[docpkg.Result](docpkg.KindResult, data)
}

// DecodeInboxEvent checks and decodes an inbox/*.json file.
func DecodeInboxEvent(data []byte) (*docpkg.InboxEvent, error) {
	return decode[docpkg.InboxEvent](docpkg.KindInboxEvent, data)
}

// DecodeCheckpoint checks and decodes a <task>-checkpoint.json file.
func DecodeCheckpoint(data []byte) (*docpkg.Checkpoint, error) {
	return decode[docpkg.Checkpoint](docpkg.KindCheckpoint, data)
}

// DecodePetitionResult checks and decodes a petition result.
func DecodePetitionResult(data []byte) (*docpkg.PetitionResult, error) {
	return decode[docpkg.PetitionResult](docpkg.KindPetitionResult, data)
}
