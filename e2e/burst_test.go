package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// burstKing is king.yaml for the failing burst: retries at once (backoff
// 0, a valid setting: a retry moved by a put then a remove could lose its
// task to a general claiming in between) and the breaker's correlated
// failures off (failure_threshold 0): thirty alike first-attempt failures
// would otherwise park gen-work after five, which is the breaker working,
// not what this test is about.
const burstKing = "concurrency:\n  max_soldiers: 9\nretry:\n  max_attempts: 3\n  backoff_seconds: 0\n  max_backoff_seconds: 0\n" +
	"breaker:\n  failure_threshold: 0\n"

// TestCluster_FailingBurstRetriedAtOnce (issue #33 "No event is lost or
// stuck with any valid retry setting (backoff 0 included) on one and three
// hosts, under a burst of failing-then-succeeding tasks"): 30 events whose
// first attempt fails and whose second succeeds, retried with backoff 0,
// on one host and on three sharing one PostgreSQL: each event ends as one
// task, completed on its second attempt, with one ✅, and no attempt runs
// twice.
func TestCluster_FailingBurstRetriedAtOnce(t *testing.T) {
	for _, hosts := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d hosts", hosts), func(t *testing.T) { failingBurst(t, hosts) })
	}
}

func failingBurst(t *testing.T, hosts int) {
	c := newCluster(t, clusterOpts{hosts: hosts, proxied: -1, files: map[string]string{"config/king.yaml": burstKing}})
	c.Start()
	const n = 30
	var events []string
	dropped := time.Now()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("evt-failburst-%02d", i)
		events = append(events, id)
		c.Drop(i%hosts, id, map[string]any{"n": i, "fail_once": true})
	}
	c.Eventually(fmt.Sprintf("%d failing-then-succeeding events to complete with their ✅", n), 3*time.Minute, func() bool {
		return c.allDone(events)
	})
	t.Logf("FIGURE: %d events, each failing once and retried with backoff 0, done on %d host(s) in %v", n, hosts,
		time.Since(dropped).Round(time.Millisecond))
	time.Sleep(3 * time.Second) // more rounds of every role: a duplicate would show now
	c.checkExactlyOnce(events)
	byEvent := c.TasksByEvent()
	runs := map[string]int{}
	perHost := map[string]int{}
	for _, r := range c.Runs() {
		runs[r.Task]++
		perHost[r.Host]++
	}
	t.Logf("soldier runs per host: %v", perHost)
	for _, ev := range events {
		ts := byEvent[ev]
		if len(ts) != 1 {
			continue // checkExactlyOnce said so
		}
		tk := ts[0]
		if tk.RetryCount != 1 {
			t.Errorf("task %s of %s ended with retry_count %d, want 1 (one failure, one retry)", tk.ID, ev, tk.RetryCount)
		}
		if runs[tk.ID] != 2 {
			t.Errorf("task %s of %s ran %d times, want twice (the failure and its retry)", tk.ID, ev, runs[tk.ID])
		}
		if r := c.Result(tk.ID); r == nil || r.Status != doc.ResultSuccess {
			t.Errorf("task %s of %s: final result %+v, want success", tk.ID, ev, r)
		}
	}
	for _, st := range []string{layout.Pending, layout.InProgress} {
		if m := c.Count(layout.QTasks, st); m != 0 {
			t.Errorf("%d tasks left in %s", m, st)
		}
	}
	if g := c.GivenUp(); len(g) > 0 {
		t.Errorf("start gave a role up: %v", g)
	}
}
