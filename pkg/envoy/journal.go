package envoy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// The delivery journal (issue #17). Recording a delivery used to rewrite
// deliveries.json and thread-mappings.json for every message — a cost that
// grew with the number of open threads. Now a delivery is one appended,
// fdatasync'd line of state/envoy/deliveries.journal, written before the
// message leaves pending/ (the same point the deliveries.json write held);
// its bookkeeping (mappings, awaited questions, conversations) stays in
// memory, and the state files are rewritten once at the end of the tick,
// after which the journal is emptied. A restart loads the files, then the
// journal: each recorded delivery is known again (its message, if still
// pending, is not posted twice), and the bookkeeping of those already in
// sent/ is applied again from their files (bookkeep is idempotent).

type journalEntry struct {
	ID string   `json:"id"`
	D  Delivery `json:"d"`
}

func journalPath(l layout.Layout) string {
	return filepath.Join(l.RoleStateDir(layout.RoleEnvoy), "deliveries.journal")
}

// record appends the delivery of message id to the journal (durably), then
// applies it and fn to the in-memory state; the files follow at flush.
func (st *store) record(id string, d Delivery, fn func(*State)) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, _, err := st.current()
	if err != nil {
		return err
	}
	line, err := json.Marshal(journalEntry{ID: id, D: d})
	if err != nil {
		return err
	}
	if st.journal == nil {
		if err := layout.EnsureDir(filepath.Dir(journalPath(st.l))); err != nil {
			return err
		}
		f, err := os.OpenFile(journalPath(st.l), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("open delivery journal: %w", err)
		}
		st.journal = f
	}
	if _, err := st.journal.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("append delivery journal: %w", err)
	}
	if err := st.journal.Sync(); err != nil {
		return fmt.Errorf("sync delivery journal: %w", err)
	}
	s.Deliveries[id] = d
	fn(s)
	st.dirty = true
	return nil
}

// flush writes the state files changed since the last write and empties
// the journal (end of a tick).
func (st *store) flush() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.dirty || st.cached == nil {
		return nil
	}
	if err := st.writeChanged(st.cached, st.raw); err != nil {
		return err
	}
	st.dirty = false
	return nil
}

func (st *store) truncateJournal() error {
	if st.journal != nil {
		if err := st.journal.Truncate(0); err != nil {
			return fmt.Errorf("empty delivery journal: %w", err)
		}
		return nil
	}
	if err := os.Truncate(journalPath(st.l), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("empty delivery journal: %w", err)
	}
	return nil
}

// readJournal returns the recorded deliveries; a torn last line (a crash
// mid-append, before its message left pending/) is ignored.
func (st *store) readJournal() ([]journalEntry, error) {
	b, err := os.ReadFile(journalPath(st.l))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read delivery journal: %w", err)
	}
	var out []journalEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var je journalEntry
		if json.Unmarshal(sc.Bytes(), &je) == nil && je.ID != "" {
			out = append(out, je)
		}
	}
	return out, nil
}

// takeReplay returns (once) the journal entries a load found.
func (st *store) takeReplay() []journalEntry {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := st.replay
	st.replay = nil
	return out
}

// replayJournal re-applies the bookkeeping of deliveries a previous run
// recorded but did not write to the state files, for messages already in
// sent/ (those still pending are finished by deliver, which finds their
// delivery). Reactions were added before the message left pending/.
func (e *Envoy) replayJournal() error {
	if err := e.st.view(func(*State) {}); err != nil { // load (and find the journal)
		return err
	}
	entries := e.st.takeReplay()
	if len(entries) == 0 {
		return nil
	}
	return e.st.update(func(s *State) error {
		for _, je := range entries {
			b, err := e.messages.Read(layout.Sent, je.ID)
			if err != nil {
				continue // still pending (deliver finishes it) or gone
			}
			m, err := schema.DecodeMessage(b)
			if err != nil {
				continue
			}
			e.bookkeep(m, je.D, s)
		}
		return nil
	})
}
