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

	"golang.org/x/sys/unix"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// The delivery journal, state/envoy/deliveries.journal: one line per
// message Slack accepted, appended and fdatasync'd before the message leaves
// pending/ (send.go). The bookkeeping (mappings, awaited questions,
// conversations) is kept in memory and written to the state files at the
// end of each tick, or at once for a change the journal does not carry (an
// inbound reply); then the journal is emptied. A restart loads the files,
// then the journal: each recorded delivery is known again (its message, if
// still pending, is not posted twice), and the bookkeeping of those already
// in sent/ is applied again from their files (bookkeep is idempotent).

// recordReserve is the journal space reserved per message before a tick
// posts anything (a record is ~150 bytes; ids and channels are short).
const recordReserve = 512

type journalEntry struct {
	ID string   `json:"id"`
	D  Delivery `json:"d"`
}

func journalPath(l layout.Layout) string {
	return filepath.Join(l.RoleStateDir(layout.RoleEnvoy), "deliveries.journal")
}

// openJournal opens the journal for appending (st.mu held).
func (st *store) openJournal() error {
	if st.journal != nil {
		return nil
	}
	if err := layout.EnsureDir(filepath.Dir(journalPath(st.l))); err != nil {
		return err
	}
	f, err := os.OpenFile(journalPath(st.l), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open delivery journal: %w", err)
	}
	st.journal = f
	return nil
}

// reserve allocates room in the journal for the records of n messages
// (fallocate, keeping the size), so that no record of this tick can fail
// for want of space once its message is posted: on a full disk it fails
// before anything is posted. A filesystem without fallocate returns an
// error matching errors.ErrUnsupported.
func (st *store) reserve(n int) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.openJournal(); err != nil {
		return err
	}
	fi, err := st.journal.Stat()
	if err != nil {
		return fmt.Errorf("reserve delivery journal: %w", err)
	}
	err = unix.Fallocate(int(st.journal.Fd()), unix.FALLOC_FL_KEEP_SIZE, fi.Size(), int64(n)*recordReserve)
	if err != nil {
		return fmt.Errorf("reserve delivery journal: %w", err)
	}
	return nil
}

// record appends the delivery of message id to the journal and makes it
// durable, then applies it and fn to the in-memory state; the files follow
// at the end of the tick.
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
	if err := st.openJournal(); err != nil {
		return err
	}
	// The leading newline ends a line a crash tore (a power loss can keep
	// part of an append): this record is never glued onto it.
	rec := append(append([]byte{'\n'}, line...), '\n')
	if _, err := st.journal.Write(rec); err != nil {
		return fmt.Errorf("append delivery journal: %w", err)
	}
	if err := unix.Fdatasync(int(st.journal.Fd())); err != nil {
		return fmt.Errorf("sync delivery journal: %w", err)
	}
	s.Deliveries[id] = d
	fn(s)
	st.dirty = true
	return nil
}

// delivered forgets the delivery of a message that reached sent/ (its
// record is needed no more; the journal keeps it until the files are
// written).
func (st *store) delivered(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cached != nil {
		delete(st.cached.Deliveries, id)
		st.dirty = true
	}
}

// mutate runs fn on the in-memory state; a change it reports reaches the
// files at the end of the tick (changes that may wait: a restart would
// redo them).
func (st *store) mutate(fn func(*State) bool) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, _, err := st.current()
	if err != nil {
		return err
	}
	if fn(s) {
		st.dirty = true
	}
	return nil
}

// flush writes the state files changed since the last write and empties
// the journal.
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
		// Durably empty: an old record replayed after a power loss could
		// undo a later change (a question answered since).
		if err := unix.Fdatasync(int(st.journal.Fd())); err != nil {
			return fmt.Errorf("empty delivery journal: %w", err)
		}
		return nil
	}
	if err := os.Truncate(journalPath(st.l), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("empty delivery journal: %w", err)
	}
	return nil
}

// readJournal returns the recorded deliveries; a torn line (a crash
// mid-append, before its message left pending/) and the empty lines
// between records are ignored.
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

// replay re-applies the bookkeeping of deliveries a previous run recorded
// but did not write to the state files, for messages already in sent/
// (those still pending are finished by deliver, which finds their
// delivery). It runs when the state is loaded, before anyone reads it (the
// tick, the socket, `envoy reply` without a running envoy). Reactions were
// added before the message left pending/.
func (e *Envoy) replay(s *State, entries []journalEntry) {
	for _, je := range entries {
		b, err := e.messages.Read(layout.Sent, je.ID)
		if err != nil {
			continue // still pending (deliver finishes it) or gone
		}
		delete(s.Deliveries, je.ID) // in sent/: its record is needed no more
		m, err := schema.DecodeMessage(b)
		if err != nil {
			continue
		}
		e.bookkeep(m, je.D, s)
	}
}
