package king

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/hosts"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// The king's cluster duties (SPEC §11.7): its leadership fences every
// leader write, it fails the tasks of a lost host (HostLost), and a resume
// runs only on the host that ran the asking attempt. The files store has
// one host, always alive, so host loss finds nothing there.

// DefaultTakeover is store.takeover_seconds' default.
const DefaultTakeover = 600 * time.Second

func (k *King) initCluster(o Options) {
	k.takeover = o.Takeover
	if k.takeover <= 0 {
		k.takeover = DefaultTakeover
	}
}

// UseLease implements runner.Leased: every leader write commits only while
// l is the king's current leadership.
func (k *King) UseLease(l store.Lease) { k.lease = l }

// callCtx bounds one store call within the tick.
func (k *King) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(k.ctx(), queue.StoreTimeout)
}

// group runs fn's queue changes as one queue.Group (one store transaction)
// over the king's queues, fenced by its lease.
func (k *King) group(fn func(*queue.GroupTx) error) error {
	ctx, cancel := k.callCtx()
	defer cancel()
	return queue.Group(ctx, func(g *queue.GroupTx) error {
		g.Fence(k.lease)
		return fn(g)
	}, k.events, k.tasks, k.msgs)
}

// reject moves id of q from state to rejected with reason, and emits
// system.file_rejected, in one transaction fenced by the king's lease. A
// document no longer in state is no error (it moved meanwhile).
func (k *King) reject(q *queue.Queue, state, id, reason string) error {
	ctx, cancel := k.callCtx()
	defer cancel()
	err := k.st.Update(ctx, func(tx store.Tx) error {
		if k.lease != nil {
			tx.Fence(k.lease)
		}
		if err := tx.Reject(q.Kind(), state, id, reason); err != nil || k.em == nil {
			return err
		}
		return tx.Emit("system.file_rejected", k.em.Actor(),
			map[string]any{"path": q.Kind() + "/" + state + "/" + id, "reason": reason})
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reject %s %s: %w", q.Kind(), id, err)
	}
	return nil
}

// claimOf returns who holds task's claim (zero when unknown).
func (k *King) claimOf(task string) store.Claim {
	ctx, cancel := k.callCtx()
	defer cancel()
	d, err := k.st.Get(ctx, layout.QTasks, task)
	if err != nil {
		return store.Claim{}
	}
	return d.Claim
}

// lostHosts returns the hosts silent for takeover_seconds, by id.
func (k *King) lostHosts() (map[string]bool, error) {
	ctx, cancel := k.callCtx()
	defer cancel()
	list, err := k.st.Hosts(ctx, k.takeover)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	lost := map[string]bool{}
	for _, h := range list {
		if hosts.TakeoverDue(h, now, k.takeover) {
			lost[h.ID] = true
		}
	}
	return lost, nil
}

// processHostLoss fails, as a retryable HostLost attempt, every task in
// progress on a host silent for takeover_seconds (SPEC §11.7). That host
// stopped claiming and killed its soldiers at self_fence_seconds, earlier,
// so the next attempt never runs beside the lost one; and the lost host's
// late result cannot land: FinishAs is fenced by host and attempt, and
// the retry's attempt differs.
func (k *King) processHostLoss() error {
	lost, err := k.lostHosts()
	if err != nil || len(lost) == 0 {
		return err
	}
	ctx, cancel := k.callCtx()
	defer cancel()
	docs, err := k.st.List(ctx, layout.QTasks, layout.InProgress)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range docs {
		if !lost[d.Claim.Holder] || d.Claim.Holder == k.host {
			continue
		}
		if _, err := k.kv.Get(k.ctx(), kv.NSResults, d.ID); err == nil {
			continue // its result came before the host went: the results step takes it
		}
		var t doc.Task
		if err := k.tasks.ReadJSON(layout.InProgress, d.ID, &t); err != nil {
			continue // moved meanwhile
		}
		if t.Status == doc.TaskRetrying {
			continue // a retry half done: the results step finishes it
		}
		msg := "host " + d.Claim.Holder + " was lost (no lease renewal for " + k.takeover.String() + ")"
		k.em.Emit("task.host_lost", map[string]any{"task_id": t.ID, "host": d.Claim.Holder, "retry_count": t.RetryCount, "general": t.TargetGeneral})
		k.log.Warn("task's host lost", "task", t.ID, "host", d.Claim.Holder, "retry_count", t.RetryCount)
		if err := k.finish(&t, failedResult(&t, doc.ReasonHostLost, msg, false), false); err != nil {
			errs = append(errs, fmt.Errorf("task %s: %w", t.ID, err))
		}
	}
	return errors.Join(errs...)
}

// affinityLost says why a resume (or a conversation follow-up) of the
// task that ran on host cannot run: that host is gone past
// takeover_seconds, and the workspace and the engine's session are there.
// "" when it can run (no host recorded, this host, the host alive).
func (k *King) affinityLost(host string) string {
	if host == "" || host == k.host {
		return ""
	}
	lost, err := k.lostHosts()
	if err != nil || !lost[host] {
		return ""
	}
	return "host " + host + " that ran the asking attempt is gone (no lease renewal for " + k.takeover.String() + "); its workspace and session are lost"
}
