package general

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/outputs"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// runOutputs carries out the side effects a result asks for (SPEC §12.3),
// after its soldier exited and before the final result is published:
// only a successful attempt's, each once across restarts, hosts and
// retried attempts (pkg/outputs keeps the records), and only while this
// host holds the attempt's claim. The outcomes go into the final result.
// An error wrapping store.ErrFenced means the claim is gone: nothing more
// ran, and the attempt is lost.
func (g *General) runOutputs(ctx context.Context, t *doc.Task, ws workspace, r *doc.RawResult) ([]doc.OutputOutcome, error) {
	if len(r.Outputs) == 0 {
		return nil, nil
	}
	if r.Status != doc.ResultSuccess {
		return outputs.NotRun(r.Outputs, r.Status), nil
	}
	jira, _ := t.Payload["ticket_key"].(string)
	tgt := outputs.Target{TaskID: t.ID, Repo: ws.Repo, PR: payloadInt(t.Payload, "pr_number"),
		Issue: payloadInt(t.Payload, "issue_number"), JiraKey: jira}
	run := outputs.Runner{Store: g.o.Store, Services: g.services, Policy: g.o.Manifest.Outputs, Target: tgt,
		Held:        func(ctx context.Context) error { return g.holds(ctx, t) },
		CallTimeout: g.o.System.Store.CallTimeout(), Now: g.o.Clock.Now}
	if ws.Repo != "" && ws.Clone != "" && exists(ws.RepoDir) {
		run.Pusher = &pusher{g: g, ws: ws}
	}
	// A shutdown does not cut a call in half: each runs to its answer or
	// its own timeout, and its end is recorded.
	return run.Run(context.WithoutCancel(ctx), t.ID, t.RetryCount, r.Outputs)
}

// holds reports whether this host still holds the claim of t's attempt
// (store.ErrFenced when not): a fenced-out attempt's outputs never run.
func (g *General) holds(ctx context.Context, t *doc.Task) error {
	if g.leaseStale() {
		return fmt.Errorf("host %s is fenced: %w", g.o.Host, store.ErrFenced)
	}
	return g.claimHeld(ctx, t)
}

// claimHeld is nil while an in-progress attempt of t is this host's to
// settle; else its claim names another holder or attempt (or none: its
// result is written) or the task is gone (both store.ErrFenced), or the
// store did not answer (decide nothing now).
func (g *General) claimHeld(ctx context.Context, t *doc.Task) error {
	cctx, cancel := g.callCtx(ctx)
	defer cancel()
	d, err := g.o.Store.Get(cctx, layout.QTasks, t.ID)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("task %s is gone: %w", t.ID, store.ErrFenced)
	}
	if err != nil {
		return err
	}
	if d.State != layout.InProgress || d.Claim != g.claimOf(t) {
		return fmt.Errorf("claim of %s attempt %d is no longer %s's: %w", t.ID, t.RetryCount, g.o.Host, store.ErrFenced)
	}
	return nil
}

// payloadInt reads a positive number from the payload (the sentinel
// writes pr_number as a string).
func payloadInt(p map[string]any, key string) int {
	switch v := p[key].(type) {
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err == nil && n > 0 {
			return n
		}
	case float64:
		if v > 0 && v == float64(int(v)) {
			return int(v)
		}
	case int:
		if v > 0 {
			return v
		}
	}
	return 0
}
