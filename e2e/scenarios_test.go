package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/slackfake"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// fakeGitHub serves GET /notifications (with ETag) and records the threads
// marked read.
type fakeGitHub struct {
	srv    *httptest.Server
	mu     sync.Mutex
	notes  []map[string]any
	etag   string
	marked []string
}

func newFakeGitHub(t *testing.T) *fakeGitHub {
	g := &fakeGitHub{etag: `"v0"`}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /notifications", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer ghp_e2etesttoken0000000000" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"message":"Bad credentials"}`)
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		w.Header().Set("X-Poll-Interval", "1")
		w.Header().Set("X-RateLimit-Remaining", "4999")
		if r.Header.Get("If-None-Match") == g.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", g.etag)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		json.NewEncoder(w).Encode(g.notes)
	})
	// The pull request a review request names: what the general reads to
	// prepare the worktree (its head is refs/pull/<n>/head of the bare
	// repository, made by newConnectedKingdom).
	mux.HandleFunc("GET /repos/{owner}/{name}/pulls/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"number": n, "title": "Fix the flaky uploader", "body": "Retries the upload.",
			"state": "open", "user": map[string]any{"login": "octo"}, "head": map[string]any{"ref": "fix-uploader"}, "base": map[string]any{"ref": "main"}})
	})
	for _, list := range []string{"GET /repos/{owner}/{name}/pulls/{n}/files", "GET /repos/{owner}/{name}/pulls/{n}/comments",
		"GET /repos/{owner}/{name}/pulls/{n}/reviews", "GET /repos/{owner}/{name}/issues/{n}/comments"} {
		mux.HandleFunc(list, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, "[]")
		})
	}
	mux.HandleFunc("PATCH /notifications/threads/{id}", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.marked = append(g.marked, r.PathValue("id"))
		// A read thread leaves the unread list.
		keep := g.notes[:0]
		for _, n := range g.notes {
			if n["id"] != r.PathValue("id") {
				keep = append(keep, n)
			}
		}
		g.notes = keep
		g.etag = fmt.Sprintf(`"v%d"`, time.Now().UnixNano())
		g.mu.Unlock()
		w.WriteHeader(http.StatusResetContent)
	})
	g.srv = httptest.NewServer(mux)
	t.Cleanup(g.srv.Close)
	return g
}

func (g *fakeGitHub) add(n map[string]any) {
	g.mu.Lock()
	g.notes = append(g.notes, n)
	g.etag = fmt.Sprintf(`"v%d"`, time.Now().UnixNano())
	g.mu.Unlock()
}

func (g *fakeGitHub) markedRead() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.marked...)
}

// fakeJira serves POST /rest/api/3/search/jql.
type fakeJira struct {
	srv    *httptest.Server
	mu     sync.Mutex
	issues []map[string]any
	jqls   []string
}

func newFakeJira(t *testing.T) *fakeJira {
	j := &fakeJira{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /rest/api/3/search/jql", func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || user != "bot@kingdom.invalid" || pass != "jira-e2e-token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var body struct {
			JQL string `json:"jql"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		j.mu.Lock()
		j.jqls = append(j.jqls, body.JQL)
		issues := append([]map[string]any{}, j.issues...)
		j.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"issues": issues, "isLast": true})
	})
	j.srv = httptest.NewServer(mux)
	t.Cleanup(j.srv.Close)
	return j
}

func (j *fakeJira) add(issue map[string]any) {
	j.mu.Lock()
	j.issues = append(j.issues, issue)
	j.mu.Unlock()
}

// connectedKingdom is a kingdom wired to fake GitHub, Jira and Slack with the
// fake claude as its engine.
type connectedKingdom struct {
	*Kingdom
	gh    *fakeGitHub
	jira  *fakeJira
	slack *slackfake.Server
}

// newConnectedKingdom starts it; override replaces config files by path.
func newConnectedKingdom(t *testing.T, override ...map[string]string) *connectedKingdom {
	gh, jira := newFakeGitHub(t), newFakeJira(t)
	slack := slackfake.New()
	t.Cleanup(slack.Close)
	remotes := t.TempDir()
	makeBareRepo(t, filepath.Join(remotes, "acme", "widgets.git"))
	// The pull request #42 the review request names: its head is main's
	// commit (GitHub serves it as refs/pull/42/head).
	if out, err := exec.Command("git", "-C", filepath.Join(remotes, "acme", "widgets.git"), "update-ref", "refs/pull/42/head", "refs/heads/main").CombinedOutput(); err != nil {
		t.Fatalf("make refs/pull/42/head: %v: %s", err, out)
	}
	files := map[string]string{
		"config/system.yaml": fmt.Sprintf(`runtime:
  engine: claude
  claude:
    command: %q
    args: []
git:
  clone_url: "file://%s/{repo}.git"
watchdog:
  interval_seconds: 1
`, filepath.Join(binDir, "fakeclaude"), remotes),
		"config/sentinel.yaml": fmt.Sprintf(`polling:
  github:
    interval_seconds: 1
    api_url: %q
  jira:
    interval_seconds: 1
    url: %q
    scope:
      jql_base: "assignee = currentUser()"
  inbox:
    interval_seconds: 1
`, gh.srv.URL, jira.srv.URL),
		"config/king.yaml":             "retry:\n  max_attempts: 2\n  backoff_seconds: 1\n  max_backoff_seconds: 2\npetition:\n  timeout_seconds: 20\n",
		"config/envoy.yaml":            fmt.Sprintf("slack:\n  api_url: %q\n  default_channel: C0KINGDOM\n  allowed_users: [UHUMAN]\nintervals:\n  outbound_seconds: 1\n", slack.APIURL()),
		"config/chamberlain.yaml":      "thresholds:\n  cpu_yellow: 100\n  cpu_orange: 100\n  cpu_red: 100\n  memory_yellow: 95\n  memory_orange: 98\n  memory_red: 99\n",
		"config/generals/gen-dev.yaml": "name: gen-dev\ndescription: \"Developer: implements Jira tickets and test work.\"\ntimeout_seconds: 120\nmax_concurrent: 2\nsubscribes: [\"jira.ticket.*\", \"test.*\"]\n",
		"config/kingdom.env": "SLACK_BOT_TOKEN=xoxb-e2e-bot\nSLACK_APP_TOKEN=xapp-e2e-app\nGH_TOKEN=ghp_e2etesttoken0000000000\n" +
			"JIRA_USER_EMAIL=bot@kingdom.invalid\nJIRA_API_TOKEN=jira-e2e-token\n",
	}
	for _, o := range override {
		for path, body := range o {
			files[path] = body
		}
	}
	k := NewKingdom(t, files)
	k.Start()
	k.WaitRoles("sentinel", "king", "envoy", "chamberlain", "gen-pr", "gen-herald", "gen-dev")
	if err := slack.WaitConnected(30 * time.Second); err != nil {
		t.Fatalf("envoy never connected to the fake Socket Mode: %v", err)
	}
	return &connectedKingdom{Kingdom: k, gh: gh, jira: jira, slack: slack}
}

// posts returns the chat.postMessage calls into a thread (or top level
// when threadTS is "") of a channel.
func (c *connectedKingdom) posts(channel, threadTS string) []slackfake.Call {
	var out []slackfake.Call
	for _, call := range c.slack.Calls("chat.postMessage") {
		if call.Form.Get("channel") == channel && call.Form.Get("thread_ts") == threadTS {
			out = append(out, call)
		}
	}
	return out
}

// threadOf finds the Slack channel and ts the envoy recorded when it posted
// the task's thread_start (the "slack" field of the sent file).
func (c *connectedKingdom) threadOf(task string) (channel, ts string) {
	b, err := c.Msgs.Read(layout.Sent, "msg-"+task+"-start")
	if err != nil {
		return "", ""
	}
	var m struct {
		Slack struct {
			Channel string `json:"channel"`
			TS      string `json:"ts"`
		} `json:"slack"`
	}
	json.Unmarshal(b, &m)
	return m.Slack.Channel, m.Slack.TS
}

func TestKingdom_EndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts the whole kingdom")
	}
	k := newConnectedKingdom(t)

	t.Run("a GitHub review request ends as ✅ in the task's Slack thread", func(t *testing.T) {
		k.gh.add(map[string]any{
			"id": "7001", "unread": true, "reason": "review_requested", "updated_at": "2026-11-21T12:00:00Z",
			"subject":    map[string]any{"title": "Fix the flaky uploader", "url": "https://api.github.com/repos/acme/widgets/pulls/42", "type": "PullRequest"},
			"repository": map[string]any{"full_name": "acme/widgets"},
			"url":        "https://api.github.com/notifications/threads/7001",
		})
		var task string
		k.Eventually("a task for the review request", 60*time.Second, func() bool {
			for _, st := range []string{layout.Pending, layout.InProgress, layout.Completed} {
				for _, tk := range k.TaskList(st) {
					if tk.TargetGeneral == "gen-pr" && strings.HasPrefix(tk.EventID, "evt-github-7001-") {
						task = tk.ID
						return true
					}
				}
			}
			return false
		})
		k.Eventually("the ✅ notification in the thread", 90*time.Second, func() bool { return k.Msgs.Exists(layout.Sent, "msg-"+task+"-done") })
		ch, ts := k.threadOf(task)
		if ch == "" || ts == "" {
			t.Fatalf("no Slack thread recorded for %s", task)
		}
		var done []slackfake.Call
		for _, p := range k.posts(ch, ts) {
			if strings.Contains(p.Form.Get("text"), "✅") {
				done = append(done, p)
			}
		}
		if len(done) != 1 {
			t.Fatalf("%d ✅ posts in thread %s/%s, want 1", len(done), ch, ts)
		}
		if r := k.Result(task); r == nil || r.Status != "success" || r.General != "gen-pr" {
			t.Fatalf("result %+v", r)
		}
		k.Eventually("thread 7001 marked read", 10*time.Second, func() bool {
			for _, id := range k.gh.markedRead() {
				if id == "7001" {
					return true
				}
			}
			return false
		})
		if pr := taskPayload(k.Kingdom, task)["pr_number"]; fmt.Sprint(pr) != "42" {
			t.Errorf("pr_number = %v, want 42", pr)
		}
	})

	t.Run("needs_human: question in thread, reply over Socket Mode, resume with the session id", func(t *testing.T) {
		k.DropInbox("ask", map[string]any{"id": "evt-e2e-ask-1", "type": "test.ask", "payload": map[string]any{"needs_human": true}})
		var first string
		k.Eventually("the question", 60*time.Second, func() bool {
			if tk := k.TaskForEvent("evt-e2e-ask-1"); tk != nil {
				first = tk.ID
				return k.Msgs.Exists(layout.Sent, "msg-"+first+"-question")
			}
			return false
		})
		ch, ts := k.threadOf(first)
		var asked bool
		for _, p := range k.posts(ch, ts) {
			asked = asked || strings.Contains(p.Form.Get("text"), "Ship it to staging or production?")
		}
		if !asked {
			t.Fatalf("question not posted in thread %s/%s", ch, ts)
		}
		if _, err := k.slack.PushMessage(slackfake.Msg{Channel: ch, ChannelType: "channel", User: "UHUMAN", Text: "staging", TS: "1795300000.000100", ThreadTS: ts}); err != nil {
			t.Fatal(err)
		}
		var resume string
		k.Eventually("the resume task to finish", 90*time.Second, func() bool {
			for _, tk := range k.TaskList(layout.Completed) {
				if tk.Type == "resume" && fmt.Sprint(tk.Payload["original_task_id"]) == first {
					resume = tk.ID
					return k.Msgs.Exists(layout.Sent, "msg-"+resume+"-done")
				}
			}
			return false
		})
		res := k.Result(resume)
		// The soldier chose the first run's --session-id; the resume used it.
		var call struct {
			SessionID string `json:"session_id"`
		}
		b, _ := os.ReadFile(filepath.Join(k.L.Base, "fake-calls", first+"-0.json"))
		json.Unmarshal(b, &call)
		if res == nil || res.Status != "success" || call.SessionID == "" || res.SessionID != call.SessionID {
			t.Fatalf("resume result %+v, want success with session %q", res, call.SessionID)
		}
		if rt := taskPayload(k.Kingdom, resume)["text"]; rt != "staging" {
			t.Errorf("resume task text = %v", rt)
		}
		var answered bool
		for _, p := range k.posts(ch, ts) {
			answered = answered || strings.Contains(p.Form.Get("text"), "✅")
		}
		if !answered {
			t.Fatal("the resumed task's ✅ is not in the original thread")
		}
	})

	t.Run("a soldier that dies on its first attempt is retried after backoff; one final notification", func(t *testing.T) {
		k.DropInbox("die", map[string]any{"id": "evt-e2e-die-1", "type": "test.flaky", "payload": map[string]any{"die_first": true}})
		var task string
		k.Eventually("the retried task to finish", 120*time.Second, func() bool {
			if tk := k.TaskForEvent("evt-e2e-die-1"); tk != nil {
				task = tk.ID
				return k.Msgs.Exists(layout.Sent, "msg-"+task+"-done")
			}
			return false
		})
		tk := k.TaskForEvent("evt-e2e-die-1")
		if tk.RetryCount != 1 {
			t.Errorf("retry_count = %d, want 1", tk.RetryCount)
		}
		var retried, killed bool
		for _, ev := range k.InternalEvents() {
			var d map[string]any
			json.Unmarshal(ev.Data, &d)
			if d["task_id"] == task && ev.Type == "task.retry_scheduled" {
				retried = true
			}
			if d["task_id"] == task && ev.Type == "soldier.killed" {
				killed = true
			}
		}
		if !retried || !killed {
			t.Errorf("task.retry_scheduled=%v soldier.killed=%v, want both", retried, killed)
		}
		finals := 0
		for _, m := range append(k.Messages(layout.Sent), k.Messages(layout.Pending)...) {
			if m.TaskID != nil && *m.TaskID == task && m.Final != nil {
				finals++
			}
		}
		if finals != 1 {
			t.Fatalf("%d final notifications for %s, want 1", finals, task)
		}
	})

	t.Run("a DM is petitioned to the herald, which answers in the DM thread", func(t *testing.T) {
		dmTS := "1795300100.000200"
		if _, err := k.slack.PushMessage(slackfake.Msg{Channel: "D0HUMAN", ChannelType: "im", User: "UHUMAN", Text: "what is the status of the kingdom?", TS: dmTS}); err != nil {
			t.Fatal(err)
		}
		evID := "evt-slack-msg-1795300100-000200"
		var task string
		k.Eventually("the herald's answer", 90*time.Second, func() bool {
			if tk := k.TaskForEvent(evID); tk != nil {
				task = tk.ID
				return k.Msgs.Exists(layout.Sent, "msg-"+task+"-done")
			}
			return false
		})
		if tk := k.TaskForEvent(evID); tk.TargetGeneral != "gen-herald" {
			t.Fatalf("DM went to %s", tk.TargetGeneral)
		}
		if _, err := os.Stat(filepath.Join(k.L.Base, "fake-calls", evID+"-0.json")); err != nil {
			t.Fatalf("the petition classifier never ran: %v", err)
		}
		var inThread bool
		for _, p := range k.posts("D0HUMAN", dmTS) {
			inThread = inThread || strings.Contains(p.Form.Get("text"), "✅")
		}
		if !inThread {
			t.Fatal("the herald's answer is not in the DM's thread")
		}
	})

	t.Run("a Jira assignment reaches the subscribed general", func(t *testing.T) {
		k.jira.add(map[string]any{"id": "20001", "key": "KD-7", "fields": map[string]any{
			"summary": "Add a health endpoint", "status": map[string]any{"name": "To Do"}, "updated": "2026-11-21T12:00:00.000+0000"}})
		var task string
		k.Eventually("the Jira task to finish", 90*time.Second, func() bool {
			for _, st := range []string{layout.Completed} {
				for _, tk := range k.TaskList(st) {
					if tk.Type == "jira.ticket.assigned" && fmt.Sprint(tk.Payload["ticket_key"]) == "KD-7" {
						task = tk.ID
						return true
					}
				}
			}
			return false
		})
		if r := k.Result(task); r == nil || r.General != "gen-dev" || r.Status != "success" {
			t.Fatalf("jira result %+v", r)
		}
	})

	// Whatever ran above: nothing rejected, nothing stuck.
	k.Eventually("queues to drain", 30*time.Second, func() bool {
		return k.Tasks.Count(layout.Pending)+k.Tasks.Count(layout.InProgress)+k.Msgs.Count(layout.Pending) == 0
	})
	for _, q := range []interface{ Count(string) int }{k.Events, k.Tasks, k.Msgs} {
		if n := q.Count(layout.Rejected); n != 0 {
			t.Errorf("%d files rejected", n)
		}
	}
	// No secret in any log.
	for _, f := range []string{"logs/system.log", "start.out"} {
		b, _ := os.ReadFile(filepath.Join(k.L.Base, f))
		for _, secret := range []string{"xoxb-e2e-bot", "xapp-e2e-app", "ghp_e2etesttoken", "jira-e2e-token"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s contains a secret", f)
			}
		}
	}
}

func taskPayload(k *Kingdom, task string) map[string]any {
	for _, st := range layout.QueueStates[layout.QTasks] {
		for _, tk := range k.TaskList(st) {
			if tk.ID == task {
				return tk.Payload
			}
		}
	}
	return nil
}
