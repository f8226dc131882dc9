package operator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// Status is the one-screen state of an installation (kingdom.go reads
// this host's part).
type Status struct {
	Kingdom
	// Paused is the operator's pause (nil when not paused); Discarded counts
	// the events no general took, from logs/events.log (operator.go).
	Paused    *control.Pause
	Discarded int
	Money     *MoneyStatus // spend and engine pauses (money.go)
	Waiting   *Waiting     // why work is held (waiting.go)
	Parks     *Parks       // the breaker's parks with their evidence (parks.go)
	// Threshold is the chamberlain's heartbeat threshold (statusdoc.go);
	// At is when the status was read.
	Threshold time.Duration
	At        time.Time
	// Cluster is the store's hosts and leaders.
	Cluster *Cluster
	// TmuxErr: the tmux socket could not be reached ("tmux socket <path>
	// unreachable: …"); the sessions are unknown, the roles judged by
	// their heartbeats.
	TmuxErr error
}

// ReadStatus gathers the status without changing anything. The queue
// depths, the pauses, the waits, the parks, the spend and the cluster are the shared
// store's (OpenShared): a store that cannot be opened leaves them unknown,
// each with its error, and the rest (this host's roles, soldiers, health)
// is still shown.
func ReadStatus(ctx context.Context, l layout.Layout, tc *tmux.Client, now time.Time) (*Status, error) {
	sh, openErr := OpenShared(ctx, l)
	if openErr != nil {
		sh = &Shared{Layout: l, KV: unreadable{openErr}, Queues: map[string]*queue.Queue{}}
	} else {
		defer sh.Close()
	}
	k, tmuxErr := ReadKingdom(ctx, l, tc, now, sh.Queues)
	if tmuxErr != nil && !errors.Is(tmuxErr, tmux.ErrUnreachable) {
		tmuxErr = fmt.Errorf("tmux socket %s unreachable: %w", tc.Path(), tmuxErr)
	}
	st := &Status{Kingdom: *k, TmuxErr: tmuxErr, Discarded: countDiscarded(l), Money: readMoney(ctx, sh, now),
		Waiting: &Waiting{}, Parks: readParks(ctx, sh.KV), Threshold: heartbeatThreshold(l), At: now, Cluster: &Cluster{Err: openErr}}
	st.Waiting.Record, st.Waiting.Err = waits.Read(ctx, sh.KV)
	st.Paused, _ = control.ReadPause(ctx, sh.KV)
	if openErr != nil {
		st.QueuesErr = openErr
	} else {
		st.Cluster = ReadCluster(ctx, sh.Store, sh.Config)
	}
	return st, nil
}

// Print writes the status as a readable table, its verdict first.
func (s *Status) Print(w io.Writer) {
	s.Verdict().print(w)
	if s.StartPID > 0 {
		fmt.Fprintf(w, "start: running (pid %d)\n\n", s.StartPID)
	} else {
		fmt.Fprintf(w, "start: not running\n\n")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tSESSION\tHEARTBEAT\tLEADER PID")
	for _, r := range s.Roles {
		sess := "down"
		switch {
		case s.TmuxErr != nil:
			sess = "unknown"
		case r.SessionAlive && s.Cluster.leaderElsewhere(r.Name):
			sess = "standby (leader on " + s.Cluster.Leaders[r.Name].Holder + ")"
		case r.SessionAlive:
			sess = "alive"
		}
		hb := "never"
		if r.HeartbeatAge >= 0 {
			hb = r.HeartbeatAge.Round(time.Second).String() + " ago"
		}
		pid := "-"
		if r.LeaderPID > 0 {
			pid = fmt.Sprint(r.LeaderPID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, sess, hb, pid)
	}
	tw.Flush()
	if s.TmuxErr != nil {
		fmt.Fprintf(w, "warning: %v\n", s.TmuxErr)
	}
	fmt.Fprintln(w)
	s.Cluster.print(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tSTATES")
	for _, kind := range QueueKinds {
		var parts []string
		for _, st := range layout.QueueStates[kind] {
			parts = append(parts, fmt.Sprintf("%s=%d", st, s.Queues[kind][st]))
		}
		fmt.Fprintf(tw, "%s\t%s\n", kind, strings.Join(parts, " "))
	}
	tw.Flush()
	if s.QueuesErr != nil {
		fmt.Fprintf(w, "warning: queues: %v\n", s.QueuesErr)
	}
	fmt.Fprintf(w, "\nactive soldiers: %d\n", s.ActiveSoldiers)
	s.printOperator(w)
	s.Money.print(w)
	s.Waiting.print(w, s.At)
	s.Parks.print(w, s.At)
	if s.HealthErr != nil {
		fmt.Fprintf(w, "health: unknown (%v)\n", s.HealthErr)
		return
	}
	h := s.Health
	stale := ""
	if h.Stale {
		stale = " (resources.json stale: treated as orange)"
	}
	fmt.Fprintf(w, "health: %s%s\ntokens: %s\n", h.Health, stale, h.TokenStatus)
}

// unreadable is the shared state when the store cannot be opened: every
// read reports why, so each part of the status says it is unknown.
type unreadable struct{ err error }

func (u unreadable) Get(context.Context, string, string) ([]byte, error)     { return nil, u.err }
func (u unreadable) Put(context.Context, string, string, []byte) error       { return u.err }
func (u unreadable) PutAll(context.Context, string, map[string][]byte) error { return u.err }
func (u unreadable) Delete(context.Context, string, string) error            { return u.err }
func (u unreadable) List(context.Context, string) (map[string][]byte, error) {
	return nil, u.err
}
func (u unreadable) Update(context.Context, string, string, func([]byte) ([]byte, error)) error {
	return u.err
}
