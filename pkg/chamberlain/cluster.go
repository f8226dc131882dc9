package chamberlain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/chamberlain/retention"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Every host runs a chamberlain for its own resources, heartbeats, hung
// roles, sessions and task dirs, while the cluster duties — the event
// log's accounts and the alerts drawn from it, the money alerts, the daily
// report and the retention of the store — run on one host at a time: the
// one holding the ClusterLease (SPEC §11.7). On one machine (the files
// store) that lease is a flock this host always gets.

// ClusterLease is the store leadership of the cluster duties; it also
// names the event-log reader whose cursor the store keeps for them.
const ClusterLease = "chamberlain-cluster"

// leadCluster reports whether this tick runs the cluster duties: while
// this host holds ClusterLease, asked for without blocking each tick until
// it is held. A held lease is renewed between ticks (renewCluster).
func (r *Role) leadCluster(ctx context.Context) bool {
	if r.lease != nil {
		select {
		case <-r.lease.Lost():
			r.log.Warn("cluster duties lost to another host", "epoch", r.lease.Epoch())
			r.stopRenewing()
			r.lease = nil
		default:
			return true
		}
	}
	lctx, cancel := context.WithTimeout(ctx, eventlog.StoreTimeout)
	l, err := r.st.Lead(lctx, ClusterLease)
	cancel()
	if err != nil {
		if !errors.Is(err, store.ErrHeld) {
			r.log.Warn("take the cluster duties", "err", err)
		}
		return false
	}
	r.lease = l
	r.renewCluster(ctx, l)
	// A new leader resumes the event log where the store's cursor says,
	// not where this host's reader stopped when it last led.
	r.curLoaded = false
	r.log.Info("leading the cluster duties", "epoch", l.Epoch(), "host", r.host)
	return true
}

// renewCluster renews the cluster duties' lease l every store.RenewEvery
// on a timer of its own until it is lost or given up (stopRenewing): one
// not renewed for store.leader_stall_seconds is deposed by another host,
// and the chamberlain ticks only every monitoring.interval_seconds (30 s
// by default), so renewing in its ticks made an idle leader look stalled
// and moved the duties at every gap. A tick that has run for
// Config.LeaderStall renews nothing: that host is stuck, and another may
// take the duties over.
func (r *Role) renewCluster(ctx context.Context, l store.Lease) {
	r.stopRenewing()
	// It outlives the tick that took the lease (not its cancel).
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.stopRenew = cancel
	go store.KeepRenewed(ctx, l, r.renewEvery, r.stalled, r.log)
}

// stopRenewing ends renewCluster's renewals.
func (r *Role) stopRenewing() {
	if r.stopRenew != nil {
		r.stopRenew()
		r.stopRenew = nil
	}
}

// clusterKind: alerts of this kind are the cluster's (from the event log
// or the shared spend), sent by the leader of the cluster duties only.
func clusterKind(kind string) bool {
	switch kind {
	case KindFailures, KindTimeouts, KindResults, KindStale, KindReport, KindBudget, KindPause, KindLedger:
		return true
	}
	return false
}

// clusterAlert is clusterKind for a message (a recovered note takes the
// kind of the alert it ends, the prefix of its key).
func clusterAlert(kind, key string) bool {
	if kind == KindRecovered {
		k, _, _ := strings.Cut(key, "-")
		// engine-paused and spend-ledger carry a dash of their own.
		return clusterKind(k) || strings.HasPrefix(key, KindPause+"-") || strings.HasPrefix(key, KindLedger+"-")
	}
	return clusterKind(kind)
}

// hostScoped names the host in a per-host alert: hosts may share one
// message queue, and two hosts' disk alerts in the same second
// would otherwise share an id (the second never sent) and a text.
func (r *Role) hostScoped(kind, key, content string) (string, string) {
	if r.host == "" || clusterAlert(kind, key) {
		return key, content
	}
	return r.host + "-" + key, "[" + r.host + "] " + content
}

// cleanRows applies the queue retention ages to the store's documents in
// end states (retention.Rows).
func (r *Role) cleanRows(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := retention.Rows(ctx, r.st, r.lease, r.c.Retention, now)
	if n > 0 {
		r.log.Info(fmt.Sprintf("deleted %d expired queue rows", n), "cat", "CLEANUP")
		r.emit("recovery.rows_cleaned", map[string]any{"deleted_count": n})
	}
	return err
}

// trimEvents retires the event log's events older than retention.logs_days
// (store.TrimEvents: the daily split of events.log, or the old rows).
func (r *Role) trimEvents(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := r.st.TrimEvents(ctx, now, config.Days(r.c.Retention.LogsDays))
	if err != nil {
		return err
	}
	r.log.Info(fmt.Sprintf("event log trimmed: %d older than %d days removed", n, r.c.Retention.LogsDays), "cat", "ROTATION")
	return nil
}
