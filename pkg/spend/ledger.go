package spend

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/kv"
)

// Where the day ledgers live: the store's key-value, in both modes. In
// PostgreSQL mode spend is shared state (SPEC §11.7), so a king on another
// host after a failover counts on from the day's spend instead of
// re-opening the budget at zero, and every host's readers see it; the
// files store keeps a day in state/king/spend/<date>/, one file per
// attempt.
//
// The store keeps one entry per attempt in the namespace "spend-<date>":
// its value is the attempt's record ({"key": …, Entry's fields}), its key
// the SHA-256 of the attempt key (Key's "#" is no valid store key, and a
// task id alone may fill the 200 bytes a key may have). An attempt is
// recorded once: Record writes only the keys the day does not hold yet,
// and an entry written again (a repeat after a crash, two kings during a
// failover) lands on the same key, so it never counts twice.
//
// Damage: an entry that does not decode costs that entry only. It is
// skipped, counted in Day.Damaged (and so in Totals.Damaged, which holds
// admission while a daily budget is set and raises the chamberlain's
// alert), and Load's error is a *DamageError naming it; every other entry
// of the day still counts.

// ErrDamaged is matched by Load's error when some of a day's records could
// not be read.
var ErrDamaged = errors.New("spend ledger damaged")

// DamageError reports records of a day's ledger that could not be read.
type DamageError struct {
	Path    string
	Records int   // how many records were skipped
	Err     error // the first reason
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("spend ledger %s: %d damaged records skipped (the day's figures are a lower bound): %v", e.Path, e.Records, e.Err)
}

// Is makes a *DamageError match ErrDamaged.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

func (e *DamageError) Unwrap() error { return e.Err }

// record is one ledger entry as stored.
type record struct {
	Key string `json:"key"`
	Entry
}

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

// Days is where a kingdom's day ledgers are kept: the store's key-value.
type Days struct{ kv kv.KV }

// StoreDays is the ledgers kept in s (kv.OnStore of the role's store).
func StoreDays(s kv.KV) Days { return Days{kv: s} }

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

// Load reads a day's ledger; a day without entries is an empty day.
// Entries that do not decode are skipped and counted (Day.Damaged) and the
// error is a *DamageError; a namespace that cannot be read gives another
// error and a Day with Damaged set, so its figures never pass for the
// whole day's.
func (d Days) Load(ctx context.Context, date string) (*Day, error) {
	day := &Day{Date: date, Attempts: map[string]Entry{}}
	ns, err := Namespace(date)
	if err == nil {
		var vs map[string][]byte
		if vs, err = d.kv.List(ctx, ns); err == nil {
			return day, day.readEntries(ns, vs)
		}
	}
	day.Damaged++ // the day's figure is unknown
	return day, fmt.Errorf("read spend ledger %s: %w", date, err)
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
		if err := d.putRecord(vs[k]); err != nil {
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

// putRecord adds one stored record.
func (d *Day) putRecord(b []byte) error {
	var r record
	if err := json.Unmarshal(bytes.TrimSpace(b), &r); err != nil {
		return err
	}
	if r.Key == "" {
		return errors.New("record without a key")
	}
	d.Put(r.Key, r.Entry)
	return nil
}

// ledger is a day's ledger in the store's key-value.
type ledger struct {
	ctx  context.Context
	days Days
	date string
}

// Open returns the day's ledger for recording (no I/O); ctx bounds its
// reads and writes. A damaged ledger shows in Summary (Totals.Damaged),
// never as a refusal to record.
func (d Days) Open(ctx context.Context, date string) Ledger {
	return &ledger{ctx: ctx, days: d, date: date}
}

func (l *ledger) Date() string { return l.date }

func (l *ledger) Close() error { return nil }

// Summary reads the day whole: the store may be shared, so nothing read
// earlier is known to be current.
func (l *ledger) Summary() Summary {
	d, _ := l.days.Load(l.ctx, l.date)
	return d.Summary()
}

func (l *ledger) TaskTotals(task string) Totals {
	d, _ := l.days.Load(l.ctx, l.date)
	return d.TaskTotals(task)
}

// Record writes the attempts the day does not hold yet in one
// transaction. An entry that does not decode holds no known attempt: an
// attempt whose key lands on it is recorded over it.
func (l *ledger) Record(keys []string, entries []Entry) (int, error) {
	d, err := l.days.Load(l.ctx, l.date)
	if err != nil && !errors.Is(err, ErrDamaged) {
		return 0, err // without the recorded keys a repeat would count twice
	}
	ns, _ := Namespace(l.date) // Load checked it
	vs := map[string][]byte{}
	for i, k := range keys {
		if k == "" || d.Has(k) {
			continue
		}
		if _, dup := vs[entryKey(k)]; dup {
			continue
		}
		b, err := json.Marshal(record{Key: k, Entry: entries[i]})
		if err != nil {
			return 0, fmt.Errorf("encode spend entry %s: %w", k, err)
		}
		vs[entryKey(k)] = b
	}
	if len(vs) == 0 {
		return 0, nil
	}
	if err := l.days.kv.PutAll(l.ctx, ns, vs); err != nil {
		return 0, fmt.Errorf("record %d attempts in spend ledger %s: %w", len(vs), l.date, err)
	}
	return len(vs), nil
}
