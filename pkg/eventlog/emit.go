// Package eventlog owns logs/events.log, the JSONL stream of internal events
// (seed 001, SPEC §3.3). Producers call Emitter.Emit; the chamberlain reads the
// stream with a Cursor that resumes at a saved byte offset and inode.
// In PostgreSQL mode (SPEC §11.7) the stream is the store's event log: an
// Emitter from NewStoreEmitter writes there, and a StoreReader reads it
// behind the same Reader interface a Cursor satisfies.
//
// Every record is written with one write(2) on an O_APPEND descriptor, opened
// and closed per record while holding a shared flock on logs/.rotate.lock, so
// many processes can append concurrently and the daily split (which takes the
// lock exclusively) never loses a line (SPEC §9.11).
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

// Emitter appends internal events for one actor, to logs/events.log
// (NewEmitter) or to a store's event log (NewStoreEmitter).
type Emitter struct {
	path  string
	lock  string
	actor string
	clock clock.Clock
	st    store.Store // the sink when not nil

	mu sync.Mutex
	lf *lockfile.File
}

// NewEmitter returns an emitter writing to eventsLog (logs/events.log) with
// the rotation lock rotateLock (logs/.rotate.lock).
func NewEmitter(eventsLog, rotateLock, actor string, c clock.Clock) *Emitter {
	if c == nil {
		c = clock.Real{}
	}
	return &Emitter{path: eventsLog, lock: rotateLock, actor: actor, clock: c}
}

// NewStoreEmitter returns an emitter writing to st's event log, each event
// in its own transaction (store.Tx.Emit). The store stamps ts. Like a file
// emit, a failed one returns its error for the caller to log and never
// blocks the caller past StoreTimeout.
func NewStoreEmitter(st store.Store, actor string) *Emitter {
	return &Emitter{actor: actor, clock: clock.Real{}, st: st}
}

// Actor returns the emitter's actor name.
func (e *Emitter) Actor() string { return e.actor }

// Emit appends {ts, type, actor, data} as one line. data may be nil, a map or
// any JSON-marshalable value. A nil *Emitter discards.
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
	if e.st != nil {
		ctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
		defer cancel()
		if err := e.st.Emit(ctx, typ, actor, raw); err != nil {
			return fmt.Errorf("emit %s: %w", typ, err)
		}
		return nil
	}
	line, err := json.Marshal(Event{
		TS:    e.clock.Now().UTC().Format(time.RFC3339),
		Type:  typ,
		Actor: actor,
		Data:  raw,
	})
	if err != nil {
		return fmt.Errorf("encode %s: %w", typ, err)
	}
	line = append(line, '\n')
	return e.write(line)
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

func (e *Emitter) write(line []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lf == nil {
		if err := os.MkdirAll(filepath.Dir(e.lock), 0o700); err != nil {
			return err
		}
		lf, err := lockfile.Open(e.lock)
		if err != nil {
			return err
		}
		e.lf = lf
	}
	if err := e.lf.RLock(); err != nil {
		return err
	}
	defer e.lf.Unlock()
	f, err := os.OpenFile(e.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", e.path, err)
	}
	// One write(2) of the whole line: O_APPEND makes it atomic with respect to
	// other appenders for our line sizes.
	_, werr := f.Write(line)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("append %s: %w", e.path, werr)
	}
	return cerr
}

// Close releases the emitter's lock descriptor.
func (e *Emitter) Close() error {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lf != nil {
		err := e.lf.Close()
		e.lf = nil
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
