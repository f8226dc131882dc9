package queue

import (
	"context"
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// ErrDuplicate is returned by Admit for an event id seen before (the
// store's error).
var ErrDuplicate = store.ErrDuplicate

// Admitter is the one door for external events into events/pending (SPEC
// §9.19): sentinel watchers, the inbox, the envoy and `envoy reply` all
// use it. It admits through the store's Admit, which refuses an id queued
// in any events state or in the store's seen index (the files store: the
// day journals of state/sentinel/seen/; PostgreSQL: its seen rows, kept
// by the store's retention).
type Admitter struct {
	Events *Queue
}

// NewAdmitter returns the admitter of the events queue (l is unused: the
// store owns where the seen index lives).
func NewAdmitter(_ layout.Layout, events *Queue) *Admitter {
	return &Admitter{Events: events}
}

// seenStore is a store that says whether an id was ever admitted (both
// stores are).
type seenStore interface {
	Seen(ctx context.Context, id string) (bool, error)
}

// Seen reports whether id was admitted before (the store's seen index).
func (a *Admitter) Seen(id string) bool {
	ss, ok := a.Events.st.(seenStore)
	if !ok || !ids.Valid(id) {
		return false
	}
	ctx, cancel := ctxTimeout()
	defer cancel()
	seen, err := ss.Seen(ctx, id)
	return err == nil && seen
}

// Known reports whether id is queued in any events state or seen.
func (a *Admitter) Known(id string) bool {
	if _, ok := a.Events.Find(id); ok {
		return true
	}
	return a.Seen(id)
}

// Admit queues ev (any JSON-marshalable event whose id is id) into
// events/pending unless id is known. It returns an error wrapping
// ErrDuplicate for a known id.
func (a *Admitter) Admit(id string, ev any) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("admit event: %w", err)
	}
	b, err := encode(ev)
	if err != nil {
		return fmt.Errorf("admit %s: %w", id, err)
	}
	ctx, cancel := ctxTimeout()
	defer cancel()
	return a.Events.st.Admit(ctx, id, b)
}

// AdmitBatch admits many events, one Admit each. It returns one error per
// event, as Admit would: nil, one wrapping ErrDuplicate, or a failure (the
// event is then retried later).
func (a *Admitter) AdmitBatch(idl []string, evs []any) []error {
	errs := make([]error, len(idl))
	for i, id := range idl {
		errs[i] = a.Admit(id, evs[i])
	}
	return errs
}
