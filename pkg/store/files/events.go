package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// errFull stops a poll once max events are collected; the eventlog cursor
// then stays before the next line.
var errFull = errors.New("batch full")

// Events reads logs/events.log after cur through an eventlog.Cursor. A
// cursor is the eventlog position (inode, offset) as JSON, so it survives
// the daily split like the chamberlain's.
func (s *Store) Events(ctx context.Context, cur store.Cursor, max int) ([]store.Event, error) {
	if max <= 0 {
		return nil, nil
	}
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if s.rd == nil || s.rpos != cur {
		if err := s.seek(cur); err != nil {
			return nil, err
		}
	}
	var out []store.Event
	_, err := s.rd.Poll(func(ev eventlog.Event) error {
		// The position inside fn is the start of this line: the end of
		// the event before it.
		here := encodePos(s.rd.Position())
		if n := len(out); n > 0 {
			out[n-1].Cursor = here
		}
		if len(out) == max {
			return errFull
		}
		out = append(out, store.Event{TS: ev.TS, Type: ev.Type, Actor: ev.Actor, Data: append(json.RawMessage(nil), ev.Data...)})
		return nil
	})
	if err != nil && !errors.Is(err, errFull) {
		s.rd.Close()
		s.rd = nil
		return nil, fmt.Errorf("read event log: %w", err)
	}
	s.rpos = encodePos(s.rd.Position())
	if n := len(out); n > 0 {
		out[n-1].Cursor = s.rpos
	}
	return out, nil
}

// seek opens a reader at cur. eventlog opens a cursor only from a saved
// position file, so the position goes through a private temp file.
func (s *Store) seek(cur store.Cursor) error {
	if s.rd != nil {
		s.rd.Close()
		s.rd = nil
	}
	var pos eventlog.Position
	if cur != "" {
		if err := json.Unmarshal([]byte(cur), &pos); err != nil {
			return fmt.Errorf("event cursor %q: %w", cur, err)
		}
	}
	f, err := os.CreateTemp(s.dir, ".cursor-*")
	if err != nil {
		return fmt.Errorf("seek event log: %w", err)
	}
	defer os.Remove(f.Name())
	err = json.NewEncoder(f).Encode(pos)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("seek event log: %w", err)
	}
	rd, err := eventlog.OpenCursor(s.l.EventsLog(), f.Name())
	if err != nil {
		return fmt.Errorf("seek event log: %w", err)
	}
	s.rd, s.rpos = rd, cur
	return nil
}

func encodePos(p eventlog.Position) store.Cursor {
	b, _ := json.Marshal(p)
	return store.Cursor(b)
}
