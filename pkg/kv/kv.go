// Package kv is the small-state seam (SPEC §11.6): pauses, cancel markers,
// control requests and replies, engine pauses, sequences, the envoy's
// bookkeeping, spend and final results, each a value under a namespace and
// a key. Owner packages (control, enginepause, king, envoy, spend,
// general) take a KV and never touch the paths or rows behind it.
//
// One implementation: OnStore keeps the values in a store.Store's
// key-value. The files store maps every namespace to the files the roles
// have always used (state/king/paused.json, cancelled/<task>.json, …),
// so file mode is byte-for-byte what it was; PostgreSQL shares them with
// every host. A day of the spend ledger is the namespace "spend-<date>"
// (pkg/spend).
//
//	s := kv.OnStore(st)
//	err := kv.PutJSON(ctx, s, kv.NSPauses, kv.KeyKingdom, p)
//	err = s.Update(ctx, kv.NSSequences, kv.KeyTaskSeq, func(old []byte) ([]byte, error) {
//		return next(old), nil // nil deletes
//	})
package kv

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/store"
)

// ErrNotFound: no value under the key. It is store.ErrNotFound, so one
// errors.Is check serves both implementations.
var ErrNotFound = store.ErrNotFound

// Namespaces and their keys. A key is a safe id (ids.Check); in the files
// store it becomes a file name.
const (
	// NSPauses holds the kingdom's pause (KeyKingdom, state/king/paused.json)
	// and the engines' usage-limit pauses (KeyEngines,
	// state/king/engine-pause.json, one document for every engine).
	NSPauses   = store.NSPauses
	KeyKingdom = "kingdom"
	KeyEngines = "engines"
	// NSCancelled: task id → cancel record (state/king/cancelled/<task>.json).
	NSCancelled = "cancelled"
	// NSControl: request id → request (state/king/control/<id>.json).
	NSControl = store.NSControl
	// NSReplies: request id → the king's reply
	// (state/king/control/replies/<id>.json).
	NSReplies = store.NSReplies
	// NSSequences: "YYYYMMDD:N" counters (state/king/task-seq, msg-seq).
	NSSequences = store.NSSequences
	KeyTaskSeq  = "task-seq"
	KeyMsgSeq   = "msg-seq"
	// NSEnvoy: the envoy's documents; the key is the file name under
	// state/envoy/ (KeyMappings, KeyAwaiting, KeyConversations,
	// KeyDeliveries).
	NSEnvoy          = "envoy"
	KeyMappings      = "thread-mappings.json"
	KeyAwaiting      = "awaiting-responses.json"
	KeyConversations = "conversation-threads.json"
	KeyDeliveries    = "deliveries.json"
	// NSResults: task id → final result (state/results/<task>.json).
	NSResults = "results"
	// NSCheckpoints: task id → the checkpoint a needs_human attempt leaves
	// for its resume (state/results/<task>-checkpoint.json).
	NSCheckpoints = "checkpoints"
	// NSWaits: KeyKing → the king's record of why work waits (pkg/waits,
	// state/king/waits.json).
	NSWaits = "waits"
	KeyKing = "king"
	// NSParks: the breaker's parks (SPEC §12.4), one record per parked
	// general ("general:<name>") or source item ("item:<item key>"); the
	// files store keeps them under state/store/kv/parks/ (pkg/parks).
	NSParks = "parks"
	// NSBreaker: the king's breaker counters behind the parks: a general's
	// failures of the last hour, an item's attempts in its window (same
	// keys as NSParks).
	NSBreaker = "breaker"
)

// KV is the small state of one kingdom.
type KV interface {
	// Get returns the value of key (ErrNotFound when there is none).
	Get(ctx context.Context, ns, key string) ([]byte, error)
	// Put writes the value of key, replacing any.
	Put(ctx context.Context, ns, key string, v []byte) error
	// PutAll writes several values of one namespace in one transaction.
	PutAll(ctx context.Context, ns string, vs map[string][]byte) error
	// Delete removes key; a missing key is no error.
	Delete(ctx context.Context, ns, key string) error
	// List returns every value of ns by key.
	List(ctx context.Context, ns string) (map[string][]byte, error)
	// Update replaces the value of key with fn(old) atomically: no other
	// Update of the same key, in this process or another (or on another
	// host), runs between the read and the write. old is nil
	// when there is no value; fn returning nil deletes the key; fn's error
	// changes nothing and is returned.
	Update(ctx context.Context, ns, key string, fn func(old []byte) ([]byte, error)) error
}

// EncodeJSON is how every JSON value is written: indented, one trailing
// newline (the same bytes atomicfile.WriteJSON always wrote).
func EncodeJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// PutJSON writes v as JSON under key.
func PutJSON(ctx context.Context, s KV, ns, key string, v any) error {
	b, err := EncodeJSON(v)
	if err != nil {
		return fmt.Errorf("encode %s/%s: %w", ns, key, err)
	}
	return s.Put(ctx, ns, key, b)
}

// GetJSON decodes the value of key into v (ErrNotFound passes through).
func GetJSON(ctx context.Context, s KV, ns, key string, v any) error {
	b, err := s.Get(ctx, ns, key)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s/%s: %w", ns, key, err)
	}
	return nil
}
