package spend

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// A day's ledger is <date>.jsonl beside the path the callers name
// (layout.SpendDay, <date>.json): one line per attempt, {"key": …,
// Entry's fields}, appended by the king with O_APPEND and fdatasynced
// before the rename that marks the attempt's result processed. Nothing
// rewrites it and no summary is stored: every figure is read from it
// (readers read it whole; the king's Journal reads what was appended since
// its last read).
//
// Crash safety: a crash in mid-append leaves a torn last line (no
// newline); readers ignore it, and the king's next append cuts it first,
// since that attempt's result was not marked processed and is recorded
// again whole. O_APPEND puts every write at the file's current end, so a
// file cut short while the king runs gets its next line right after what
// is left, never behind a run of NUL bytes.
//
// Damage (a line that does not decode, NUL bytes before a record) is
// skipped, counted in Day.Damaged and returned as a *DamageError; what
// still parses counts. A <date>.json snapshot written by earlier versions
// is still read (never written).

// maxDay bounds a ledger read (a day of many thousand attempts fits).
const maxDay = 64 << 20

// ErrDamaged is matched by Load's error when some of a day's records could
// not be read.
var ErrDamaged = errors.New("spend ledger damaged")

// ErrCorrupt is ErrDamaged's former name.
//
// Deprecated: a damaged ledger is no longer refused: Load keeps what
// parses and reports the rest as a *DamageError (ErrDamaged).
var ErrCorrupt = ErrDamaged

// DamageError reports records of a day's ledger that could not be read.
type DamageError struct {
	Path    string
	Records int   // how many records (lines) were skipped
	Err     error // the first reason
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("spend ledger %s: %d damaged records skipped (the day's figures are a lower bound): %v", e.Path, e.Records, e.Err)
}

// Is makes a *DamageError match ErrDamaged.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

func (e *DamageError) Unwrap() error { return e.Err }

// JournalPath is the day's ledger file for path (<date>.json or
// <date>.jsonl → <date>.jsonl).
func JournalPath(path string) string {
	return strings.TrimSuffix(strings.TrimSuffix(path, ".jsonl"), ".json") + ".jsonl"
}

// snapshotPath is where earlier versions kept a day's snapshot.
func snapshotPath(path string) string { return strings.TrimSuffix(JournalPath(path), "l") }

// journalLine is one ledger record.
type journalLine struct {
	Key string `json:"key"`
	Entry
}

// Load reads a day's ledger; a missing file is an empty day. Records that
// do not decode are skipped and counted (Day.Damaged) and the error is a
// *DamageError; a file that cannot be read at all gives another error and
// a Day with Damaged set, so its figures never pass for the whole day's.
func Load(path, date string) (*Day, error) {
	d := &Day{Date: date, Attempts: map[string]Entry{}}
	_, err := d.read(path)
	return d, err
}

// read adds the ledger's records to d and returns the size of its whole
// lines (where the next append belongs).
func (d *Day) read(path string) (int64, error) {
	var dmg DamageError
	dmg.Path = JournalPath(path)
	if err := d.readSnapshot(snapshotPath(path)); err != nil {
		dmg.Path, dmg.Records, dmg.Err = snapshotPath(path), 1, err
	}
	end, bad, err := d.readJournal(JournalPath(path), 0)
	if err != nil {
		d.Damaged += dmg.Records + 1 // the day's figure is unknown
		return end, fmt.Errorf("read spend ledger %s: %w", JournalPath(path), err)
	}
	if bad.Records > 0 {
		if dmg.Err == nil {
			dmg.Path, dmg.Err = bad.Path, bad.Err
		}
		dmg.Records += bad.Records
	}
	d.Damaged += dmg.Records
	if dmg.Records > 0 {
		return end, &dmg
	}
	return end, nil
}

// readJournal adds the file's whole lines from offset from to d (a key
// already present keeps its entry). It returns the offset past the last
// whole line and the damaged lines.
func (d *Day) readJournal(path string, from int64) (end int64, bad DamageError, err error) {
	bad.Path = path
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return from, bad, nil
	}
	if err != nil {
		return from, bad, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return 0, bad, err
	} else if st.Size() > maxDay {
		return 0, bad, fmt.Errorf("%d bytes, over the %d limit", st.Size(), maxDay)
	}
	end = from
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return end, bad, err
	}
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return end, bad, nil // a torn last line is not counted
		}
		if err != nil {
			return end, bad, err
		}
		end += int64(len(line))
		if derr := d.putLine(line); derr != nil {
			bad.Records++
			if bad.Err == nil {
				bad.Err = fmt.Errorf("line %d: %w", n, derr)
			}
		}
	}
}

// putLine adds one record. NUL bytes before a record mark lost bytes (a
// file cut short and written past its end): the record counts, the loss
// is reported.
func (d *Day) putLine(line []byte) error {
	rec := bytes.TrimSpace(line)
	if len(rec) == 0 {
		return nil
	}
	trimmed := bytes.TrimLeft(rec, "\x00")
	var jl journalLine
	if err := json.Unmarshal(trimmed, &jl); err != nil {
		return err
	}
	if jl.Key == "" {
		return errors.New("record without a key")
	}
	d.Put(jl.Key, jl.Entry)
	if len(trimmed) != len(rec) {
		return fmt.Errorf("%d NUL bytes before a record", len(rec)-len(trimmed))
	}
	return nil
}

// readSnapshot adds the attempts of a snapshot written by earlier versions
// ({"date", "attempts": {key: entry}}); a torn one keeps the attempts
// before the damage.
func (d *Day) readSnapshot(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	dec := json.NewDecoder(io.LimitReader(f, maxDay))
	delim := func(want json.Delim) error {
		t, err := dec.Token()
		if err == nil && t != want {
			err = fmt.Errorf("%v where %v belongs", t, want)
		}
		return err
	}
	if err := delim('{'); err != nil {
		return err
	}
	for dec.More() {
		name, err := dec.Token()
		if err != nil {
			return err
		}
		if name != "attempts" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
			continue
		}
		if err := delim('{'); err != nil {
			return err
		}
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return err
			}
			var e Entry
			if err := dec.Decode(&e); err != nil {
				return err
			}
			if k, _ := key.(string); k != "" {
				d.Put(k, e)
			}
		}
		if err := delim('}'); err != nil {
			return err
		}
	}
	return delim('}')
}

// Journal is the king's handle on one day's ledger, its only writer. It
// keeps the ledger as last read and, the file being append-only, reads
// only the lines added since (a day of 10,000 attempts takes ~130 ms to
// read whole, the king asks after every result and before every
// admission); a file replaced or cut short, or an earlier version's
// snapshot changed, is read whole again. It is used by one goroutine.
type Journal struct {
	path, date string
	day        *Day        // the ledger as read; nil: read it whole
	file, snap os.FileInfo // the ledger file and snapshot day was read from (nil: none)
	end        int64       // where the file's whole lines end
}

// Open returns the day's ledger for recording. It does no I/O; a damaged
// ledger shows in Summary (Totals.Damaged), never as a refusal to record.
func Open(path, date string) (*Journal, error) { return &Journal{path: path, date: date}, nil }

// Date is the journal's day.
func (j *Journal) Date() string { return j.date }

// read brings the ledger up to date with the files. Its error is never a
// *DamageError: damage is in Day.Damaged.
func (j *Journal) read() (*Day, error) {
	fi, err := os.Stat(JournalPath(j.path))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return j.whole()
	}
	si, _ := os.Stat(snapshotPath(j.path))
	switch {
	case j.day == nil, !sameStamp(j.snap, si), j.file != nil && (fi == nil || !os.SameFile(j.file, fi) || fi.Size() < j.end):
		return j.whole()
	case fi == nil || fi.Size() == j.end:
		return j.day, nil
	}
	end, bad, err := j.day.readJournal(JournalPath(j.path), j.end)
	if err != nil {
		return j.whole()
	}
	j.day.Damaged += bad.Records
	j.file, j.end = fi, end
	return j.day, nil
}

// whole reads the ledger whole.
func (j *Journal) whole() (*Day, error) {
	j.file, _ = os.Stat(JournalPath(j.path))
	j.snap, _ = os.Stat(snapshotPath(j.path))
	d := &Day{Date: j.date, Attempts: map[string]Entry{}}
	end, err := d.read(j.path)
	if err != nil && !errors.Is(err, ErrDamaged) {
		j.day = nil // the next read starts over
		return d, err
	}
	j.day, j.end = d, end
	return d, nil
}

func sameStamp(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// Summary is the day's totals as the file says now. An unreadable or
// damaged file gives Totals.Damaged > 0.
func (j *Journal) Summary() Summary {
	d, _ := j.read()
	return d.Summary()
}

// TaskTotals sums the day's attempts of task.
func (j *Journal) TaskTotals(task string) Totals {
	d, _ := j.read()
	return d.TaskTotals(task)
}

// Close is a no-op: a Journal holds no open file.
func (j *Journal) Close() error { return nil }

// Record appends the attempts the ledger does not hold yet, in one write
// and one fdatasync, and returns how many were new. After an error the
// caller retries them later (their keys make a line written twice count
// once). Damaged lines do not stop it: what they held is unknown, and a
// key among them is recorded again.
func (j *Journal) Record(keys []string, entries []Entry) (int, error) {
	d, err := j.read()
	if err != nil {
		return 0, err // without the recorded keys a repeat would count twice
	}
	var buf bytes.Buffer
	seen := map[string]bool{}
	for i, k := range keys {
		if k == "" || d.Has(k) || seen[k] {
			continue
		}
		seen[k] = true
		b, err := json.Marshal(journalLine{Key: k, Entry: entries[i]})
		if err != nil {
			return 0, fmt.Errorf("encode spend entry %s: %w", k, err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if len(seen) == 0 {
		return 0, nil
	}
	// The lines count in memory once read back (the next read): a failed
	// append leaves nothing that claims them.
	if err := appendLines(JournalPath(j.path), j.end, buf.Bytes()); err != nil {
		return 0, err
	}
	return len(seen), nil
}

// appendLines appends whole lines to the ledger at path and fdatasyncs
// them. end is the size of the file's whole lines: a torn tail past it
// (a crash in mid-append) is cut first, so the new lines start whole.
func appendLines(path string, end int64, b []byte) error {
	if err := layout.EnsureDir(filepath.Dir(path)); err != nil {
		return err
	}
	_, statErr := os.Lstat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("open spend ledger: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err == nil && st.Size() > end {
		err = f.Truncate(end)
	}
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = syscall.Fdatasync(int(f.Fd()))
	}
	if err == nil {
		err = f.Close()
	}
	if err == nil && errors.Is(statErr, fs.ErrNotExist) {
		err = atomicfile.SyncDir(filepath.Dir(path)) // the new file's name is durable
	}
	if err != nil {
		return fmt.Errorf("append to spend ledger %s: %w", path, err)
	}
	return nil
}

// Save records d's attempts that the ledger at path does not hold yet
// (Journal.Record, in key order): a way to seed or merge a day.
func Save(path string, d *Day) error {
	keys := d.keys("")
	entries := make([]Entry, len(keys))
	for i, k := range keys {
		entries[i] = d.Attempts[k]
	}
	j, _ := Open(path, d.Date)
	_, err := j.Record(keys, entries)
	return err
}
