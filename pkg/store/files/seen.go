package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Seen reports whether id was ever admitted (the seen index), without
// admitting it.
func (s *Store) Seen(ctx context.Context, id string) (bool, error) {
	if err := store.Check("events", "", id); err != nil {
		return false, err
	}
	return s.seen.seen(id), nil
}

// Admit queues an external event into events/pending unless its id is
// queued in any events state or in the seen index, then appends the id to
// today's seen journal. It holds the write lock, so two admitters of one
// id (the sentinel and the envoy) never both queue it.
func (s *Store) Admit(ctx context.Context, id string, data []byte) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("admit event: %w", err)
	}
	if _, _, err := store.ParseHeader(data); err != nil {
		return fmt.Errorf("admit %s: not a JSON object: %w", id, err)
	}
	return s.locked(func() error {
		if s.seen.seen(id) {
			return fmt.Errorf("admit %s: %w", id, store.ErrDuplicate)
		}
		if err := s.queues[layout.QEvents].putOnce(layout.Pending, id, data); err != nil {
			if errors.Is(err, store.ErrExists) {
				s.seen.mark([]string{id}, time.Now())
				return fmt.Errorf("admit %s: %w", id, store.ErrDuplicate)
			}
			return err
		}
		return s.seen.mark([]string{id}, time.Now())
	})
}

// The seen index (SPEC §9.19) remembers every admitted external event id
// for 30 days. It is one append-only journal per day in the seen directory,
// "_<YYYY-MM-DD>.ids", one id per line: thirty days of ids are thirty
// files, not one file per event to create, list and expire. The leading
// underscore keeps the name from ever being an event id (§3.2 ids start
// with a letter or digit).
// Each process that admits (sentinel, envoy, `envoy reply`) appends with
// O_APPEND, one write per batch, and reads what the others appended before
// it answers. The chamberlain's retention removes a day file 30 days after
// its last append, exactly as it removed the old markers, and empty marker
// files named by an id (written before the journal) are still honoured.

const seenJournalPrefix = "_"
const seenJournalSuffix = ".ids"

// seenJournalName is the journal file of day t (UTC).
func seenJournalName(t time.Time) string {
	return seenJournalPrefix + t.UTC().Format("2006-01-02") + seenJournalSuffix
}

func isSeenJournal(name string) bool {
	return strings.HasPrefix(name, seenJournalPrefix) && strings.HasSuffix(name, seenJournalSuffix)
}

// seenIndex is one process's view of the journals: the ids read so far and,
// per file, the offset just past its last complete line.
type seenIndex struct {
	mu      sync.Mutex
	dir     string
	ids     map[string]struct{}
	offsets map[string]int64
	// dirMtime is the seen directory's mtime at the last listing; while it
	// stays and the newest journal is today's, no journal came or went and
	// only today's (where every admitter appends) can have grown.
	dirMtime time.Time
	newest   string
}

func newSeenIndex(dir string) *seenIndex {
	return &seenIndex{dir: dir, ids: map[string]struct{}{}, offsets: map[string]int64{}}
}

// refresh reads what was appended to the journals since the last refresh.
// A journal that disappeared (retention) drops the index and rebuilds it
// from the files that remain. Must hold mu.
func (s *seenIndex) refresh() error {
	di, err := os.Stat(s.dir)
	// (Timestamps are coarse, so a journal made in the same tick as the last
	// listing would not move the mtime: today's journal must be the newest
	// known one, else the directory is listed again.)
	if err == nil && s.newest == seenJournalName(time.Now()) && di.ModTime().Equal(s.dirMtime) {
		fi, err := os.Stat(filepath.Join(s.dir, s.newest))
		if err == nil && fi.Size() == s.offsets[s.newest] {
			return nil
		}
		return s.readFrom(s.newest)
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			s.ids, s.offsets, s.newest = map[string]struct{}{}, map[string]int64{}, ""
			return nil
		}
		return fmt.Errorf("read seen index: %w", err)
	}
	if di != nil {
		s.dirMtime = di.ModTime()
	}
	present := map[string]int64{} // name → size
	for _, e := range ents {
		if !isSeenJournal(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil {
			present[e.Name()] = fi.Size()
		}
	}
	for name := range s.offsets {
		if _, ok := present[name]; !ok {
			s.ids, s.offsets = map[string]struct{}{}, map[string]int64{}
			break
		}
	}
	s.newest = ""
	for name, size := range present {
		s.newest = max(s.newest, name) // day names sort by date
		if off, ok := s.offsets[name]; ok && off == size {
			continue // nothing appended since the last read
		}
		if err := s.readFrom(name); err != nil {
			return err
		}
	}
	return nil
}

// readFrom adds the complete lines of journal name past its offset.
func (s *seenIndex) readFrom(name string) error {
	f, err := os.Open(filepath.Join(s.dir, name))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("read seen index: %w", err)
	}
	defer f.Close()
	off := s.offsets[name]
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read seen index: %w", err)
	}
	if fi.Size() < off {
		off = 0 // rewritten by hand: read it again (ids are a set)
	}
	if fi.Size() == off {
		s.offsets[name] = off
		return nil
	}
	data, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if err != nil {
		return fmt.Errorf("read seen index: %w", err)
	}
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		s.offsets[name] = off // only a line still being written
		return nil
	}
	for _, line := range bytes.Split(data[:end], []byte{'\n'}) {
		// A line torn by a crash is not a valid id, or at worst an id
		// nobody sends: either way nothing that was admitted is forgotten.
		if id := string(line); ids.Valid(id) {
			s.ids[id] = struct{}{}
		}
	}
	s.offsets[name] = off + int64(end) + 1
	return nil
}

// seen reports whether id is in the journals or has a marker file.
func (s *seenIndex) seen(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refresh(); err == nil {
		if _, ok := s.ids[id]; ok {
			return true
		}
	}
	_, err := os.Lstat(filepath.Join(s.dir, id))
	return err == nil
}

// mark appends idl to today's journal in one write. Like the marker files
// it replaces it is not fsynced: the event file, durable before this, is
// what refuses a duplicate while it is queued.
func (s *seenIndex) mark(idl []string, now time.Time) error {
	if len(idl) == 0 {
		return nil
	}
	var b bytes.Buffer
	for _, id := range idl {
		if err := ids.Check(id); err != nil {
			return fmt.Errorf("mark seen: %w", err)
		}
		// A leading newline ends any line a crash left unfinished.
		b.WriteByte('\n')
		b.WriteString(id)
	}
	b.WriteByte('\n')
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("mark seen: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(s.dir, seenJournalName(now)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("mark seen: %w", err)
	}
	_, werr := f.Write(b.Bytes())
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("mark seen %s: %w", idl[0], werr)
	}
	s.mu.Lock()
	for _, id := range idl {
		s.ids[id] = struct{}{}
	}
	s.mu.Unlock()
	return nil
}
