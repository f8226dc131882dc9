package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// errFull stops a poll once max events are collected; the eventlog cursor
// then stays before the next line.
var errFull = errors.New("batch full")

// Events reads logs/events.log after cur (logcursor.go). A cursor is the
// position (inode, offset) as JSON, so it survives the daily split.
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
	_, err := s.rd.poll(func(ev eventlog.Event) error {
		// The position inside fn is the start of this line: the end of
		// the event before it.
		here := encodePos(s.rd.pos)
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
		s.rd.close()
		s.rd = nil
		return nil, fmt.Errorf("read event log: %w", err)
	}
	s.rpos = encodePos(s.rd.pos)
	if n := len(out); n > 0 {
		out[n-1].Cursor = s.rpos
	}
	return out, nil
}

// seek opens a reader at cur.
func (s *Store) seek(cur store.Cursor) error {
	if s.rd != nil {
		s.rd.close()
		s.rd = nil
	}
	var pos logPos
	if cur != "" {
		if err := json.Unmarshal([]byte(cur), &pos); err != nil {
			return fmt.Errorf("event cursor %q: %w", cur, err)
		}
	}
	s.rd, s.rpos = &logCursor{path: s.l.EventsLog(), pos: pos}, cur
	return nil
}

func encodePos(p logPos) store.Cursor {
	b, _ := json.Marshal(p)
	return store.Cursor(b)
}
