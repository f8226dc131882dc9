package spend

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// A day's ledger is two files (issue #17: recording an attempt must not
// rewrite the whole day): the snapshot <date>.json (Day, indented JSON,
// written whole) and its journal <date>.jsonl, one attempt per line
// ({"key": …, Entry's fields}), appended and fsynced by the king. Load
// reads both; a key in both counts once. The king folds the journal into
// the snapshot when it opens the day (Open), so the journal holds only the
// attempts recorded since.
//
// Crash safety: a line is appended and fsynced before the rename that
// marks its result processed; a crash in mid-append leaves a torn last
// line without its newline, which Load ignores and Open cuts off (that
// attempt's result is processed again and its line rewritten whole).
// Folding writes the snapshot (write-then-rename) before it removes the
// journal, so a crash in between leaves every attempt in both, counted
// once by key.

// JournalPath is the journal beside a snapshot path (<date>.json →
// <date>.jsonl).
func JournalPath(snapshot string) string {
	return strings.TrimSuffix(snapshot, ".json") + ".jsonl"
}

// journalLine is one journal record.
type journalLine struct {
	Key string `json:"key"`
	Entry
}

// replay adds the journal's whole lines to d (keys already present keep
// their entry). It returns the offset just past the last whole line and
// how many whole lines did not decode.
func replay(path string, d *Day) (good int64, bad int, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read spend journal %s: %w", path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxDay {
		return 0, 0, fmt.Errorf("read spend journal %s: %d bytes, over the %d limit", path, st.Size(), maxDay)
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return good, bad, nil // a torn last line (no newline) is not counted
		}
		if err != nil {
			return good, bad, fmt.Errorf("read spend journal %s: %w", path, err)
		}
		good += int64(len(line))
		var jl journalLine
		if json.Unmarshal(bytes.TrimSpace(line), &jl) != nil || jl.Key == "" {
			bad++
			continue
		}
		d.Put(jl.Key, jl.Entry)
	}
}

// Journal is the king's writable ledger of one day: the Day in memory and
// its journal open for appending. It is used by one goroutine.
type Journal struct {
	path string // snapshot
	day  *Day
	f    *os.File
	// byTask indexes the day's keys by task (TaskTotals without a scan).
	byTask map[string][]string
	sum    *Summary // the day's Summary, kept up to date by Record; nil until first asked
}

// Open loads a day's ledger for recording (the king, its only writer):
// the journal's attempts are folded into the snapshot first, and a torn
// last line is cut off. A snapshot that does not decode returns an error
// matching ErrCorrupt (nothing is changed then).
func Open(path, date string) (*Journal, error) {
	d, err := Load(path, date)
	if err != nil {
		return nil, err
	}
	jp := JournalPath(path)
	if _, err := os.Lstat(jp); err == nil {
		if err := layout.EnsureDir(filepath.Dir(path)); err != nil {
			return nil, err
		}
		if err := Save(path, d); err != nil {
			return nil, fmt.Errorf("fold spend journal %s: %w", jp, err)
		}
		if err := os.Remove(jp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("fold spend journal %s: %w", jp, err)
		}
		atomicfile.SyncDir(filepath.Dir(path))
	}
	j := &Journal{path: path, day: d, byTask: map[string][]string{}}
	for k, e := range d.Attempts {
		j.byTask[e.Task] = append(j.byTask[e.Task], k)
	}
	return j, nil
}

// Day is the ledger in memory (read it; record through the Journal).
func (j *Journal) Day() *Day { return j.day }

// Date is the journal's day.
func (j *Journal) Date() string { return j.day.Date }

// Has reports whether key is recorded.
func (j *Journal) Has(key string) bool { return j.day.Has(key) }

// Record appends the attempts not yet recorded, in one write and one
// fsync, and adds them to the Day. It returns how many were new. On an
// error none of them counts in memory; the caller retries them later
// (their keys make a line written twice count once).
func (j *Journal) Record(keys []string, entries []Entry) (int, error) {
	var buf bytes.Buffer
	var newKeys []string
	var newEntries []Entry
	seen := map[string]bool{}
	for i, k := range keys {
		if k == "" || j.day.Has(k) || seen[k] {
			continue
		}
		seen[k] = true
		b, err := json.Marshal(journalLine{Key: k, Entry: entries[i]})
		if err != nil {
			return 0, fmt.Errorf("encode spend entry %s: %w", k, err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
		newKeys = append(newKeys, k)
		newEntries = append(newEntries, entries[i])
	}
	if len(newKeys) == 0 {
		return 0, nil
	}
	if err := j.append(buf.Bytes()); err != nil {
		return 0, err
	}
	for i, k := range newKeys {
		j.day.Attempts[k] = newEntries[i]
		j.byTask[newEntries[i].Task] = append(j.byTask[newEntries[i].Task], k)
		if j.sum != nil {
			// Added as they come: re-summing the day after every record
			// made each attempt cost more than the one before (issue #17).
			// The sum's order differs from Day.Summary's sorted one by at
			// most a few ulps of the day's total.
			j.sum.add(newEntries[i])
		}
	}
	return len(newKeys), nil
}

// append writes whole lines at the journal's end and fsyncs them.
func (j *Journal) append(b []byte) error {
	jp := JournalPath(j.path)
	if j.f == nil {
		if err := layout.EnsureDir(filepath.Dir(jp)); err != nil {
			return err
		}
		f, err := os.OpenFile(jp, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return fmt.Errorf("open spend journal: %w", err)
		}
		// Cut a torn last line (a crash in mid-append) so the next line
		// starts whole.
		var probe Day
		probe.Attempts = map[string]Entry{}
		good, _, err := replay(jp, &probe)
		if err == nil {
			err = f.Truncate(good)
		}
		if err == nil {
			_, err = f.Seek(good, io.SeekStart)
		}
		if err == nil {
			err = atomicfile.SyncDir(filepath.Dir(jp)) // the journal's name is durable
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("open spend journal: %w", err)
		}
		j.f = f
	}
	if _, err := j.f.Write(b); err != nil {
		j.reset()
		return fmt.Errorf("append to spend journal: %w", err)
	}
	if err := syscall.Fdatasync(int(j.f.Fd())); err != nil {
		j.reset()
		return fmt.Errorf("sync spend journal: %w", err)
	}
	return nil
}

// reset closes the journal after a failed append: the next one reopens
// it and cuts whatever part of the failed write reached the file.
func (j *Journal) reset() {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
}

// Close closes the journal file.
func (j *Journal) Close() error {
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// Summary is the day's totals (cached until the next Record).
func (j *Journal) Summary() Summary {
	if j.sum == nil {
		s := j.day.Summary()
		j.sum = &s
	}
	// Record adds to the kept maps: the caller gets its own.
	s := *j.sum
	s.Generals, s.Engines = maps.Clone(s.Generals), maps.Clone(s.Engines)
	return s
}

// TaskTotals sums the day's attempts of task.
func (j *Journal) TaskTotals(task string) Totals {
	keys := append([]string(nil), j.byTask[task]...)
	sort.Strings(keys)
	var t Totals
	for _, k := range keys {
		t.Add(j.day.Attempts[k])
	}
	return t
}
