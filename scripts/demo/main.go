// Command demo runs the whole kingdom on this machine with no accounts
// (`make demo`): it prepares a base dir inside the repo, starts `start` with
// every role on a private tmux socket (inbox watcher, the command engine
// running scripts/demo-soldier, envoy in console mode, chamberlain on), drops
// sample events, answers the soldier's question with `envoy reply`, prints
// each step as it happens and a summary, and leaves the kingdom running for
// you to look at. `demo --stop` (make demo-stop) stops it and cleans up.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/dashboard"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

const socket = "kingdom-demo"

// dashboardAddr is where the demo's chamberlain serves the dashboard.
const dashboardAddr = "127.0.0.1:8765"

func main() {
	base := flag.String("base-dir", ".demo", "demo runtime tree (git-ignored)")
	bin := flag.String("bin", "bin", "directory of the built binaries")
	stop := flag.Bool("stop", false, "stop the demo kingdom and remove its base dir")
	timeout := flag.Duration("timeout", 3*time.Minute, "give up waiting after this long")
	flag.Parse()
	absBase, _ := filepath.Abs(*base)
	absBin, _ := filepath.Abs(*bin)
	var err error
	if *stop {
		err = stopDemo(absBase, absBin)
	} else {
		err = runDemo(absBase, absBin, *timeout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func say(format string, a ...any) {
	fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

func stopDemo(base, bin string) error {
	if _, err := os.Stat(base); err == nil {
		cmd := exec.Command(filepath.Join(bin, "start"), "stop", "--base-dir", base)
		cmd.Env = append(os.Environ(), "KINGDOM_TMUX_SOCKET="+socket)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.Run()
	}
	// Through pkg/tmux: it also removes the socket file tmux leaves behind.
	(&tmux.Client{Bin: "tmux", Socket: socket}).KillServer(context.Background())
	if err := os.RemoveAll(base); err != nil {
		return err
	}
	fmt.Println("demo stopped and", base, "removed")
	return nil
}

func runDemo(base, bin string, timeout time.Duration) error {
	for _, b := range []string{"start", "sentinel", "king", "general", "envoy", "chamberlain", "soldier-spawn", "demo-soldier"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return fmt.Errorf("%s missing in %s: run `make build`", b, bin)
		}
	}
	// A previous demo is stopped and wiped: every run starts fresh.
	stopQuiet(base, bin)
	if err := prepare(base, bin); err != nil {
		return err
	}
	env := append(os.Environ(), "KINGDOM_TMUX_SOCKET="+socket, "KINGDOM_BASE_DIR="+base, "DEMO_SOLDIER_DELAY=2s")
	env = dropSecrets(env)
	logf, err := os.OpenFile(filepath.Join(base, "start.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	startCmd := exec.Command(filepath.Join(bin, "start"), "--base-dir", base)
	startCmd.Env = env
	startCmd.Stdout, startCmd.Stderr = logf, logf
	startCmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // survives this program
	if err := startCmd.Start(); err != nil {
		return err
	}
	say("started the kingdom (start pid %d) in %s on tmux socket %q", startCmd.Process.Pid, base, socket)
	exited := make(chan struct{})
	go func() { startCmd.Wait(); close(exited) }()

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	follow := newFollower(filepath.Join(base, "logs", "events.log"))
	if err := waitRoles(ctx, base, follow, exited); err != nil {
		return err
	}

	dashURL := "http://" + dashboardAddr + "/?token=<the token in " + dashboard.TokenFile(layout.New(base)) + ">"
	if tok, err := waitDashboard(ctx, base); err != nil {
		say("dashboard: not answering at http://%s/ yet (%v); see %s/logs/system.log", dashboardAddr, err, base)
	} else {
		dashURL = "http://" + dashboardAddr + "/?token=" + tok
		say("dashboard: %s (live; also /api/v1/state, /api/v1/events, /metrics with Authorization: Bearer %s)", dashURL, tok)
	}

	// Inbox files may not claim to come from GitHub, Jira, Slack or a
	// schedule (only the sentinel's watchers and the envoy create those
	// types): the review request arrives as another tool would drop it, and
	// the DM is played through the envoy's console (`envoy dm`).
	say("dropping two sample events into %s/inbox:", base)
	samples := []struct{ name, body string }{
		{"pr-review", `{"id":"evt-demo-pr-42","type":"review.requested","repo":"demo/app","priority":"normal",` +
			`"payload":{"reason":"review_requested","subject_title":"Add retry to the uploader","subject_type":"PullRequest","pr_number":42,"subject_url":"https://api.github.com/repos/demo/app/pulls/42"}}`},
		{"deploy", `{"id":"evt-demo-deploy-1","type":"demo.deploy_request","repo":"demo/app","priority":"high",` +
			`"payload":{"text":"please deploy release 1.4","needs_human":true}}`},
	}
	for _, s := range samples {
		tmp := filepath.Join(base, "inbox", "."+s.name+".tmp")
		os.WriteFile(tmp, []byte(s.body), 0o600)
		os.Rename(tmp, filepath.Join(base, "inbox", s.name+".json"))
		say("  inbox/%s.json", s.name)
	}
	say("sending the bot a DM as a human would in Slack: envoy dm \"hello kingdom, what can you do?\"")
	dm := exec.Command(filepath.Join(bin, "envoy"), "dm", "--base-dir", base, "hello kingdom, what can you do?")
	dm.Env = env
	if out, err := dm.CombinedOutput(); err != nil {
		return fmt.Errorf("envoy dm: %v: %s", err, out)
	}

	answered := false
	for {
		follow.poll(say)
		if !answered {
			if task := awaitingQuestion(base); task != "" {
				say("the soldier asked a human; answering as the human: envoy reply %s \"staging, please\"", task)
				cmd := exec.Command(filepath.Join(bin, "envoy"), "reply", "--base-dir", base, task, "staging, please")
				cmd.Env = env
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("envoy reply: %v: %s", err, out)
				}
				answered = true
			}
		}
		if answered && done(base) {
			follow.poll(say)
			break
		}
		select {
		case <-ctx.Done():
			summary(base)
			return errors.New("timed out waiting for the sample events to finish (see " + base + "/logs/system.log)")
		case <-time.After(200 * time.Millisecond):
		}
	}
	summary(base)
	fmt.Printf(`
The kingdom keeps running. Look around:
  %[4]s    the dashboard (open it in a browser)
  tmux -L %[1]s attach -t king    (Ctrl-b d to detach; the roles: sentinel, king, envoy, chamberlain, gen-pr, gen-herald, gen-dev)
  %[2]s/chamberlain --once --base-dir %[3]s
  %[2]s/start status --base-dir %[3]s
  cat %[3]s/logs/envoy-console.log
Stop it with:  make demo-stop
`, socket, bin, base, dashURL)
	return nil
}

// waitDashboard waits until the chamberlain's dashboard answers with the
// token it keeps in the tree (a loopback port asks for it) and returns the
// token.
func waitDashboard(ctx context.Context, base string) (string, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, err := os.ReadFile(dashboard.TokenFile(layout.New(base)))
		tok := strings.TrimSpace(string(b))
		if err == nil {
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+dashboardAddr+"/api/v1/state", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			var resp *http.Response
			if resp, err = c.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return tok, nil
				}
				err = fmt.Errorf("HTTP %d", resp.StatusCode)
			}
		}
		if time.Now().After(deadline) {
			return "", err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func stopQuiet(base, bin string) {
	cmd := exec.Command(filepath.Join(bin, "start"), "stop", "--base-dir", base)
	cmd.Env = append(os.Environ(), "KINGDOM_TMUX_SOCKET="+socket)
	cmd.Run()
	// Through pkg/tmux: it also removes the socket file tmux leaves behind.
	(&tmux.Client{Bin: "tmux", Socket: socket}).KillServer(context.Background())
	os.RemoveAll(base)
}

// dropSecrets keeps real tokens out of the demo: envoy runs in console mode
// and no watcher talks to GitHub or Jira; the dashboard uses the token it
// keeps in the demo's tree, which the demo prints.
func dropSecrets(env []string) []string {
	out := env[:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "JIRA_API_TOKEN", "JIRA_USER_EMAIL", "JIRA_URL", "KINGDOM_HTTP_TOKEN":
			continue
		}
		out = append(out, kv)
	}
	return out
}

func writeFile(path, body string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(body), 0o600)
}

// prepare writes the demo config and a local git repository for demo/app.
func prepare(base, bin string) error {
	if err := os.MkdirAll(base, 0o700); err != nil {
		return err
	}
	repo := filepath.Join(base, "remote", "demo", "app.git")
	if err := makeRepo(repo); err != nil {
		return fmt.Errorf("create demo repository: %w", err)
	}
	files := map[string]string{
		"config/system.yaml": fmt.Sprintf(`runtime:
  engine: command
  command:
    argv: [%q, "{prompt_file}", "{workdir}", "{task_id}", "{result_path}"]
git:
  clone_url: "file://%s/remote/{repo}.git"
watchdog:
  interval_seconds: 5
`, filepath.Join(bin, "demo-soldier"), base),
		"config/sentinel.yaml": "polling:\n  inbox:\n    interval_seconds: 1\n",
		"config/king.yaml":     "petition:\n  enabled: true\n  timeout_seconds: 15\nretry:\n  backoff_seconds: 2\n",
		"config/envoy.yaml":    "slack:\n  default_channel: \"#kingdom-demo\"\n  allow_all: true\nintervals:\n  outbound_seconds: 1\n",
		"config/chamberlain.yaml": "monitoring:\n  interval_seconds: 10\n" +
			"# The demo shares the machine with whatever else runs: CPU never holds work here.\n" +
			"thresholds:\n  cpu_yellow: 100\n  cpu_orange: 100\n  cpu_red: 100\n  memory_yellow: 95\n  memory_orange: 98\n  memory_red: 99\n" +
			"# The dashboard, on loopback only, with the token it keeps in the tree.\n" +
			"http:\n  listen: " + dashboardAddr + "\n",
		"config/generals/gen-dev.yaml": `name: gen-dev
description: "Demo developer general: handles deploy requests and Jira tickets."
timeout_seconds: 120
max_concurrent: 2
subscribes: ["demo.*", "jira.ticket.*"]
`,
		// The demo's gen-pr also takes review requests other tools drop into
		// the inbox (the built-in manifest subscribes to GitHub's only).
		"config/generals/gen-pr.yaml": `name: gen-pr
description: Reviews GitHub pull requests when a review is requested, checking them against the repository's own rules, and posts the review.
timeout_seconds: 1800
max_concurrent: 2
mode: automation
supported_engines: [claude, codex, command]
subscribes:
  - github.pr.review_requested
  - github.pr.mentioned
  - github.pr.assigned
  - review.requested
`,
		"config/generals/templates/gen-dev.md": "You are the demo developer general. Task {{task_id}} ({{type}}) on {{repo}}.\n\nRequest: {{payload.text}}\n",
	}
	for rel, body := range files {
		if err := writeFile(filepath.Join(base, rel), body); err != nil {
			return err
		}
	}
	return nil
}

func makeRepo(bare string) error {
	work := bare + ".work"
	run := func(dir string, args ...string) error {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=demo", "GIT_AUTHOR_EMAIL=demo@kingdom.invalid",
			"GIT_COMMITTER_NAME=demo", "GIT_COMMITTER_EMAIL=demo@kingdom.invalid")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := os.MkdirAll(work, 0o700); err != nil {
		return err
	}
	if err := run(work, "init", "-q", "-b", "main"); err != nil {
		return err
	}
	os.WriteFile(filepath.Join(work, "README.md"), []byte("# demo/app\n\nA tiny repository for the Kingdom demo.\n"), 0o600)
	os.WriteFile(filepath.Join(work, "uploader.go"), []byte("package app\n\n// Upload sends a file. TODO: retry.\nfunc Upload() error { return nil }\n"), 0o600)
	if err := run(work, "add", "."); err != nil {
		return err
	}
	if err := run(work, "commit", "-q", "-m", "initial"); err != nil {
		return err
	}
	if err := run(filepath.Dir(bare), "clone", "-q", "--bare", work, bare); err != nil {
		return err
	}
	return os.RemoveAll(work)
}

func waitRoles(ctx context.Context, base string, f *follower, exited <-chan struct{}) error {
	roles := []string{"sentinel", "king", "envoy", "chamberlain", "gen-pr", "gen-herald", "gen-dev"}
	say("waiting for the roles to come up: %s", strings.Join(roles, ", "))
	for {
		f.poll(say)
		up := 0
		for _, r := range roles {
			if _, err := os.Stat(filepath.Join(base, "state", r, "heartbeat")); err == nil {
				up++
			}
		}
		if up == len(roles) {
			say("all %d roles are ticking (heartbeats fresh)", up)
			return nil
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(filepath.Join(base, "start.out"))
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			return fmt.Errorf("start exited: %s", lines[len(lines)-1])
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d roles came up; see %s/start.out and %s/logs/system.log", up, len(roles), base, base)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// awaitingQuestion returns the task whose human_input_request was sent.
func awaitingQuestion(base string) string {
	ents, _ := os.ReadDir(filepath.Join(base, "queue", "messages", "sent"))
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(base, "queue", "messages", "sent", e.Name()))
		if err != nil {
			continue
		}
		var m struct {
			Type   string  `json:"type"`
			TaskID *string `json:"task_id"`
		}
		if json.Unmarshal(b, &m) == nil && m.Type == "human_input_request" && m.TaskID != nil {
			return *m.TaskID
		}
	}
	return ""
}

func count(dir string) int {
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n
}

// done: the three sample events and the resume are completed and nothing is
// in flight.
func done(base string) bool {
	q := func(p ...string) int { return count(filepath.Join(append([]string{base, "queue"}, p...)...)) }
	return q("events", "completed") >= 4 && q("events", "pending") == 0 && q("events", "dispatched") == 0 &&
		q("events", "petitioning") == 0 && q("tasks", "pending") == 0 && q("tasks", "in_progress") == 0 &&
		q("messages", "pending") == 0
}

func summary(base string) {
	q := func(p ...string) int { return count(filepath.Join(append([]string{base, "queue"}, p...)...)) }
	fmt.Println("\n── summary ─────────────────────────────────────────────")
	fmt.Printf("events    completed %d, pending %d, dispatched %d, rejected %d\n", q("events", "completed"), q("events", "pending"), q("events", "dispatched"), q("events", "rejected"))
	fmt.Printf("tasks     completed %d, pending %d, in progress %d\n", q("tasks", "completed"), q("tasks", "pending"), q("tasks", "in_progress"))
	fmt.Printf("messages  sent %d, failed %d, pending %d\n", q("messages", "sent"), q("messages", "failed"), q("messages", "pending"))
	fmt.Println("results:")
	ents, _ := os.ReadDir(filepath.Join(base, "state", "results"))
	var names []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, "task-") && strings.HasSuffix(n, ".json") && !strings.Contains(n, "-raw") && !strings.Contains(n, "-result") && !strings.Contains(n, "-checkpoint") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	type row struct{ id, general, status, summary string }
	var rows []row
	wg, ws := len("general"), len("status")
	for _, n := range names {
		b, _ := os.ReadFile(filepath.Join(base, "state", "results", n))
		var r struct {
			Status  string `json:"status"`
			General string `json:"general"`
			Summary string `json:"summary"`
		}
		json.Unmarshal(b, &r)
		rows = append(rows, row{strings.TrimSuffix(n, ".json"), r.General, r.Status, r.Summary})
		wg, ws = max(wg, len(r.General)), max(ws, len(r.Status))
	}
	// Columns as wide as their longest value, so the table stays aligned
	// whatever the generals are called.
	for _, r := range rows {
		fmt.Printf("  %-22s %-*s  %-*s  %s\n", r.id, wg, r.general, ws, r.status, r.summary)
	}
	if b, err := os.ReadFile(filepath.Join(base, "state", "resources.json")); err == nil {
		var r struct {
			Health string `json:"health"`
		}
		json.Unmarshal(b, &r)
		fmt.Printf("health    %s (state/resources.json)\n", r.Health)
	}
	fmt.Printf("console   %s/logs/envoy-console.log (what Slack would have shown)\n", base)
}

// follower prints internal events as they are appended to events.log.
type follower struct {
	path string
	off  int64
	rest string
}

func newFollower(path string) *follower { return &follower{path: path} }

func (f *follower) poll(out func(string, ...any)) {
	fh, err := os.Open(f.path)
	if err != nil {
		return
	}
	defer fh.Close()
	if _, err := fh.Seek(f.off, 0); err != nil {
		return
	}
	r := bufio.NewReader(fh)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			f.rest = line
			break
		}
		f.off += int64(len(line))
		if s := describe(line); s != "" {
			out("%s", s)
		}
	}
}

func describe(line string) string {
	var ev struct {
		Type  string         `json:"type"`
		Actor string         `json:"actor"`
		Data  map[string]any `json:"data"`
	}
	if json.Unmarshal([]byte(line), &ev) != nil {
		return ""
	}
	d := func(k string) string {
		if v, ok := ev.Data[k]; ok && v != nil {
			return fmt.Sprint(v)
		}
		return ""
	}
	switch ev.Type {
	case "event.detected":
		return fmt.Sprintf("  %-11s detected %s (%s)", ev.Actor, d("event_id"), d("event_type"))
	case "event.dispatched":
		return fmt.Sprintf("  king        dispatched %s → %s as %s", d("event_id"), d("target_general"), d("task_id"))
	case "event.discarded":
		return fmt.Sprintf("  king        discarded %s: %s", d("event_id"), d("reason"))
	case "task.started":
		return fmt.Sprintf("  %-11s started %s", ev.Actor, d("task_id"))
	case "soldier.spawned":
		return fmt.Sprintf("  %-11s spawned soldier %s for %s", ev.Actor, d("soldier_id"), d("task_id"))
	case "soldier.completed":
		return fmt.Sprintf("  %-11s soldier finished %s: %s", ev.Actor, d("task_id"), d("status"))
	case "task.completed":
		return fmt.Sprintf("  king        ✅ %s completed (%s)", d("task_id"), ev.Actor)
	case "task.failed":
		return fmt.Sprintf("  king        ❌ %s failed: %s", d("task_id"), d("error"))
	case "task.needs_human":
		return fmt.Sprintf("  king        ❓ %s needs a human: %s", d("task_id"), d("question"))
	case "task.resumed":
		return fmt.Sprintf("  king        resumed %s as %s with the human's answer", d("original_task_id"), d("task_id"))
	case "task.retry_scheduled":
		return fmt.Sprintf("  king        retry %s scheduled (attempt %s)", d("task_id"), d("retry_count"))
	case "message.sent":
		return fmt.Sprintf("  envoy       sent %s", d("msg_id"))
	case "message.failed":
		return fmt.Sprintf("  envoy       message %s failed: %s", d("msg_id"), d("error"))
	case "system.health_changed":
		return fmt.Sprintf("  chamberlain health %s → %s", d("from"), d("to"))
	case "system.file_rejected":
		return fmt.Sprintf("  !           rejected %s: %s", d("path"), d("reason"))
	}
	return ""
}
