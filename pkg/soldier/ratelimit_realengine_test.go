package soldier

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/modelfake"
	"github.com/kingdom-dev/kingdom/pkg/doc"
)

// shortBackoff makes the rig's re-runs after a server rate limit
// immediate: n of them.
func shortBackoff(r *realRig, n int) {
	r.backoff = make([]time.Duration, n)
	for i := range r.backoff {
		r.backoff[i] = time.Millisecond
	}
}

// firstThen answers the first n requests with rep, then with next.
func firstThen(n int, rep modelfake.Reply, next modelfake.Script) modelfake.Script {
	var mu sync.Mutex
	seen := 0
	return func(r modelfake.Request) modelfake.Reply {
		mu.Lock()
		seen++
		k := seen
		mu.Unlock()
		if k <= n {
			return rep
		}
		return next(r)
	}
}

func rateLimit(retry string) modelfake.Reply {
	return modelfake.Reply{Status: http.StatusTooManyRequests, ErrType: "rate_limit_error",
		ErrMessage: "Number of request tokens has exceeded your per-minute rate limit",
		Headers:    map[string]string{"x-should-retry": retry, "retry-after": "1"}}
}

// A server rate limit (a 429 naming no usage limit) is retried inside the
// attempt and the task succeeds: no UsageLimited, so no pause of the
// engine (SPEC §12.4). The real claude gives up on an x-should-retry:
// false 429 at once; the soldier runs it again after its backoff.
func TestRealClaude_ServerRateLimitIsRetriedNotAPause(t *testing.T) {
	r := newRealRig(t, "claude")
	shortBackoff(r, 2)
	r.fake.Script("SCEN-rl", firstThen(1, rateLimit("false"),
		modelfake.Always(so(map[string]any{"status": "success", "summary": "reviewed after the rate limit"}))))
	out := r.run("task-20260101-031", "SCEN-rl review", t.TempDir(), "")
	if out.Raw["status"] != doc.ResultSuccess || out.Raw["summary"] != "reviewed after the rate limit" || out.Raw["resets_at"] != nil {
		t.Fatalf("raw %v, want the success of the re-run", out.Raw)
	}
	reqs := r.fake.Requests("SCEN-rl")
	if len(reqs) < 2 {
		t.Fatalf("%d requests: the rate-limited run was not run again", len(reqs))
	}
	// A 429 on the first call leaves no transcript: the re-run starts
	// afresh with the task's prompt.
	if last := reqs[len(reqs)-1]; !last.HasText("SCEN-rl review") {
		t.Fatal("the re-run did not carry the task's prompt")
	}
}

// With x-should-retry: true the CLI retries by itself first (api_retry
// lines, its retries bounded here by CLAUDE_CODE_MAX_RETRIES); when it gives
// up, the soldier's re-run still makes the task succeed.
func TestRealClaude_ShouldRetry429IsRetriedNotAPause(t *testing.T) {
	r := newRealRig(t, "claude")
	shortBackoff(r, 2)
	r.env = append(r.env, "CLAUDE_CODE_MAX_RETRIES=1")
	r.sys.Runtime.EnvPassthrough = append(r.sys.Runtime.EnvPassthrough, "CLAUDE_CODE_MAX_RETRIES")
	r.fake.Script("SCEN-rlt", firstThen(2, rateLimit("true"),
		modelfake.Always(so(map[string]any{"status": "success", "summary": "done after the retries"}))))
	out := r.run("task-20260101-032", "SCEN-rlt review", t.TempDir(), "")
	if out.Raw["status"] != doc.ResultSuccess || out.Raw["resets_at"] != nil {
		t.Fatalf("raw %v, want the success of the re-run", out.Raw)
	}
	if n := len(r.fake.Requests("SCEN-rlt")); n < 3 {
		t.Fatalf("%d requests, want the CLI's retry and the soldier's re-run", n)
	}
}

// A rate limit that outlasts every re-run is a retryable EngineError that
// says so, never UsageLimited.
func TestRealClaude_PersistentServerRateLimitIsARetryableFailure(t *testing.T) {
	r := newRealRig(t, "claude")
	shortBackoff(r, 1)
	r.fake.Script("SCEN-rlp", modelfake.Always(rateLimit("false")))
	out := r.run("task-20260101-033", "SCEN-rlp review", t.TempDir(), "")
	e, _ := out.Raw["error"].(string)
	if out.Raw["error_reason"] != doc.ReasonEngineError || out.Raw["resets_at"] != nil || out.Raw["terminal"] == true {
		t.Fatalf("raw %v, want a retryable EngineError", out.Raw)
	}
	if !strings.Contains(e, "server rate limit") || !strings.Contains(e, "per-minute rate limit") {
		t.Fatalf("error %q does not name the rate limit in the engine's words", e)
	}
	if n := len(r.fake.Requests("SCEN-rlp")); n != 2 {
		t.Fatalf("%d requests, want the run and one re-run", n)
	}
}
