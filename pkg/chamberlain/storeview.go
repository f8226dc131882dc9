package chamberlain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/hosts"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// What the verdict reads of the store beyond the queues (SPEC §12.2): its
// leaderships (a leader role another host leads stands by here, it is not
// down), its hosts registry (a host silent past takeover_seconds is lost
// until an operator forgets it), the event log's horizon (one transaction
// left open anywhere on the server freezes it) and whether the store
// answers at all — this check's own calls and every role's outage record
// (state/<role>/store-unreachable.json, written by the runner).

// heldBackAfter is how long the event log may hold a row back before the
// verdict names the open transaction that does it: a busy server holds
// rows for moments all the time.
const heldBackAfter = 3 * time.Minute

// Outage is a role's record of a store it cannot reach (runner:
// layout.StoreUnreachable).
type Outage struct {
	Since time.Time `json:"since"`
	Error string    `json:"error"`
}

// reason reads "store unreachable since <time>: <error>".
func (o *Outage) reason() string {
	return fmt.Sprintf("store unreachable since %s: %s", o.Since.In(time.Local).Format("2006-01-02 15:04:05 MST"), redact.Clip(o.Error, 300))
}

// readOutage returns role's outage record, nil when there is none (or it
// does not read: the runner writes it whole, by rename).
func readOutage(l layout.Layout, role string) *Outage {
	b, err := os.ReadFile(l.StoreUnreachable(role))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return &Outage{Error: err.Error()}
		}
		return nil
	}
	var o Outage
	if json.Unmarshal(b, &o) != nil {
		return nil
	}
	return &o
}

// storeFailed files a store call's error: one that says the store cannot
// be reached becomes the report's StoreErr (the first one), any other is
// a thing that could not be read.
func (r *Role) storeFailed(rep *Report, what string, err error) {
	if err == nil {
		return
	}
	if store.Unreachable(err) {
		if rep.StoreErr == nil {
			rep.StoreErr = &Outage{Since: rep.Time, Error: err.Error()}
			// The daemon's own record says since when (this check may be
			// the daemon, or beside it).
			if o := readOutage(r.l, layout.RoleChamberlain); o != nil && !o.Since.IsZero() {
				rep.StoreErr.Since = o.Since
			}
			rep.storeErr = err
		}
		return
	}
	rep.Errors = append(rep.Errors, what+": "+err.Error())
}

// observeStore reads the leaderships, the hosts registry and the event
// log's horizon, each bounded; the first call that finds the store
// unreachable stops the rest (and the tick's other store reads).
func (r *Role) observeStore(ctx context.Context, rep *Report) {
	ctx, cancel := context.WithTimeout(ctx, eventlog.StoreTimeout)
	defer cancel()
	ls, err := r.st.Leaders(ctx)
	if r.storeFailed(rep, "leaders", err); rep.StoreErr != nil {
		return
	}
	rep.Leaders = ls
	hs, err := r.st.Hosts(ctx, r.cfg.SelfFence)
	if r.storeFailed(rep, "hosts", err); rep.StoreErr != nil {
		return
	}
	for _, h := range hs {
		if !h.Alive && hosts.TakeoverDue(h, rep.Time, r.cfg.Takeover) {
			rep.Lost = append(rep.Lost, h)
		}
	}
	h, err := r.st.EventHorizon(ctx)
	if r.storeFailed(rep, "event log horizon", err); err == nil {
		rep.Horizon = &h
	}
}

// leaderElsewhere returns the host that holds role's leadership when that
// is a live session on another host: this host's instance stands by, and
// its missing heartbeat is no fault. A holder the store does not name is
// this machine (store.LeaderInfo).
func (rep *Report) leaderElsewhere(role, self string) string {
	li, ok := rep.Leaders[role]
	if !ok || !li.Held || li.Holder == "" || li.Holder == self {
		return ""
	}
	return li.Holder
}

// storeProblems are the store's reasons for a verdict: it cannot be
// reached (down), a host is lost, the event log is held back (degraded).
func (rep *Report) storeProblems(raise func(int, Problem)) {
	if o := rep.StoreErr; o != nil {
		raise(VerdictDown, Problem{Check: "store", Reason: o.reason()})
	}
	for _, h := range rep.Lost {
		since := h.RenewedAt
		if !h.ListedAt.IsZero() {
			since = h.ListedAt.Add(-h.Age) // the reader's clock, as the rest of the verdict
		}
		raise(VerdictDegraded, Problem{Check: "host", Reason: fmt.Sprintf("%s lost since %s; `start hosts forget %s` once it is retired",
			h.ID, since.In(time.Local).Format("2006-01-02 15:04:05 MST"), h.ID)})
	}
	if h := rep.Horizon; h != nil && h.Held > 0 && h.HeldFor >= heldBackAfter {
		since := h.Since
		if since.IsZero() {
			since = rep.Time.Add(-h.HeldFor)
		}
		who := ""
		if h.Oldest != "" {
			who = " (" + h.Oldest + ")"
		}
		raise(VerdictDegraded, Problem{Check: "event log", Reason: fmt.Sprintf(
			"held back by an open transaction since %s%s: %d event%s wait behind it; no role sees them until it ends (commit it, or pg_terminate_backend its pid)",
			since.In(time.Local).Format("2006-01-02 15:04:05 MST"), who, h.Held, plural(h.Held))})
	}
}
