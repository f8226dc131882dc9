package spend

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Where the day ledgers live. File mode keeps each day in this host's
// <date>.jsonl (journal.go). In PostgreSQL mode spend is shared state
// (SPEC §11.7): the day is kept in the shared store's key-value, so a king
// on another host after a failover counts on from the day's spend instead
// of re-opening the budget at zero, and every host's readers see it.
//
// The store keeps one entry per attempt in the namespace "spend-<date>":
// its value is the attempt's ledger line (the same JSON a journal line
// holds, key included), its key the SHA-256 of the attempt key (Key's "#"
// is no valid store key, and a task id alone may fill the 200 bytes a key
// may have). An attempt is recorded once: Record writes only the keys the
// day does not hold yet, and an entry written again (a repeat after a
// crash, two kings during a failover) lands on the same key, so it never
// counts twice. An entry that does not decode is skipped and counted as
// damage, as a damaged line is.

// Ledger is one day's ledger open for recording: the king's handle, its
// only writer. It is used by one goroutine.
type Ledger interface {
	// Date is the ledger's day.
	Date() string
	// Record records the attempts the day does not hold yet and returns
	// how many were new; after an error the caller retries them later.
	Record(keys []string, entries []Entry) (int, error)
	// Summary is the day's totals now; an unreadable or damaged day gives
	// Totals.Damaged > 0.
	Summary() Summary
	// TaskTotals sums the day's attempts of task.
	TaskTotals(task string) Totals
	Close() error
}

// Days is where a kingdom's day ledgers are kept: one choice per role,
// made where it learns its mode (FileDays, StoreDays).
type Days struct {
	l  layout.Layout
	kv kv.KV // nil: the files under l
}

// FileDays is file mode's ledgers: this host's files under l.
func FileDays(l layout.Layout) Days { return Days{l: l} }

// StoreDays is PostgreSQL mode's ledgers: the shared key-value s
// (kv.OnStore).
func StoreDays(s kv.KV) Days { return Days{kv: s} }

// Open returns the day's ledger for recording (no I/O). ctx bounds the
// store reads and writes of the ledger's whole life.
func (d Days) Open(ctx context.Context, date string) Ledger {
	if d.kv == nil {
		return OpenFiles(d.l.SpendDay(date), date)
	}
	return OpenKV(ctx, d.kv, date)
}

// Load reads a day's ledger (Load, LoadKV).
func (d Days) Load(ctx context.Context, date string) (*Day, error) {
	if d.kv == nil {
		return Load(d.l.SpendDay(date), date)
	}
	return LoadKV(ctx, d.kv, date)
}

// OpenFiles is Open as a Ledger.
func OpenFiles(path, date string) Ledger {
	j, _ := Open(path, date)
	return j
}

// Namespace is the store namespace of a day's attempts ("spend-<date>");
// an error for a date that is not YYYY-MM-DD.
func Namespace(date string) (string, error) {
	if _, err := time.Parse("2006-01-02", date); err != nil {
		return "", fmt.Errorf("spend ledger day %q: not a YYYY-MM-DD date", date)
	}
	return "spend-" + date, nil
}

// entryKey is the store key of an attempt key.
func entryKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// LoadKV reads a day's ledger from the store's key-value; a day without
// entries is an empty day. Entries that do not decode are skipped and
// counted (Day.Damaged) and the error is a *DamageError; a namespace that
// cannot be read gives another error and a Day with Damaged set, so its
// figures never pass for the whole day's (Load's rules).
func LoadKV(ctx context.Context, s kv.KV, date string) (*Day, error) {
	d := &Day{Date: date, Attempts: map[string]Entry{}}
	ns, err := Namespace(date)
	if err == nil {
		var vs map[string][]byte
		if vs, err = s.List(ctx, ns); err == nil {
			return d, d.readEntries(ns, vs)
		}
	}
	d.Damaged++ // the day's figure is unknown
	return d, fmt.Errorf("read spend ledger %s: %w", date, err)
}

// readEntries adds the namespace's entries to d in key order (every
// reader gets the same float sum).
func (d *Day) readEntries(ns string, vs map[string][]byte) error {
	keys := make([]string, 0, len(vs))
	for k := range vs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bad := DamageError{Path: "store namespace " + ns}
	for _, k := range keys {
		if err := d.putLine(vs[k]); err != nil {
			bad.Records++
			if bad.Err == nil {
				bad.Err = fmt.Errorf("entry %s: %w", k, err)
			}
		}
	}
	if bad.Records == 0 {
		return nil
	}
	d.Damaged += bad.Records
	return &bad
}

// kvLedger is a day's ledger in the store's key-value.
type kvLedger struct {
	ctx  context.Context
	kv   kv.KV
	date string
}

// OpenKV returns the day's ledger in s for recording (no I/O); ctx bounds
// its reads and writes.
func OpenKV(ctx context.Context, s kv.KV, date string) Ledger {
	return &kvLedger{ctx: ctx, kv: s, date: date}
}

func (l *kvLedger) Date() string { return l.date }

func (l *kvLedger) Close() error { return nil }

// Summary reads the day whole: the store is shared, so nothing read
// earlier is known to be current.
func (l *kvLedger) Summary() Summary {
	d, _ := LoadKV(l.ctx, l.kv, l.date)
	return d.Summary()
}

func (l *kvLedger) TaskTotals(task string) Totals {
	d, _ := LoadKV(l.ctx, l.kv, l.date)
	return d.TaskTotals(task)
}

// Record writes the attempts the day does not hold yet in one
// transaction. An entry that does not decode holds no known attempt: an
// attempt whose key lands on it is recorded over it.
func (l *kvLedger) Record(keys []string, entries []Entry) (int, error) {
	d, err := LoadKV(l.ctx, l.kv, l.date)
	if err != nil && !errors.Is(err, ErrDamaged) {
		return 0, err // without the recorded keys a repeat would count twice
	}
	ns, _ := Namespace(l.date) // LoadKV checked it
	vs := map[string][]byte{}
	for i, k := range keys {
		if k == "" || d.Has(k) {
			continue
		}
		if _, dup := vs[entryKey(k)]; dup {
			continue
		}
		b, err := json.Marshal(journalLine{Key: k, Entry: entries[i]})
		if err != nil {
			return 0, fmt.Errorf("encode spend entry %s: %w", k, err)
		}
		vs[entryKey(k)] = b
	}
	if len(vs) == 0 {
		return 0, nil
	}
	if err := l.kv.PutAll(l.ctx, ns, vs); err != nil {
		return 0, fmt.Errorf("record %d attempts in spend ledger %s: %w", len(vs), l.date, err)
	}
	return len(vs), nil
}
