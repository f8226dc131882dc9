package e2e

// Money and limits, end to end (SPEC §10.6, §10.8): the kingdom's real
// binaries run the real `claude` and `codex` CLIs (node_modules/.bin)
// against pkg/modelfake behind limitGate, a small front that answers the
// usage limits the way the providers do (HTTP 429 with the provider's error
// body and, for claude's subscription mode, its rate-limit headers). One
// kingdom with a claude and a codex general; the limited tasks of an engine
// are held at a barrier until all of them have reached the fake, so they
// all run before the engine is paused.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/modelfake"
	"github.com/kingdom-dev/kingdom/internal/testkit/slackfake"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// limitReply is how the gate answers a limited request.
type limitReply struct {
	status  int
	headers map[string]string
	body    string
}

// limitGate answers requests whose body carries a registered marker with
// that marker's limit until its engine's reset, after the marker's whole
// group has arrived; everything else goes to the model fake.
type limitGate struct {
	srv   *httptest.Server
	proxy *httputil.ReverseProxy

	mu      sync.Mutex
	limits  map[string]limitReply // marker → reply
	group   map[string]string     // marker → group (engine)
	until   map[string]time.Time  // group → when the limit lifts
	want    map[string]int        // group → markers expected at the barrier
	arrived map[string]map[string]bool
	seen    map[string][]time.Time // marker → request times
}

func newLimitGate(t *testing.T, model *modelfake.Server) *limitGate {
	u, _ := url.Parse(model.URL)
	g := &limitGate{
		proxy:  httputil.NewSingleHostReverseProxy(u),
		limits: map[string]limitReply{}, group: map[string]string{}, until: map[string]time.Time{},
		want: map[string]int{}, arrived: map[string]map[string]bool{}, seen: map[string][]time.Time{},
	}
	// An API error the fake answers is final, as a provider's limit is:
	// without this the CLIs retry it for minutes.
	g.proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.StatusCode >= 400 {
			resp.Header.Set("x-should-retry", "false")
		}
		return nil
	}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.srv.Close)
	return g
}

// limit registers marker in group: answered with rep until the group's
// reset.
func (g *limitGate) limit(group, marker string, rep limitReply) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.limits[marker], g.group[marker] = rep, group
	g.want[group]++
}

func (g *limitGate) setUntil(group string, t time.Time) {
	g.mu.Lock()
	g.until[group] = t
	g.mu.Unlock()
}

// requests are the times the requests of marker arrived.
func (g *limitGate) requests(marker string) []time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]time.Time(nil), g.seen[marker]...)
}

func (g *limitGate) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	now := time.Now()
	g.mu.Lock()
	marker := ""
	for m := range g.limits {
		if bytes.Contains(body, []byte(m)) && len(m) > len(marker) {
			marker = m
		}
	}
	if marker == "" {
		for m := range g.seen { // markers of plain scenarios, recorded by touch
			if bytes.Contains(body, []byte(m)) && len(m) > len(marker) {
				marker = m
			}
		}
	}
	if marker != "" {
		g.seen[marker] = append(g.seen[marker], now)
	}
	rep, limited := g.limits[marker]
	grp := g.group[marker]
	if limited && now.Before(g.until[grp]) {
		if g.arrived[grp] == nil {
			g.arrived[grp] = map[string]bool{}
		}
		g.arrived[grp][marker] = true
		// The barrier: every limited task of the engine reaches the model
		// before any of them is answered, so none is held back by the
		// pause its neighbour caused (a guard of 90 s, not a timing).
		deadline := time.Now().Add(90 * time.Second)
		for len(g.arrived[grp]) < g.want[grp] && time.Now().Before(deadline) {
			g.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			g.mu.Lock()
		}
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-should-retry", "false")
		for k, v := range rep.headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rep.status)
		io.WriteString(w, rep.body)
		return
	}
	g.mu.Unlock()
	g.proxy.ServeHTTP(w, r)
}

// track records the requests of a marker the gate does not limit.
func (g *limitGate) track(marker string) {
	g.mu.Lock()
	if _, ok := g.seen[marker]; !ok {
		g.seen[marker] = nil
	}
	g.mu.Unlock()
}

const limitWait = 240 * time.Second

// clock12 is a time as the CLIs write it: "3:47pm".
func clock12(t time.Time, zone string) string {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		panic(err)
	}
	return strings.ToLower(t.In(loc).Format("3:04pm"))
}

func anthropicError(errType, msg string) string {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": errType, "message": msg}})
	return string(b)
}

func eventsOf(k *Kingdom, typ string) []map[string]any {
	var out []map[string]any
	for _, ev := range k.InternalEvents() {
		if ev.Type == typ {
			var d map[string]any
			json.Unmarshal(ev.Data, &d)
			out = append(out, d)
		}
	}
	return out
}

func allEvents(k *Kingdom, typ string) []eventlog.Event {
	var out []eventlog.Event
	for _, ev := range k.InternalEvents() {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// allMessages are the messages in every state.
func allMessages(k *Kingdom) []doc.Message {
	var out []doc.Message
	for _, st := range layout.QueueStates[layout.QMessages] {
		out = append(out, k.Messages(st)...)
	}
	return out
}

func TestUsageLimits_RealEnginesPauseAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end with the real claude and codex CLIs")
	}
	claudeCLI, codexCLI := modelfake.FindCLI(t, "claude"), modelfake.FindCLI(t, "codex")
	model := modelfake.New()
	t.Cleanup(model.Close)
	gate := newLimitGate(t, model)
	slack := slackfake.New()
	t.Cleanup(slack.Close)
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
	os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(fmt.Sprintf(`model = "gpt-fake"
model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = "%s/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`, gate.srv.URL)), 0o600)

	// claude runs with a subscription token (no API key): only then does
	// the CLI turn the provider's rate-limit headers into its
	// rate_limit_event and its own "You've hit your … limit" text.
	sys := fmt.Sprintf(`runtime:
  engine: claude
  claude:
    command: %q
  codex:
    command: %q
  env_passthrough: [PATH, HOME, LANG, TZ, OPENAI_API_KEY, ANTHROPIC_BASE_URL, CLAUDE_CODE_OAUTH_TOKEN, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, DISABLE_AUTOUPDATER]
  secret_env: [CLAUDE_CODE_OAUTH_TOKEN]
  usage_limit_fallback_minutes: 1
watchdog:
  interval_seconds: 1
`, claudeCLI, codexCLI)
	env := "SLACK_BOT_TOKEN=xoxb-e2e-bot\nSLACK_APP_TOKEN=xapp-e2e-app\nOPENAI_API_KEY=sk-e2e-openai-fake\n" +
		"ANTHROPIC_BASE_URL=" + gate.srv.URL + "\nCLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-e2e-fake\n" +
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1\nDISABLE_AUTOUPDATER=1\n"
	files := map[string]string{
		"config/system.yaml": sys,
		// One retry allowed: a limit counted as an attempt would show as a
		// second attempt (and a third limit as a ❌).
		"config/king.yaml":  "retry:\n  max_attempts: 1\n  backoff_seconds: 1\n  max_backoff_seconds: 2\nconcurrency:\n  max_soldiers: 20\n",
		"config/envoy.yaml": fmt.Sprintf("slack:\n  api_url: %q\n  default_channel: C0KINGDOM\n  allowed_users: [UHUMAN]\nintervals:\n  outbound_seconds: 1\n", slack.APIURL()),
		"config/chamberlain.yaml": "monitoring:\n  interval_seconds: 1\nthresholds:\n  cpu_yellow: 100\n  cpu_orange: 100\n  cpu_red: 100\n  memory_yellow: 95\n  memory_orange: 98\n  memory_red: 99\n" +
			"token_limits:\n  enabled: false\n",
		"config/generals/gen-claude.yaml":         "name: gen-claude\ndescription: \"Claude worker.\"\nengine: claude\ntimeout_seconds: 240\nmax_concurrent: 10\nsubscribes: [\"test.claude\"]\n",
		"config/generals/gen-codex.yaml":          "name: gen-codex\ndescription: \"Codex worker.\"\nengine: codex\ntimeout_seconds: 240\nmax_concurrent: 4\nsubscribes: [\"test.codex\"]\n",
		"config/generals/templates/gen-claude.md": "Task {{task_id}}.\n\n{{payload.text}}\n",
		"config/generals/templates/gen-codex.md":  "Task {{task_id}}.\n\n{{payload.text}}\n",
		"config/kingdom.env":                      env,
	}
	k := NewKingdom(t, files)
	os.Chmod(k.L.EnvFile(), 0o600)
	startWithEnvHome(k, home)
	k.WaitRoles("sentinel", "king", "envoy", "chamberlain", "gen-claude", "gen-codex")
	if err := slack.WaitConnected(30 * time.Second); err != nil {
		t.Fatalf("envoy never connected to the fake Socket Mode: %v", err)
	}

	// Every limited task of an engine resets at the same minute, ≥ 50 s
	// ahead (the texts name minutes, not seconds).
	reset := time.Now().Add(50 * time.Second).Truncate(time.Minute).Add(time.Minute)
	gate.setUntil("claude", reset)
	gate.setUntil("codex", reset)
	type scen struct {
		marker, engine string
		rep            limitReply
		fallback       bool // no reset named: now + usage_limit_fallback_minutes
		// minute: the engine names the reset to the minute without its
		// seconds, so Kingdom waits for the end of that minute.
		minute bool
	}
	claudeText := func(m, text string) scen {
		return scen{marker: m, engine: "claude", minute: true, rep: limitReply{status: 429, body: anthropicError("rate_limit_error", text)}}
	}
	scens := []scen{
		{marker: "SCEN-LIM-CL-PIPE", engine: "claude", rep: limitReply{status: 429,
			body: anthropicError("rate_limit_error", fmt.Sprintf("Claude AI usage limit reached|%d", reset.Unix()))}},
		claudeText("SCEN-LIM-CL-WILL", fmt.Sprintf("Claude usage limit reached. Your limit will reset at %s (America/Chicago).", clock12(reset, "America/Chicago"))),
		claudeText("SCEN-LIM-CL-HIT", fmt.Sprintf("You've hit your limit · resets %s (Europe/Berlin)", clock12(reset, "Europe/Berlin"))),
		claudeText("SCEN-LIM-CL-SESSION", fmt.Sprintf("You've hit your session limit · resets %s (Europe/Berlin)", clock12(reset, "Europe/Berlin"))),
		claudeText("SCEN-LIM-CL-EXTRA", fmt.Sprintf("You're out of extra usage · resets %s (America/Los_Angeles)", clock12(reset, "America/Los_Angeles"))),
		{marker: "SCEN-LIM-CL-429", engine: "claude", fallback: true,
			rep: limitReply{status: 429, body: anthropicError("rate_limit_error", "The usage limit has been reached")}},
		{marker: "SCEN-LIM-CL-EVENT", engine: "claude", rep: limitReply{status: 429, body: anthropicError("rate_limit_error", "Rate limited"),
			headers: map[string]string{"anthropic-ratelimit-unified-status": "rejected", "anthropic-ratelimit-unified-reset": fmt.Sprint(reset.Unix()),
				"anthropic-ratelimit-unified-representative-claim": "five_hour"}}},
		{marker: "SCEN-LIM-CX-USAGE", engine: "codex", minute: true, rep: limitReply{status: 429, body: fmt.Sprintf(
			`{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"plus","resets_at":%d,"resets_in_seconds":%d}}`,
			reset.Unix(), int(time.Until(reset).Seconds()))}},
		{marker: "SCEN-LIM-CX-QUOTA", engine: "codex", fallback: true, rep: limitReply{status: 429,
			body: `{"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"You exceeded your current quota, please check your plan and billing details."}}`}},
	}
	success := func(eng, summary string) modelfake.Reply {
		if eng == "claude" {
			return modelfake.Tool("StructuredOutput", map[string]any{"status": "success", "summary": summary})
		}
		b, _ := json.Marshal(map[string]any{"status": "success", "summary": summary, "error": nil, "reason": nil,
			"question": nil, "memory_updates": nil, "notify_channel": nil, "proclamation": nil})
		return modelfake.Text(string(b))
	}
	for _, s := range scens {
		gate.limit(s.engine, s.marker, s.rep)
		model.Script(s.marker, modelfake.Always(success(s.engine, "done after the reset "+s.marker)))
	}
	dropped := time.Now()
	evOf := map[string]string{}
	for _, s := range scens {
		id := "evt-" + strings.ToLower(s.marker)
		evOf[s.marker] = id
		k.DropInbox(strings.ToLower(s.marker), map[string]any{"id": id, "type": "test." + s.engine, "priority": "high",
			"payload": map[string]any{"text": s.marker + " please work"}})
	}

	// Each limited task is back in pending/ with not_before at its reset
	// and its retry_count unchanged.
	taskOf := map[string]string{}
	for _, s := range scens {
		var tk *doc.Task
		k.Eventually(s.marker+" back in pending/ with not_before", limitWait, func() bool {
			for _, p := range k.TaskList(layout.Pending) {
				if p.EventID == evOf[s.marker] && p.NotBefore != "" {
					pp := p
					tk = &pp
					return true
				}
			}
			return false
		})
		taskOf[s.marker] = tk.ID
		if tk.RetryCount != 0 {
			t.Errorf("%s: retry_count %d after a usage limit, want 0", s.marker, tk.RetryCount)
		}
		nb, err := doc.ParseTime(tk.NotBefore)
		if err != nil {
			t.Fatalf("%s: not_before %q: %v", s.marker, tk.NotBefore, err)
		}
		if s.fallback {
			if nb.Before(dropped.Add(time.Minute-time.Second)) || nb.After(time.Now().Add(time.Minute+time.Second)) {
				t.Errorf("%s: not_before %s, want now + the 1 minute fallback", s.marker, nb)
			}
		} else if want := reset.Add(map[bool]time.Duration{true: time.Minute}[s.minute]); !nb.Equal(want) {
			t.Errorf("%s: not_before %s, want the parsed reset %s", s.marker, nb, want)
		}
	}

	// While an engine is paused no task of it starts, new ones included.
	pauseEnd := map[string]time.Time{}
	for _, eng := range []string{"claude", "codex"} {
		var until time.Time
		k.Eventually(eng+" paused in engine-pause.json", limitWait, func() bool {
			b, err := os.ReadFile(k.L.EnginePause())
			if err != nil {
				return false
			}
			var pf map[string]struct {
				Until string `json:"until"`
			}
			json.Unmarshal(b, &pf)
			u, err := doc.ParseTime(pf[eng].Until)
			until = u
			return err == nil
		})
		pauseEnd[eng] = until
		if until.Before(reset) {
			t.Errorf("%s paused until %s, before the reset %s", eng, until, reset)
		}
	}
	late := "SCEN-LIM-CL-LATE"
	gate.track(late)
	model.Script(late, modelfake.Always(success("claude", "the late task ran after the pause")))
	k.DropInbox("late", map[string]any{"id": "evt-late", "type": "test.claude", "priority": "high",
		"payload": map[string]any{"text": late + " please work"}})

	// After the reset every task runs again and succeeds.
	for _, s := range append(scens, scen{marker: late, engine: "claude"}) {
		var task string
		k.Eventually(s.marker+" completed", limitWait, func() bool {
			tk := k.TaskForEvent(map[bool]string{true: "evt-late", false: evOf[s.marker]}[s.marker == late])
			if tk == nil || !k.Tasks.Exists(layout.Completed, tk.ID) {
				return false
			}
			task = tk.ID
			return true
		})
		r := k.Result(task)
		if r == nil || r.Status != doc.ResultSuccess || r.RetryCount != 0 {
			t.Errorf("%s: final result %+v, want success at retry_count 0", s.marker, r)
		}
		for _, at := range gate.requests(s.marker) {
			if s.marker == late && at.Before(pauseEnd[s.engine]) {
				t.Errorf("%s reached the model at %s, while %s was paused until %s", s.marker, at, s.engine, pauseEnd[s.engine])
			}
		}
		if reqs := gate.requests(s.marker); s.marker != late && len(reqs) >= 2 && reqs[1].Before(pauseEnd[s.engine]) {
			t.Errorf("%s ran again at %s, before the pause's end %s", s.marker, reqs[1], pauseEnd[s.engine])
		}
	}

	// One system.rate_limited per engine, one alert and one recovered note
	// each, and no ❌ or task.failed anywhere.
	perEngine := map[string]int{}
	for _, d := range eventsOf(k, "system.rate_limited") {
		e, _ := d["engine"].(string)
		perEngine[e]++
	}
	if perEngine["claude"] != 1 || perEngine["codex"] != 1 {
		t.Errorf("system.rate_limited per engine = %v, want one each", perEngine)
	}
	k.Eventually("a recovered note per engine", limitWait, func() bool {
		n := 0
		for _, m := range allMessages(k) {
			if m.Context["kind"] == "recovered" && strings.Contains(m.Content, "usage limit lifted") {
				n++
			}
		}
		return n >= 2
	})
	alerts, recovered := map[string]int{}, map[string]int{}
	for _, m := range allMessages(k) {
		if strings.HasPrefix(m.Content, "❌") {
			t.Errorf("a ❌ was queued: %s", m.Content)
		}
		switch {
		case m.Context["kind"] == "engine-paused":
			e, _ := m.Context["engine"].(string)
			alerts[e]++
		case m.Context["kind"] == "recovered" && strings.Contains(m.Content, "usage limit lifted"):
			e, _ := m.Context["engine"].(string)
			recovered[e]++
		}
	}
	if alerts["claude"] != 1 || alerts["codex"] != 1 || recovered["claude"] != 1 || recovered["codex"] != 1 {
		t.Errorf("pause alerts %v, recovered notes %v, want one each per engine", alerts, recovered)
	}
	if n := len(allEvents(k, "task.failed")); n != 0 {
		t.Errorf("%d task.failed events, want none", n)
	}

	t.Run("two attempts are both costed; the sum is on task.completed and in the day's totals", func(t *testing.T) {
		m := "SCEN-COST-TWO"
		gate.track(m)
		model.Script(m, func(r modelfake.Request) modelfake.Reply {
			// Attempt 1 works one turn (cost) and then meets a server
			// error (retryable); attempt 2 succeeds.
			n := len(gate.requests(m))
			switch {
			case n <= 1:
				return modelfake.Reply{ToolName: "shell", ToolInput: map[string]any{"command": "git --version"}, InputTokens: 2000, OutputTokens: 300}
			case n == 2:
				// A server error, not a rate limit (a 429/529 is re-run
				// inside the attempt now): the king's retry runs attempt 2.
				rep := modelfake.APIError(500, "api_error", "Internal server error")
				rep.Headers = map[string]string{"x-should-retry": "false"}
				return rep
			}
			return modelfake.Reply{ToolName: "StructuredOutput", ToolInput: map[string]any{"status": "success", "summary": "costed twice"}, InputTokens: 1000, OutputTokens: 100}
		})
		k.DropInbox("cost", map[string]any{"id": "evt-cost", "type": "test.claude", "priority": "high",
			"payload": map[string]any{"text": m + " please work"}})
		var task string
		k.Eventually("the costed task completed", limitWait, func() bool {
			tk := k.TaskForEvent("evt-cost")
			if tk == nil || !k.Tasks.Exists(layout.Completed, tk.ID) {
				return false
			}
			task = tk.ID
			return true
		})
		var costs []float64
		for _, d := range eventsOf(k, "soldier.completed") {
			if d["task_id"] == task {
				c, ok := d["cost_usd"].(float64)
				if !ok || c <= 0 {
					t.Errorf("soldier.completed of %s without its cost: %v", task, d)
				}
				costs = append(costs, c)
			}
		}
		if len(costs) != 2 {
			t.Fatalf("%d soldier.completed for %s, want 2 (a retry)", len(costs), task)
		}
		var done map[string]any
		for _, d := range eventsOf(k, "task.completed") {
			if d["task_id"] == task {
				done = d
			}
		}
		if got, _ := done["cost_usd"].(float64); math.Abs(got-(costs[0]+costs[1])) > 1e-9 {
			t.Errorf("task.completed cost_usd %v, want %v + %v", done["cost_usd"], costs[0], costs[1])
		}
		// The day's total is every attempt's cost, in stats.json and in
		// chamberlain --once --json.
		var day float64
		for _, d := range eventsOf(k, "soldier.completed") {
			c, _ := d["cost_usd"].(float64)
			day += c
		}
		var seen []float64
		statsHas := func() bool {
			b, err := os.ReadFile(k.L.StatsJSON())
			if err != nil {
				return false
			}
			var st struct {
				Daily map[string]struct {
					Totals struct {
						CostUSD float64 `json:"cost_usd"`
					} `json:"totals"`
				} `json:"daily"`
			}
			json.Unmarshal(b, &st)
			seen = seen[:0]
			for _, d := range st.Daily {
				seen = append(seen, d.Totals.CostUSD)
				if math.Abs(d.Totals.CostUSD-day) < 1e-6 {
					return true
				}
			}
			return false
		}
		for deadline := time.Now().Add(30 * time.Second); !statsHas(); {
			if time.Now().After(deadline) {
				t.Fatalf("stats.json daily totals %v, want the day's %v (the sum of every soldier.completed)", seen, day)
			}
			time.Sleep(200 * time.Millisecond) // the chamberlain ticks every second
		}
		cmd := exec.Command(filepath.Join(binDir, "chamberlain"), "--once", "--json", "--base-dir", k.L.Base)
		cmd.Env = append(cleanEnv(), "KINGDOM_TMUX_SOCKET="+k.Tmux.Socket)
		out, _ := cmd.Output() // the exit code is the health verdict
		var res struct {
			Tokens struct {
				DailyCostUSD float64 `json:"daily_cost_usd"`
			} `json:"tokens"`
			Budget struct {
				CostUSD float64 `json:"cost_usd"`
			} `json:"budget"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("chamberlain --once --json: %v\n%s", err, out)
		}
		if math.Abs(res.Budget.CostUSD-day) > 1e-6 {
			t.Errorf("--once --json budget.cost_usd %v, want the day's %v", res.Budget.CostUSD, day)
		}
	})
	t.Run("a resume stopped by a usage limit resumes the same session after the reset", func(t *testing.T) {
		resumeAfterLimit(t, k, gate, model) // limitresume_test.go
	})
}

// startWithEnvHome runs `start` with a private HOME (the CLIs keep their
// sessions and config there) and none of the developer's model
// credentials.
func startWithEnvHome(k *Kingdom, home string) {
	k.t.Helper()
	out, err := os.Create(filepath.Join(k.L.Base, "start.out"))
	if err != nil {
		k.t.Fatal(err)
	}
	k.out = out
	k.start = exec.Command(filepath.Join(binDir, "start"), "--base-dir", k.L.Base)
	var env []string
	for _, kv := range cleanEnv() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "ANTHROPIC_") && !strings.HasPrefix(kv, "OPENAI_") && !strings.HasPrefix(kv, "CLAUDE") {
			env = append(env, kv)
		}
	}
	k.start.Env = append(env, "HOME="+home, "KINGDOM_TMUX_SOCKET="+k.Tmux.Socket)
	k.start.Stdout, k.start.Stderr = out, out
	if err := k.start.Start(); err != nil {
		k.t.Fatal(err)
	}
}
