// Package eventlog is the stream of internal events (seed 001, SPEC §3.3):
// producers call Emitter.Emit; consumers read the store's event log
// (store.Store.Events after a cursor they save under NSCursors). The
// stream is the store's event log in both modes (NewStoreEmitter); the
// files store keeps it in logs/events.log, appended through a File (a
// JSONL line per event, one write(2) under the rotate lock) and read by
// its own cursor.
//
//	em := eventlog.NewStoreEmitter(st, "king")
//	err := em.Emit("task.created", data)
package eventlog

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/logging"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Event is one internal event line.
type Event struct {
	TS    string          `json:"ts"`
	Type  string          `json:"type"`
	Actor string          `json:"actor"`
	Data  json.RawMessage `json:"data"`
}

// Time parses the event's timestamp (zero time when unparsable).
func (e Event) Time() time.Time {
	t, err := time.Parse(time.RFC3339Nano, e.TS)
	if err != nil {
		return time.Time{}
	}
	return t
}

// StoreTimeout bounds one emit into a store: an emit never holds its
// caller up longer, whatever the database does.
const StoreTimeout = 10 * time.Second

// NSCursors is the store key-value namespace where consumers of the event
// log save their place (a store.Cursor under the consumer's name).
const NSCursors = "cursors"

// callCtx bounds one emit, whose methods take no context.
func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), StoreTimeout)
}

// Sink is where an Emitter's events go: a store.Store (its event log), or
// a File (logs/events.log itself, the files store's event log).
type Sink interface {
	Emit(ctx context.Context, typ, actor string, data any) error
}

// Emitter emits internal events for one actor into a Sink.
type Emitter struct {
	actor string
	sink  Sink
	close func() error // the File the emitter owns (NewEmitter), or nil
}

// NewStoreEmitter returns an emitter writing to st's event log, each event
// on its own (store.Store.Emit; the store stamps ts). A failed emit
// returns its error for the caller to log and never blocks the caller
// past StoreTimeout.
func NewStoreEmitter(st store.Store, actor string) *Emitter {
	return &Emitter{actor: actor, sink: st}
}

// NewEmitter returns an emitter appending to eventsLog (logs/events.log)
// itself, through its own File: for a process that holds no store (a
// soldier).
func NewEmitter(eventsLog, rotateLock, actor string, c clock.Clock) *Emitter {
	f := NewFile(eventsLog, rotateLock, c)
	return &Emitter{actor: actor, sink: f, close: f.Close}
}

// Actor returns the emitter's actor name.
func (e *Emitter) Actor() string { return e.actor }

// Emit records {ts, type, actor, data}. data may be nil, a map or any
// JSON-marshalable value. A nil *Emitter discards.
func (e *Emitter) Emit(typ string, data any) error {
	if e == nil {
		return nil
	}
	return e.EmitAs(typ, e.actor, data)
}

// EmitAs is Emit with an explicit actor (e.g. the king emitting task.* on a
// general's behalf, SPEC §9.7).
func (e *Emitter) EmitAs(typ, actor string, data any) error {
	if e == nil {
		return nil
	}
	raw, err := e.Encode(typ, data)
	if err != nil {
		return err
	}
	ctx, cancel := callCtx()
	defer cancel()
	if err := e.sink.Emit(ctx, typ, actor, raw); err != nil {
		return fmt.Errorf("emit %s: %w", typ, err)
	}
	return nil
}

// Close releases what the emitter owns (a NewEmitter's File); a store
// emitter owns nothing.
func (e *Emitter) Close() error {
	if e == nil || e.close == nil {
		return nil
	}
	return e.close()
}

// Encode turns an event's data (nil, raw JSON, or a value) into the JSON
// Emit records, with secrets redacted. A caller that emits inside its own
// store transaction (queue.Group) records exactly this.
func (e *Emitter) Encode(typ string, data any) (json.RawMessage, error) {
	var raw json.RawMessage
	switch d := data.(type) {
	case nil:
		raw = json.RawMessage("{}")
	case json.RawMessage:
		raw = d
	default:
		b, err := json.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("encode %s data: %w", typ, err)
		}
		raw = b
	}
	// events.log is a log too: secrets never reach it (SPEC §8), e.g. an
	// error text quoting an Authorization header or a token-bearing body.
	// String values are redacted as text, before JSON escaping hides them.
	if logging.MaybeSecret(string(raw)) {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			if b, err := json.Marshal(redactStrings(v)); err == nil {
				raw = b
			}
		}
	}
	return raw, nil
}

// File appends events to logs/events.log: one write(2) per record on an
// O_APPEND descriptor, opened and closed per record while holding a shared
// flock on the rotate lock, so many processes append concurrently and the
// daily split (which takes the lock exclusively) never loses a line (SPEC
// §9.11). It is the files store's event log.
type File struct {
	path  string
	lock  string
	clock clock.Clock

	mu sync.Mutex
	lf *lockfile.File
}

// NewFile returns the writer of eventsLog with the rotation lock
// rotateLock (logs/.rotate.lock); c stamps ts (nil: the real clock).
func NewFile(eventsLog, rotateLock string, c clock.Clock) *File {
	if c == nil {
		c = clock.Real{}
	}
	return &File{path: eventsLog, lock: rotateLock, clock: c}
}

// Emit is Append (the Sink an Emitter writes to); an append does not
// wait, so ctx is unused.
func (f *File) Emit(_ context.Context, typ, actor string, data any) error {
	return f.Append(typ, actor, data)
}

// Append appends one record, data encoded as store.EncodeData does (the
// caller redacts: Emitter.Encode).
func (f *File) Append(typ, actor string, data any) error {
	raw, err := store.EncodeData(data)
	if err != nil {
		return fmt.Errorf("encode %s: %w", typ, err)
	}
	line, err := json.Marshal(Event{TS: f.clock.Now().UTC().Format(time.RFC3339), Type: typ, Actor: actor, Data: raw})
	if err != nil {
		return fmt.Errorf("encode %s: %w", typ, err)
	}
	return f.write(append(line, '\n'))
}

func (f *File) write(line []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lf == nil {
		if err := os.MkdirAll(filepath.Dir(f.lock), 0o700); err != nil {
			return err
		}
		lf, err := lockfile.Open(f.lock)
		if err != nil {
			return err
		}
		f.lf = lf
	}
	if err := f.lf.RLock(); err != nil {
		return err
	}
	defer f.lf.Unlock()
	out, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", f.path, err)
	}
	// One write(2) of the whole line: O_APPEND makes it atomic with respect to
	// other appenders for our line sizes.
	_, werr := out.Write(line)
	cerr := out.Close()
	if werr != nil {
		return fmt.Errorf("append %s: %w", f.path, werr)
	}
	return cerr
}

// Close releases the lock descriptor.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lf != nil {
		err := f.lf.Close()
		f.lf = nil
		return err
	}
	return nil
}

func redactStrings(v any) any {
	switch x := v.(type) {
	case string:
		return logging.Redact(x)
	case map[string]any:
		for k, e := range x {
			x[k] = redactStrings(e)
		}
	case []any:
		for i, e := range x {
			x[i] = redactStrings(e)
		}
	}
	return v
}
