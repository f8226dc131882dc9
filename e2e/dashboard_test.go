package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/dashboard"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// chromiumPath is Debian's chromium, which .ci/run installs. Locally a
// machine without it skips the browser test; in CI (CI=true) its absence
// is a failure, never a silent skip.
const chromiumPath = "/usr/bin/chromium"

func needChromium(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath(chromiumPath)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("chromium is missing at %s (CI installs Debian's chromium in .ci/run): %v", chromiumPath, err)
	}
	t.Skipf("chromium not installed at %s (apt-get install chromium); CI runs this test", chromiumPath)
	return ""
}

// artifactDir is where the test keeps its screenshot: $KINGDOM_ARTIFACTS,
// else a new temporary directory that is left in place.
func artifactDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("KINGDOM_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d, err := os.MkdirTemp("", "kingdom-artifacts-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// dashboardKingdom is a demo-like kingdom (inbox watcher, the demo soldier
// on the command engine, envoy in console mode) whose chamberlain serves
// the dashboard on a free loopback port.
func dashboardKingdom(t *testing.T) *Kingdom {
	return NewKingdom(t, map[string]string{
		"config/system.yaml": fmt.Sprintf(`runtime:
  engine: command
  command:
    argv: [%q, "{prompt_file}", "{workdir}", "{task_id}", "{result_path}"]
watchdog:
  interval_seconds: 1
`, filepath.Join(binDir, "demo-soldier")),
		"config/sentinel.yaml": "polling:\n  inbox:\n    interval_seconds: 1\n",
		"config/king.yaml":     "concurrency:\n  max_soldiers: 4\nbudget:\n  daily_usd: 5\n",
		"config/envoy.yaml":    "slack:\n  default_channel: \"#dash\"\nintervals:\n  outbound_seconds: 1\n",
		"config/chamberlain.yaml": `monitoring:
  interval_seconds: 2
thresholds:
  cpu_yellow: 100
  cpu_orange: 100
  cpu_red: 100
  memory_yellow: 95
  memory_orange: 98
  memory_red: 99
http:
  listen: 127.0.0.1:0
`,
		"config/generals/gen-web.yaml": "name: gen-web\ndescription: dashboard demo worker\ntimeout_seconds: 60\nmax_concurrent: 2\nsubscribes: [\"demo.*\"]\n",
	})
}

// dashboardToken is the token the chamberlain keeps in the tree: a
// loopback port asks for it (another local account cannot read the tree).
func dashboardToken(t *testing.T, k *Kingdom) string {
	t.Helper()
	b, err := os.ReadFile(dashboard.TokenFile(k.L))
	if err != nil {
		t.Fatalf("the dashboard's token: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// authGet is GET url with the dashboard's token.
func authGet(t *testing.T, url, token string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// dashboardURL reads the address the chamberlain bound from system.log.
func dashboardURL(k *Kingdom) string {
	re := regexp.MustCompile(`dashboard on (http://127\.0\.0\.1:\d+/)`)
	var url string
	k.Eventually("the dashboard address in system.log", 60*time.Second, func() bool {
		b, _ := os.ReadFile(k.L.SystemLog())
		if m := re.FindSubmatch(b); m != nil {
			url = string(m[1])
		}
		return url != ""
	})
	return url
}

const xssTitle = `<img src=x onerror=alert(1)>`

func TestDashboard_BrowserSeesTheKingdomLive(t *testing.T) {
	chromium := needChromium(t)
	k := dashboardKingdom(t)
	// codex hit a usage limit an hour ago (SPEC §10.8); this kingdom's
	// general runs the command engine, so its work is not held back.
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if err := enginepause.Save(t.Context(), kv.OnStore(k.St), enginepause.File{"codex": {Until: until, Reason: "usage limit reached"}}); err != nil {
		t.Fatal(err)
	}
	k.Start()
	k.WaitRoles("sentinel", "king", "envoy", "chamberlain", "gen-web")
	url := dashboardURL(k)
	token := dashboardToken(t, k)
	// Without the token the port serves nothing of the kingdom.
	if resp, err := http.Get(url + "api/v1/state"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("state without the token: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}

	profile := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // root in CI: chromium refuses to start sandboxed
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1400, 1100),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	defer cancel()

	// Any JavaScript dialog (alert) is a script that ran: count it and
	// dismiss it so the page does not hang.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`1`)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	var dialogs atomic.Int32
	go func() {
		for _, err := range chromedp.Events(ctx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			dialogs.Add(1)
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()

	text := func(sel string) string {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	waitText := func(what, sel string, want ...string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			got := text(sel)
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(got, w)
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("page never showed %s: %s has %q, want %q", what, sel, got, want)
			}
			time.Sleep(100 * time.Millisecond) // the page updates itself; poll what it shows
		}
	}
	eval := func(expr string) int {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[int](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return v
	}

	// A marker set now must survive: the page is never reloaded below.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(url+"?token="+token), // sets the cookie, redirects to the page
		chromedp.WaitVisible(chromedp.CSS("#roles tbody tr")),
		chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`),
	); err != nil {
		t.Fatal(err)
	}
	waitText("the roles", "#roles", "sentinel", "king", "envoy", "chamberlain", "gen-web", "alive")
	waitText("the queue depths", "#queues", "events", "tasks", "messages", "pending 0")
	waitText("a live stream", "#conn", "live")
	waitText("the budget", "#budget", "of $5.00")
	waitText("the engine pause", "#engines", "codex paused until "+until, "usage limit reached")

	// An inbox event: the live feed shows it, then recent tasks show its
	// task, all without a reload.
	k.DropInbox("hello", map[string]any{"id": "evt-dash-hello", "type": "demo.hello", "payload": map[string]any{"text": "hello dashboard"}})
	waitText("the event in the live feed", "#feed", "evt-dash-hello")
	k.Eventually("a task for evt-dash-hello", 60*time.Second, func() bool { return k.TaskForEvent("evt-dash-hello") != nil })
	task := k.TaskForEvent("evt-dash-hello").ID
	waitText("the task in recent tasks", "#tasks", task, "hello dashboard", "success", "Handled demo.hello.")

	// A title that is HTML shows as text and runs nothing.
	k.DropInbox("xss", map[string]any{"id": "evt-dash-xss", "type": "demo.review",
		"payload": map[string]any{"subject_title": xssTitle, "text": `<script>window.__pwned = 1</script>`}})
	waitText("the HTML title as text", "#tasks", xssTitle)
	imgs := eval(`document.querySelectorAll("img").length`)
	pwned := eval(`typeof window.__pwned === "undefined" ? 0 : 1`)
	if imgs != 0 || pwned != 0 || dialogs.Load() != 0 {
		t.Fatalf("outside text became markup: %d <img> elements, script ran=%d, %d dialogs", imgs, pwned, dialogs.Load())
	}
	if m := eval(`window.__noReload || 0`); m != 42 {
		t.Fatalf("the page was reloaded (marker %d)", m)
	}

	// The operator pauses the kingdom (start pause's request file, which the
	// king acts on): the page shows it.
	waitText("admission running", "#pause", "running")
	if _, err := control.Submit(t.Context(), kv.OnStore(k.St), control.Request{Action: control.ActionPause, By: "e2e"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitText("the pause", "#pause", "paused")

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(artifactDir(t), "dashboard.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("dashboard screenshot: %s", shot)

	// The metrics of the same kingdom moved with these tasks.
	resp := authGet(t, url+"metrics", token)
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	var success float64
	for _, m := range fams["kingdom_tasks_total"].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "outcome" && lp.GetValue() == "success" {
				success = m.GetCounter().GetValue()
			}
		}
	}
	if success < 2 {
		t.Fatalf("kingdom_tasks_total{outcome=\"success\"} = %v after two finished tasks", success)
	}

	// The JSON behind the page matches its documented schema.
	sr := authGet(t, url+"api/v1/state", token)
	body, _ := io.ReadAll(sr.Body)
	sr.Body.Close()
	if err := schema.Validate(doc.KindState, body); err != nil {
		t.Fatalf("/api/v1/state does not match schemas/state.json: %v", err)
	}
}
