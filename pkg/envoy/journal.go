package envoy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/kingdom-dev/kingdom/pkg/kv"
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

// journal is where deliveries become durable ahead of the documents: the
// file below (file mode), or delivery records in the store (PostgreSQL
// mode, deliveries.go). The store calls it with its mutex held.
type journal interface {
	// reserve makes room for the records of n messages before any post.
	reserve(n int) error
	// begin notes that message id is about to be posted.
	begin(id string) error
	// record makes the delivery of message id durable.
	record(id string, d Delivery) error
	// read returns the recorded deliveries the documents may not hold.
	read() ([]journalEntry, error)
	// settle notes that message id reached sent/ or failed/; it reports
	// whether the next commit has something to do for it.
	settle(id string) bool
	// commit writes the changed documents and empties the journal.
	commit(vs map[string][]byte) error
}

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

// fileJournal is the journal file of file mode; the documents are the
// files of kv (kv.Files).
type fileJournal struct {
	l  layout.Layout
	kv kv.KV
	f  *os.File // open for appending
}

// openJournal opens the journal for appending.
func (st *fileJournal) openJournal() error {
	if st.f != nil {
		return nil
	}
	if err := layout.EnsureDir(filepath.Dir(journalPath(st.l))); err != nil {
		return err
	}
	f, err := os.OpenFile(journalPath(st.l), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open delivery journal: %w", err)
	}
	st.f = f
	return nil
}

// begin: a crash before the record repeats that one post at worst (one
// duplicate line in Slack, never a lost message), so nothing is noted.
func (st *fileJournal) begin(string) error { return nil }

func (st *fileJournal) settle(string) bool { return false }

func (st *fileJournal) commit(vs map[string][]byte) error {
	if len(vs) > 0 {
		if err := st.kv.PutAll(context.Background(), kv.NSEnvoy, vs); err != nil {
			return err
		}
	}
	return st.truncate()
}

// reserve allocates room in the journal for the records of n messages
// (fallocate, keeping the size), so that no record of this tick can fail
// for want of space once its message is posted: on a full disk it fails
// before anything is posted. A filesystem without fallocate returns an
// error matching errors.ErrUnsupported.
func (st *fileJournal) reserve(n int) error {
	if err := st.openJournal(); err != nil {
		return err
	}
	fi, err := st.f.Stat()
	if err != nil {
		return fmt.Errorf("reserve delivery journal: %w", err)
	}
	err = unix.Fallocate(int(st.f.Fd()), unix.FALLOC_FL_KEEP_SIZE, fi.Size(), int64(n)*recordReserve)
	if err != nil {
		return fmt.Errorf("reserve delivery journal: %w", err)
	}
	return nil
}

// record appends the delivery of message id to the journal and makes it
// durable.
func (st *fileJournal) record(id string, d Delivery) error {
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
	if _, err := st.f.Write(rec); err != nil {
		return fmt.Errorf("append delivery journal: %w", err)
	}
	if err := unix.Fdatasync(int(st.f.Fd())); err != nil {
		return fmt.Errorf("sync delivery journal: %w", err)
	}
	return nil
}

func (st *fileJournal) truncate() error {
	if st.f != nil {
		if err := st.f.Truncate(0); err != nil {
			return fmt.Errorf("empty delivery journal: %w", err)
		}
		// Durably empty: an old record replayed after a power loss could
		// undo a later change (a question answered since).
		if err := unix.Fdatasync(int(st.f.Fd())); err != nil {
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
func (st *fileJournal) read() ([]journalEntry, error) {
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
