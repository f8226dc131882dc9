// Package e2e runs the whole kingdom from its real binaries: `start` launches
// every role in tmux on a private socket, the fake claude (or the demo
// soldier) plays the agent, and local fakes speak GitHub's, Jira's and
// Slack's protocols. Nothing inside the kingdom is mocked.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	filestore "github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// binDir holds the binaries built once for the package.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kingdom-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	// -tags crashpoints: the binaries under test carry their crash points
	// (SPEC §11.2); the shipped ones do not.
	cmd := exec.Command("go", "build", "-tags", "crashpoints", "-o", dir+"/",
		"./cmd/start", "./cmd/sentinel", "./cmd/king", "./cmd/general", "./cmd/envoy", "./cmd/chamberlain", "./cmd/soldier-spawn",
		"./scripts/demo-soldier", "./internal/testkit/fakeclaude")
	cmd.Dir = ".."
	// As make build does: static binaries, pure-Go net.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build binaries:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Kingdom is one installation under test.
type Kingdom struct {
	t     *testing.T
	L     layout.Layout
	Tmux  *tmux.Client
	start *exec.Cmd
	out   *os.File
	// St is the test's own files store of the base dir (another process
	// to the kingdom's roles); Events, Tasks and Msgs are its queues.
	St     *filestore.Store
	Events *queue.Queue
	Tasks  *queue.Queue
	Msgs   *queue.Queue
	// Env is added to start's environment (as systemd's Environment= would).
	Env []string
	// failures are the reasons given to Errorf and Eventually, said again
	// after the logs are dumped: CI shows a failed test's last lines.
	failures []string
}

// NewKingdom writes files (relative to the base dir) and returns the
// installation, not yet started.
func NewKingdom(t *testing.T, files map[string]string) *Kingdom {
	t.Helper()
	base, err := os.MkdirTemp("", "kingdom-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	l := layout.New(base)
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	for rel, body := range files {
		p := filepath.Join(base, rel)
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st, err := filestore.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	k := &Kingdom{
		t: t, L: l, St: st,
		Tmux:   &tmux.Client{Socket: fmt.Sprintf("kingdom-e2e-%d-%d", os.Getpid(), time.Now().UnixNano())},
		Events: queue.OnStore(st, l, layout.QEvents, nil, "test-host"),
		Tasks:  queue.OnStore(st, l, layout.QTasks, nil, "test-host"),
		Msgs:   queue.OnStore(st, l, layout.QMessages, nil, "test-host"),
	}
	t.Cleanup(func() {
		k.Stop()
		st.Close()
		if t.Failed() {
			k.dumpLogs()
			t.Logf("base dir kept for inspection: %s", base)
			for i, f := range k.failures {
				if i == 20 {
					t.Logf("failed: and %d more", len(k.failures)-i)
					break
				}
				t.Logf("failed: %s", f)
			}
			return
		}
		os.RemoveAll(base)
	})
	return k
}

// Start runs `start` in the background.
func (k *Kingdom) Start() {
	k.t.Helper()
	out, err := os.Create(filepath.Join(k.L.Base, "start.out"))
	if err != nil {
		k.t.Fatal(err)
	}
	k.out = out
	k.start = exec.Command(filepath.Join(binDir, "start"), "--base-dir", k.L.Base)
	k.start.Env = append(append(cleanEnv(), "KINGDOM_TMUX_SOCKET="+k.Tmux.Socket), k.Env...)
	k.start.Stdout, k.start.Stderr = out, out
	if err := k.start.Start(); err != nil {
		k.t.Fatal(err)
	}
}

// cleanEnv drops the developer's real tokens: only the kingdom.env of the
// test installation may provide secrets.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SLACK_") || strings.HasPrefix(k, "JIRA_") || k == "GH_TOKEN" || k == "GITHUB_TOKEN" || (strings.HasPrefix(k, "KINGDOM_") && k != "KINGDOM_CPUPROFILE_DIR") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// Stop stops start (SIGTERM → it stops every role) and the tmux server.
func (k *Kingdom) Stop() {
	if k.start != nil && k.start.Process != nil {
		k.start.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { k.start.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			k.start.Process.Kill()
		}
		k.start = nil
	}
	k.Tmux.KillServer(context.Background())
	if k.out != nil {
		k.out.Close()
	}
}

func (k *Kingdom) dumpLogs() {
	for _, f := range []string{"start.out", "logs/system.log"} {
		b, _ := os.ReadFile(filepath.Join(k.L.Base, f))
		lines := strings.Split(string(b), "\n")
		if len(lines) > 80 {
			lines = lines[len(lines)-80:]
		}
		k.t.Logf("── %s (tail) ──\n%s", f, strings.Join(lines, "\n"))
	}
}

// Errorf is t.Errorf, and the reason is said again at the end.
func (k *Kingdom) Errorf(format string, args ...any) {
	k.t.Helper()
	k.failures = append(k.failures, fmt.Sprintf(format, args...))
	k.t.Errorf(format, args...)
}

// Fatalf is t.Fatalf, and the reason is said again at the end.
func (k *Kingdom) Fatalf(format string, args ...any) {
	k.t.Helper()
	k.failures = append(k.failures, fmt.Sprintf(format, args...))
	k.t.Fatalf(format, args...)
}

// Eventually polls cond until it holds or timeout passes (the kingdom runs
// in real processes, so waiting on real time is the point here).
func (k *Kingdom) Eventually(what string, timeout time.Duration, cond func() bool) {
	k.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			k.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitRoles waits until every named role has a heartbeat.
func (k *Kingdom) WaitRoles(roles ...string) {
	k.t.Helper()
	k.Eventually("roles "+strings.Join(roles, ","), 60*time.Second, func() bool {
		for _, r := range roles {
			if _, err := os.Stat(k.L.Heartbeat(r)); err != nil {
				return false
			}
		}
		return true
	})
}

// DropInbox writes an inbox file the way producers must (dot-temp, rename).
func (k *Kingdom) DropInbox(name string, v any) {
	k.t.Helper()
	b, _ := json.Marshal(v)
	tmp := filepath.Join(k.L.Inbox(), "."+name+".tmp")
	os.WriteFile(tmp, b, 0o600)
	if err := os.Rename(tmp, filepath.Join(k.L.Inbox(), name+".json")); err != nil {
		k.t.Fatal(err)
	}
}

// InternalEvents returns every line of events.log (and its daily splits).
func (k *Kingdom) InternalEvents() []eventlog.Event {
	var out []eventlog.Event
	files, _ := filepath.Glob(filepath.Join(k.L.LogsDir(), "events*.log"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n") {
			var ev eventlog.Event
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Type != "" {
				out = append(out, ev)
			}
		}
	}
	return out
}

// Messages returns the messages in a state, decoded.
func (k *Kingdom) Messages(state string) []doc.Message {
	return decodeAll[doc.Message](k.Msgs, state)
}

// TaskList returns every task file in a state, decoded.
func (k *Kingdom) TaskList(state string) []doc.Task {
	return decodeAll[doc.Task](k.Tasks, state)
}

func decodeAll[T any](q *queue.Queue, state string) []T {
	es, _ := q.List(state)
	var out []T
	for _, e := range es {
		var v T
		if json.Unmarshal(e.Data, &v) == nil {
			out = append(out, v)
		}
	}
	return out
}

// TaskForEvent finds the task created for an event in any state.
func (k *Kingdom) TaskForEvent(eventID string) *doc.Task {
	for _, st := range layout.QueueStates[layout.QTasks] {
		for _, t := range k.TaskList(st) {
			if t.EventID == eventID {
				tt := t
				return &tt
			}
		}
	}
	return nil
}

// Result reads the final result of a task.
func (k *Kingdom) Result(task string) *doc.Result {
	b, err := os.ReadFile(k.L.ResultFinal(task))
	if err != nil {
		return nil
	}
	var r doc.Result
	if json.Unmarshal(b, &r) != nil {
		return nil
	}
	return &r
}

// makeBareRepo creates a bare git repository with one commit.
func makeBareRepo(t *testing.T, bare string) {
	t.Helper()
	work := t.TempDir()
	run := func(dir string, args ...string) {
		c := exec.Command("git", args...)
		c.Dir = dir
		c.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@kingdom.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@kingdom.invalid")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	run(work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "README.md"), []byte("# test repo\n"), 0o600)
	run(work, "add", ".")
	run(work, "commit", "-q", "-m", "init")
	os.MkdirAll(filepath.Dir(bare), 0o700)
	run(filepath.Dir(bare), "clone", "-q", "--bare", work, bare)
}
