package soldier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/logging"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// Backoff between publication attempts that failed to write (a full
// disk): short at first, so a freed disk is noticed soon, and bounded, so a
// soldier waiting on a long outage costs next to nothing.
const (
	publishRetryFirst = 100 * time.Millisecond
	publishRetryMax   = 5 * time.Second
)

// maxReplacements bounds how often one publication attempt removes a raw
// result that is not a killer's before it gives up for this round (an
// agent's leftover process that keeps writing one).
const maxReplacements = 3

// EventResultForged is emitted when the soldier found a raw result written
// neither by itself nor by whoever stops soldiers, and removed it.
const EventResultForged = "soldier.result_forged"

// publisher publishes one attempt's raw result (SPEC §9.5).
type publisher struct {
	l       layout.Layout
	task    string
	soldier string
	general string
	log     *slog.Logger
}

func newPublisher(l layout.Layout, o RunOptions) *publisher {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	return &publisher{l: l, task: o.TaskID, soldier: o.SoldierID, general: o.General, log: log}
}

// publish writes the redacted raw result as <task>-raw.json with a
// no-replace create, and only then removes the agent's staging file
// (written with the agent's umask, it would otherwise stay forever). A
// write that fails (a full disk) is retried with a bounded backoff until ctx
// ends; the staging file stays meanwhile, so the agent's result is never
// lost and the attempt never has to run again for it. A raw result already
// there wins only when a killer wrote it (see killersResult); any other is
// the agent's forgery, since the agent runs as the same user: it is
// removed, and ours published.
func (p *publisher) publish(ctx context.Context, raw map[string]any) error {
	// What the agent returns passes the one redactor (SPEC §10.14) before
	// it reaches disk: every string of the raw result.
	b, err := json.MarshalIndent(redact.Value(raw), "", "  ")
	if err != nil {
		return fmt.Errorf("encode raw result %s: %w", p.task, err)
	}
	b = append(b, '\n')
	wait, last, failures := publishRetryFirst, "", 0
	for {
		err := p.once(b)
		if err == nil {
			if failures > 0 {
				p.log.Info("raw result published", "task", p.task, "failed_attempts", failures)
			}
			_ = os.Remove(p.l.ResultStaging(p.task))
			return nil
		}
		failures++
		// Logged once per change of cause, not once per attempt (each
		// names its own temp): a full disk can last hours.
		if c := rootCause(err); c != last {
			last = c
			p.log.Warn("publish raw result; the agent's result is kept and the publication retried",
				"task", p.task, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("publish raw result %s: %w (gave up: %w)", p.task, err, context.Cause(ctx))
		case <-t.C:
		}
		wait = min(2*wait, publishRetryMax)
	}
}

// once makes b the published raw result unless a killer's is there.
func (p *publisher) once(b []byte) error {
	path := p.l.ResultRaw(p.task)
	for range maxReplacements {
		err := atomicfile.CreateNoReplace(path, b, 0o600)
		if !errors.Is(err, atomicfile.ErrExists) {
			return err
		}
		old, rerr := atomicfile.ReadLimited(path, maxResultBytes)
		if errors.Is(rerr, fs.ErrNotExist) {
			continue // gone meanwhile
		}
		if rerr == nil && killersResult(old, p.task) {
			return nil // the general or the king decided (Timeout, Cancelled)
		}
		// Removed, not moved aside: nothing would ever read or clean a
		// rejected raw result, and the session log keeps what the agent did.
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("remove forged raw result %s: %w", path, err)
		}
		p.forged(old, rerr)
	}
	return fmt.Errorf("publish raw result %s: replaced by another writer %d times", p.task, maxReplacements)
}

// forged reports a removed forged raw result in the log and the event log.
func (p *publisher) forged(content []byte, readErr error) {
	excerpt := redact.Clip(logging.Redact(string(content)), 200)
	if readErr != nil {
		excerpt = readErr.Error()
	}
	p.log.Warn("raw result written by neither this soldier nor a killer (the agent's?): removed",
		"task", p.task, "soldier", p.soldier, "content", excerpt)
	actor := p.soldier
	if actor == "" {
		actor = "soldier-spawn"
	}
	em := eventlog.NewEmitter(p.l.EventsLog(), p.l.RotateLock(), actor, nil)
	defer em.Close()
	if err := em.Emit(EventResultForged, map[string]any{"task_id": p.task, "soldier_id": p.soldier,
		"general": p.general}); err != nil {
		p.log.Warn("emit "+EventResultForged, "task", p.task, "err", err)
	}
}

// killersResult reports whether b is a raw result that whoever stops a
// running soldier wrote for task: the general's Timeout or the king's (or
// general's) Cancelled. Those are failures with no origin (the soldier
// marks every agent result with doc.RawOrigin) and nothing but the fields
// their writers set; they stand for the attempt's decided end and win over
// the soldier's late result. Any other raw result found in place before
// the soldier published cannot be genuine: the general writes SoldierDied
// only for a soldier it saw gone, and this one is alive. An agent can
// still write a killer's shape, but that only ends its own attempt as a
// terminal failure: it claims no success, no retry and no usage.
func killersResult(b []byte, task string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	for k := range m {
		switch k {
		case "task_id", "status", "summary", "error", "error_reason", "terminal", "retry_count":
		default:
			return false // origin, usage, cost_usd, fallback, …
		}
	}
	var r struct {
		TaskID      string `json:"task_id"`
		Status      string `json:"status"`
		ErrorReason string `json:"error_reason"`
	}
	if json.Unmarshal(b, &r) != nil || r.TaskID != task || r.Status != doc.ResultFailed {
		return false
	}
	return r.ErrorReason == doc.ReasonTimeout || r.ErrorReason == doc.ReasonCancelled
}

// rootCause is the text of err's innermost cause (ENOSPC's "no space left
// on device", whatever file it was met on).
func rootCause(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}
