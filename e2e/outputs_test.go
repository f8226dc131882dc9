package e2e

// The agent holds no keys (SPEC §12.3), end to end with the real CLIs: the
// shipped gen-pr reviews a pull request a GitHub notification asks for,
// the real claude (against internal/testkit/modelfake) asks for the review
// as an output of its structured result, and the general posts it to the
// fake GitHub with the write token, exactly once — also when the general
// is SIGKILLed while its POST is in flight (before it landed, and after),
// and when the attempt is retried. Refused outputs are named in the
// thread. A codex general asks for a comment the same way.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/githubfake"
	"github.com/kingdom-dev/kingdom/internal/testkit/modelfake"
	"github.com/kingdom-dev/kingdom/internal/testkit/slackfake"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// writeToken is the GitHub write token of kingdom.env: the general's,
// never the soldier's.
const writeToken = "ghp_e2eWriteToken0123456789abcdefABCDEF"

const outRepo = "acme/widgets"

// outputsKingdom is a real-engine kingdom with the fake GitHub of
// internal/testkit behind the sentinel, the general and git.
type outputsKingdom struct {
	*realKingdom
	gh      *githubfake.Fake
	headSHA string
}

func newOutputsKingdom(t *testing.T) *outputsKingdom {
	t.Helper()
	claude, codex := modelfake.FindCLI(t, "claude"), modelfake.FindCLI(t, "codex")
	fake := modelfake.New()
	t.Cleanup(fake.Close)
	slack := slackfake.New()
	t.Cleanup(slack.Close)
	gh := githubfake.New(writeToken)
	t.Cleanup(gh.Close)
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
	os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(fake.CodexConfig()), 0o600)

	// The repository: main, and a PR head one commit on (GitHub serves a
	// PR's head as refs/pull/<n>/head).
	remotes := t.TempDir()
	bare := filepath.Join(remotes, "acme", "widgets.git")
	makeBareRepo(t, bare)
	work := t.TempDir()
	gitRun(t, "", "clone", "-q", bare, work)
	os.WriteFile(filepath.Join(work, "uploader.go"), []byte("package widgets\n\nfunc Upload() error { return nil }\n"), 0o600)
	gitRun(t, work, "add", ".")
	gitRun(t, work, "-c", "user.name=octo", "-c", "user.email=octo@example.invalid", "commit", "-q", "-m", "Retry the upload")
	gitRun(t, work, "push", "-q", "origin", "HEAD:refs/heads/fix-uploader")
	sha := strings.TrimSpace(gitRun(t, work, "rev-parse", "HEAD"))
	gh.AddRepo(outRepo, "main")

	sys := fmt.Sprintf(`runtime:
  engine: claude
  claude:
    command: %q
  codex:
    command: %q
  env_passthrough: [PATH, HOME, LANG, TZ, ANTHROPIC_API_KEY, OPENAI_API_KEY, ANTHROPIC_BASE_URL, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, DISABLE_AUTOUPDATER]
git:
  clone_url: "file://%s/{repo}.git"
watchdog:
  interval_seconds: 1
`, claude, codex, remotes)
	env := "SLACK_BOT_TOKEN=xoxb-e2e-bot\nSLACK_APP_TOKEN=xapp-e2e-app\nOPENAI_API_KEY=sk-e2e-openai-fake\nGH_TOKEN=" + writeToken + "\n"
	for k, v := range fake.ClaudeEnv() {
		env += k + "=" + v + "\n"
	}
	files := map[string]string{
		"config/system.yaml": sys,
		"config/sentinel.yaml": fmt.Sprintf("polling:\n  github:\n    interval_seconds: 1\n    api_url: %q\n  inbox:\n    interval_seconds: 1\n",
			gh.URL()),
		"config/king.yaml":  "retry:\n  max_attempts: 2\n  backoff_seconds: 1\n  max_backoff_seconds: 2\npetition:\n  timeout_seconds: 60\n",
		"config/envoy.yaml": fmt.Sprintf("slack:\n  api_url: %q\n  default_channel: C0KINGDOM\n  allowed_users: [UHUMAN]\nintervals:\n  outbound_seconds: 1\n", slack.APIURL()),
		"config/chamberlain.yaml": "monitoring:\n  interval_seconds: 1\nthresholds:\n  cpu_yellow: 100\n  cpu_orange: 100\n  cpu_red: 100\n" +
			"  memory_yellow: 95\n  memory_orange: 98\n  memory_red: 99\n",
		// gen-pr is the shipped general (start installs it); gen-cx runs
		// codex and may comment.
		"config/generals/gen-cx.yaml": "name: gen-cx\ndescription: \"Answers test requests with a comment.\"\nengine: codex\ntimeout_seconds: 240\n" +
			"max_concurrent: 2\nsubscribes: [\"test.codex\"]\noutputs:\n  allow: [github.comment]\n",
		"config/generals/templates/gen-cx.md": "Task {{task_id}}.\n\n{{payload.text}}\n",
		"config/kingdom.env":                  env,
	}
	k := NewKingdom(t, files)
	os.Chmod(k.L.EnvFile(), 0o600)
	rk := &realKingdom{Kingdom: k, engine: "claude", fake: fake, slack: slack, home: home}
	rk.startWithHome()
	k.WaitRoles("sentinel", "king", "envoy", "chamberlain", "gen-pr", "gen-cx")
	if err := slack.WaitConnected(30 * time.Second); err != nil {
		t.Fatalf("envoy never connected to the fake Socket Mode: %v", err)
	}
	return &outputsKingdom{realKingdom: rk, gh: gh, headSHA: sha}
}

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	c := exec.Command("git", args...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return string(out)
}

// requestReview opens PR n (its title carries the scenario's marker) and
// asks the kingdom to review it by a notification; it returns the task.
func (k *outputsKingdom) requestReview(t *testing.T, n int, marker string) string {
	t.Helper()
	// The base commit of the PR's refs is the bare repository's.
	gitRun(t, "", "--git-dir", k.bare(), "update-ref", fmt.Sprintf("refs/pull/%d/head", n), k.headSHA)
	k.gh.AddPull(outRepo, githubfake.Pull{Number: n, Title: marker + " Retry the flaky upload", Body: "Retries the upload three times.",
		Author: "octo", Head: "fix-uploader", HeadSHA: k.headSHA, Base: "main",
		Files: []githubfake.File{{Filename: "uploader.go", Status: "added", Additions: 3}}})
	thread := fmt.Sprintf("%d", 8000+n)
	k.gh.AddNotification(thread, outRepo, n, "review_requested")
	var task string
	k.Eventually("a gen-pr task for PR "+thread, realWait, func() bool {
		for _, st := range layout.QueueStates[layout.QTasks] {
			for _, tk := range k.TaskList(st) {
				if tk.TargetGeneral == "gen-pr" && strings.HasPrefix(tk.EventID, "evt-github-"+thread+"-") {
					task = tk.ID
					return true
				}
			}
		}
		return false
	})
	return task
}

func (k *outputsKingdom) bare() string {
	// clone_url is file://<remotes>/{repo}.git
	b, _ := os.ReadFile(k.L.ConfigFile("system.yaml"))
	m := regexp.MustCompile(`clone_url: "file://(.*)/\{repo\}\.git"`).FindSubmatch(b)
	return filepath.Join(string(m[1]), outRepo+".git")
}

// reviewPosts are the POSTs of a review on PR n the fake GitHub served
// (held and dropped ones included).
func (k *outputsKingdom) reviewPosts(n int) []githubfake.Request {
	var out []githubfake.Request
	for _, r := range k.gh.Requests() {
		if r.Method == "POST" && r.Path == fmt.Sprintf("/repos/%s/pulls/%d/reviews", outRepo, n) {
			out = append(out, r)
		}
	}
	return out
}

// review is the agent's structured result asking for one review.
func review(marker, body string, extra ...map[string]any) modelfake.Reply {
	outs := []any{map[string]any{"kind": "github.review", "event": "COMMENT", "body": body,
		"comments": []any{map[string]any{"path": "uploader.go", "line": 3, "body": "Upload never fails here: test the retry."}}}}
	for _, e := range extra {
		outs = append(outs, e)
	}
	return so(map[string]any{"status": "success", "summary": "Reviewed the uploader " + marker, "outputs": outs})
}

// exactlyOneReview checks PR n has one review, posted by Kingdom with the
// write token and carrying the marker of task's attempt's output 0, and
// that the thread names its link; it returns the review.
func (k *outputsKingdom) exactlyOneReview(t *testing.T, n int, task string, attempt int, body string) githubfake.Comment {
	t.Helper()
	rs := k.gh.Reviews(outRepo, n)
	if len(rs) != 1 {
		t.Fatalf("PR %d has %d reviews, want exactly 1: %+v", n, len(rs), rs)
	}
	r := rs[0]
	key := fmt.Sprintf("%s-%d-0", task, attempt)
	if r.Auth != "Bearer "+writeToken || !strings.Contains(r.Body, body) || !strings.Contains(r.Body, "<!-- kingdom:"+key+" -->") ||
		r.State != "COMMENTED" || len(r.Comments) != 1 {
		t.Fatalf("review %+v: want Kingdom's, with the write token, the body and the marker of %s", r, key)
	}
	if th := k.thread(task); !strings.Contains(th, "github.review: "+r.HTMLURL) {
		t.Fatalf("the thread does not name the review's link %s:\n%s", r.HTMLURL, th)
	}
	return r
}

// completedOutputs are the outputs task.completed carries for task.
func (k *outputsKingdom) completedOutputs(task string) []doc.OutputOutcome {
	for _, ev := range k.InternalEvents() {
		if ev.Type != "task.completed" {
			continue
		}
		var d struct {
			TaskID  string              `json:"task_id"`
			Outputs []doc.OutputOutcome `json:"outputs"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && d.TaskID == task {
			return d.Outputs
		}
	}
	return nil
}

// generalPID is the pid of a general's process (its tmux session runs
// the binary directly).
func (k *outputsKingdom) generalPID(t *testing.T, name string) int {
	t.Helper()
	pid := rolePIDs(t, k.Kingdom)[name]
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if pid <= 0 || strings.TrimSpace(string(comm)) != "general" {
		t.Fatalf("session %s: pid %d runs %q, not the general", name, pid, comm)
	}
	return pid
}

func waitHold(t *testing.T, h *githubfake.Hold, what string) {
	t.Helper()
	select {
	case <-h.Arrived:
	case <-time.After(realWait):
		t.Fatalf("timed out after %v waiting for %s", realWait, what)
	}
}

// sessionRE finds the claude session a model request belongs to (its
// metadata.user_id).
var sessionRE = regexp.MustCompile(`\\"session_id\\":\\"([0-9a-f-]{36})\\"`)

var repoDirRE = regexp.MustCompile("your working directory `([^`]+)`")

// repoDir is the worktree a gen-pr prompt names.
func repoDir(r modelfake.Request) string {
	for _, s := range r.Texts {
		if m := repoDirRE.FindStringSubmatch(s); m != nil {
			return m[1]
		}
	}
	return ""
}

func TestOutputs_RealEngines(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end with the real claude and codex CLIs")
	}
	k := newOutputsKingdom(t)

	t.Run("gen-pr's review is posted once by Kingdom with the write token the soldier never had", func(t *testing.T) {
		m := "SCEN-OUT-OK"
		body := "Looks right; one remark on the retry " + m
		// The agent dumps its environment with the one command it may run
		// (git: an alias runs any program), then asks for the review.
		k.fake.Script(m, modelfake.Turns(
			modelfake.Shell("git -c alias.kenv='!env' kenv"),
			review(m, body),
		))
		task := k.requestReview(t, 41, m)
		done := k.final(t, task, "done")
		if !strings.Contains(done, "Reviewed the uploader") {
			t.Fatalf("✅ %q", done)
		}
		rev := k.exactlyOneReview(t, 41, task, 0, body)
		if n := len(k.reviewPosts(41)); n != 1 {
			t.Fatalf("%d review POSTs, want 1", n)
		}
		reqs := k.fake.Requests(m)
		if len(reqs) < 2 {
			t.Fatalf("%d model requests", len(reqs))
		}
		envDump := strings.Join(reqs[1].ToolResults, "\n")
		if !strings.Contains(envDump, "KINGDOM_TASK_ID="+task) {
			t.Fatalf("the agent's env dump did not run: %q", envDump)
		}
		for _, bad := range []string{writeToken, "GH_TOKEN", "GITHUB_TOKEN", "SLACK_BOT_TOKEN", "xoxb-e2e-bot"} {
			if strings.Contains(envDump, bad) {
				t.Errorf("the soldier's environment holds %s", bad)
			}
		}
		for _, r := range k.fake.Requests("") {
			if strings.Contains(string(r.Body), writeToken) {
				t.Fatalf("the write token reached the model in a request of %q", r.Scenario)
			}
		}
		if r := k.Result(task); r == nil || len(r.OutputOutcomes) != 1 || r.OutputOutcomes[0].State != doc.OutcomeDone || r.OutputOutcomes[0].Link != rev.HTMLURL {
			t.Fatalf("result outcomes %+v", r)
		}
		if outs := k.completedOutputs(task); len(outs) != 1 || outs[0].Link != rev.HTMLURL {
			t.Fatalf("task.completed outputs %+v", outs)
		}
	})

	for _, c := range []struct {
		name  string
		pr    int
		mode  githubfake.HoldMode
		posts int // the POSTs the fake saw: a dropped one is posted again, a landed one is found
	}{
		{"killed before the POST landed", 42, githubfake.HoldDrop, 2},
		{"killed after the POST landed", 43, githubfake.HoldLanded, 1},
	} {
		t.Run("SIGKILL of the general while the review's POST is in flight, "+c.name+": exactly one review", func(t *testing.T) {
			m := fmt.Sprintf("SCEN-OUT-KILL%d", c.pr)
			body := "Review after a crash " + m
			k.fake.Script(m, modelfake.Always(review(m, body)))
			h := k.gh.HoldNext(githubfake.HoldReview, c.mode)
			defer h.Release()
			task := k.requestReview(t, c.pr, m)
			waitHold(t, h, "the review's POST")
			pid := k.generalPID(t, "gen-pr")
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			k.Eventually("the general's process gone", realWait, func() bool { return syscall.Kill(pid, 0) != nil })
			h.Release()
			k.final(t, task, "done")
			k.exactlyOneReview(t, c.pr, task, 0, body)
			if n := len(k.reviewPosts(c.pr)); n != c.posts {
				t.Fatalf("%d review POSTs, want %d", n, c.posts)
			}
			if k.generalPID(t, "gen-pr") == pid {
				t.Fatal("the general was not relaunched")
			}
			if n := k.attempts(task); n != 1 {
				t.Fatalf("%d attempts, want 1 (the relaunched general finishes the attempt)", n)
			}
		})
	}

	t.Run("a retried attempt posts its review once", func(t *testing.T) {
		m := "SCEN-OUT-RETRY"
		body := "Review of the second attempt " + m
		// Every model call of the first attempt's session fails, final (the
		// CLI does not retry it): the attempt ends EngineError, retried.
		first := ""
		k.fake.Script(m, func(r modelfake.Request) modelfake.Reply {
			sid := ""
			if mm := sessionRE.FindSubmatch(r.Body); mm != nil {
				sid = string(mm[1])
			}
			if first == "" {
				first = sid
			}
			if sid == first {
				return modelfake.Reply{Status: 500, ErrType: "api_error", ErrMessage: "Internal server error (the test's fault)",
					Headers: map[string]string{"x-should-retry": "false"}}
			}
			return review(m, body)
		})
		task := k.requestReview(t, 44, m)
		k.final(t, task, "done")
		failed := 0
		for _, r := range k.fake.Requests(m) {
			if mm := sessionRE.FindSubmatch(r.Body); mm != nil && string(mm[1]) == first {
				failed++
			}
		}
		t.Logf("the first attempt's session made %d model calls, each failed", failed)
		if n := k.attempts(task); n != 2 {
			t.Fatalf("%d attempts, want 2", n)
		}
		k.exactlyOneReview(t, 44, task, 1, body)
		if n := len(k.reviewPosts(44)); n != 1 {
			t.Fatalf("%d review POSTs, want 1", n)
		}
	})

	t.Run("outputs over their cap, of a kind not allowed or touching a protected path are refused and named in the thread", func(t *testing.T) {
		m := "SCEN-OUT-REFUSE"
		body := "The one review that runs " + m
		k.fake.Script(m, func(r modelfake.Request) modelfake.Reply {
			if r.Turn == 0 {
				return modelfake.Tool("Write", map[string]any{"file_path": filepath.Join(repoDir(r), ".github", "workflows", "ci.yml"),
					"content": "on: push\njobs: {}\n"})
			}
			return review(m, body,
				map[string]any{"kind": "github.review", "event": "COMMENT", "body": "a second review " + m},
				map[string]any{"kind": "jira.comment", "body": "a Jira comment " + m},
				map[string]any{"kind": "github.push", "message": "Loosen CI " + m},
				map[string]any{"kind": "github.pull_request", "title": "Loosen CI", "body": "pr " + m},
			)
		})
		task := k.requestReview(t, 45, m)
		k.final(t, task, "done")
		k.exactlyOneReview(t, 45, task, 0, body)
		th := k.thread(task)
		for _, want := range []string{
			"github.review refused: over outputs.max for github.review (1 per attempt)",
			"jira.comment refused: jira.comment is not in the manifest's outputs.allow",
			"github.push refused: the push touches a protected path: .github/workflows/ci.yml",
			"github.pull_request refused: a pull request needs a github.push before it",
		} {
			if !strings.Contains(th, want) {
				t.Errorf("the thread lacks %q:\n%s", want, th)
			}
		}
		if out := gitRun(t, "", "--git-dir", k.bare(), "for-each-ref", "refs/heads/kingdom/"); out != "" {
			t.Errorf("a kingdom branch was pushed: %s", out)
		}
		if len(k.gh.PullsOpened(outRepo)) != 0 {
			t.Error("a pull request was opened")
		}
		outs := k.completedOutputs(task)
		if len(outs) != 5 || outs[0].State != doc.OutcomeDone {
			t.Fatalf("task.completed outputs %+v", outs)
		}
		for _, o := range outs[1:] {
			if o.State != doc.OutcomeRefused || o.Reason == "" {
				t.Errorf("outcome %+v, want refused with its reason", o)
			}
		}
	})

	t.Run("codex asks for a comment; Kingdom posts it once", func(t *testing.T) {
		m := "SCEN-OUT-CODEX"
		body := "Answered by codex " + m
		k.engine = "codex"
		res := k.result(map[string]any{"status": "success", "summary": "Commented " + m, "track_conversation": nil,
			"outputs": []any{map[string]any{"kind": "github.comment", "event": "", "body": body, "comments": []any{},
				"branch_suffix": "", "message": "", "title": ""}}})
		k.engine = "claude"
		k.fake.Script(m, modelfake.Turns(res))
		id := "evt-out-codex"
		k.DropInbox("out-codex", map[string]any{"id": id, "type": "test.codex", "priority": "high", "repo": outRepo,
			"payload": map[string]any{"text": m + " please answer on the issue", "issue_number": 5}})
		task := k.taskOf(t, id)
		k.final(t, task, "done")
		cs := k.gh.Comments(outRepo, 5)
		if len(cs) != 1 || cs[0].Auth != "Bearer "+writeToken || !strings.Contains(cs[0].Body, body) ||
			!strings.Contains(cs[0].Body, "<!-- kingdom:"+task+"-0-0 -->") {
			t.Fatalf("issue 5 comments %+v, want exactly Kingdom's one", cs)
		}
		if th := k.thread(task); !strings.Contains(th, "github.comment: "+cs[0].HTMLURL) {
			t.Fatalf("the thread does not name the comment:\n%s", th)
		}
		if reqs := k.fake.Requests(m); len(reqs) == 0 || reqs[0].API != modelfake.OpenAI {
			t.Fatalf("codex never asked the model: %+v", reqs)
		}
	})
}
