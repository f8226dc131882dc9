package queue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// ErrDuplicate is returned by Admit for an event id seen before (the
// store's error, so errors.Is holds on either backend).
var ErrDuplicate = store.ErrDuplicate

// Admitter is the one door for external events into queue/events/pending
// (SPEC §9.19): sentinel watchers, the inbox, the envoy and `envoy reply` all
// use it. An id found in any events state or in the seen index is refused.
//
// On an events queue built with OnStore it admits through the store's
// Admit, whose seen index is the store's own (SeenDir unused): Seen asks
// the store when it can answer (a Seen(ctx, id) (bool, error) method, as
// pkg/store/files and pkg/store/pg have), MarkSeen refuses (a store
// records an id only by admitting it), PruneSeen removes nothing (the
// store's retention owns its seen rows) and AdmitBatch admits one by one.
type Admitter struct {
	Events  *Queue
	SeenDir string

	once sync.Once
	idx  *seenIndex // seen.go
}

// NewAdmitter returns the admitter for the layout.
func NewAdmitter(l layout.Layout, events *Queue) *Admitter {
	return &Admitter{Events: events, SeenDir: l.SeenDir()}
}

func (a *Admitter) index() *seenIndex {
	a.once.Do(func() { a.idx = newSeenIndex(a.SeenDir) })
	return a.idx
}

// seenStore is a store that says whether an id was ever admitted.
type seenStore interface {
	Seen(ctx context.Context, id string) (bool, error)
}

// Seen reports whether id was admitted before (seen journal or marker; on
// a store, its seen index).
func (a *Admitter) Seen(id string) bool {
	if !ids.Valid(id) {
		return false
	}
	if st := a.Events.st; st != nil {
		ss, ok := st.(seenStore)
		if !ok {
			return false
		}
		ctx, cancel := ctxTimeout()
		defer cancel()
		seen, err := ss.Seen(ctx, id)
		return err == nil && seen
	}
	return a.index().seen(id)
}

// Known reports whether id is queued in any events state or seen.
func (a *Admitter) Known(id string) bool {
	if _, ok := a.Events.Find(id); ok {
		return true
	}
	return a.Seen(id)
}

// Admit queues ev (any JSON-marshalable event whose id is id) into
// events/pending unless id is known, then writes the seen marker. It returns
// an error wrapping ErrDuplicate for a known id.
func (a *Admitter) Admit(id string, ev any) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("admit event: %w", err)
	}
	if st := a.Events.st; st != nil {
		b, err := encode(ev)
		if err != nil {
			return fmt.Errorf("admit %s: %w", id, err)
		}
		ctx, cancel := ctxTimeout()
		defer cancel()
		return st.Admit(ctx, id, b)
	}
	if a.Seen(id) {
		return fmt.Errorf("admit %s: %w", id, ErrDuplicate)
	}
	if err := a.Events.PutOnce(layout.Pending, id, ev); err != nil {
		if errors.Is(err, ErrExists) {
			a.MarkSeen(id)
			return fmt.Errorf("admit %s: %w", id, ErrDuplicate)
		}
		return err
	}
	return a.MarkSeen(id)
}

// MarkSeen records id in today's seen journal.
func (a *Admitter) MarkSeen(id string) error {
	if err := ids.Check(id); err != nil {
		return err
	}
	if a.Events.st != nil {
		return fmt.Errorf("mark seen %s: a store records an id only by admitting it", id)
	}
	return a.index().mark([]string{id}, time.Now())
}

// PruneSeen removes seen journals and markers last written more than age
// ago (seed 002: 30 days).
func (a *Admitter) PruneSeen(age time.Duration, now time.Time) (int, error) {
	if a.Events.st != nil {
		return 0, nil
	}
	ents, err := os.ReadDir(a.SeenDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	n := 0
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		if now.Sub(fi.ModTime()) > age {
			if os.Remove(filepath.Join(a.SeenDir, e.Name())) == nil {
				n++
			}
		}
	}
	return n, nil
}

// AdmitBatch admits many events with one group commit (Batch): each
// new id's file is staged, all are committed together (temps fsynced in
// parallel, one directory fsync), then the seen markers are written. It
// returns one error per event, as Admit would: nil, one wrapping
// ErrDuplicate, or a failure (the event is then retried later).
func (a *Admitter) AdmitBatch(idl []string, evs []any) []error {
	errs := make([]error, len(idl))
	if a.Events.st != nil {
		for i, id := range idl {
			errs[i] = a.Admit(id, evs[i])
		}
		return errs
	}
	b := NewBatch()
	staged := make([]*Staged, len(idl))
	seen := a.index().seenMany(idl)
	for i, id := range idl {
		if err := ids.Check(id); err != nil {
			errs[i] = fmt.Errorf("admit event: %w", err)
			continue
		}
		if seen[i] {
			errs[i] = fmt.Errorf("admit %s: %w", id, ErrDuplicate)
			continue
		}
		s, err := b.PutOnce(a.Events, layout.Pending, id, evs[i])
		if err != nil {
			errs[i] = err
			continue
		}
		staged[i] = s
	}
	if err := b.Commit(); err != nil {
		for i, s := range staged {
			if s != nil && s.Err() == nil {
				// Whether this one landed is unknown: report the failure;
				// a retry finds it queued and calls it a duplicate.
				errs[i] = fmt.Errorf("admit %s: %w", idl[i], err)
			}
		}
	}
	var mark []int
	for i, s := range staged {
		if s == nil || errs[i] != nil {
			continue
		}
		if err := s.Err(); err != nil {
			if errors.Is(err, ErrExists) {
				mark = append(mark, i)
				errs[i] = fmt.Errorf("admit %s: %w", idl[i], ErrDuplicate)
			} else {
				errs[i] = err
			}
			continue
		}
		mark = append(mark, i)
	}
	// One append for the whole batch. A failure is reported for the newly
	// queued ones (a duplicate stays a duplicate): their files are queued
	// and durable, so a retry finds them there.
	ml := make([]string, len(mark))
	for j, i := range mark {
		ml[j] = idl[i]
	}
	if err := a.index().mark(ml, time.Now()); err != nil {
		for _, i := range mark {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	return errs
}
