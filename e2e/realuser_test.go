package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/internal/testkit/modelfake"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// The shipped default configuration as a dedicated (unprivileged) user:
// the real soldier-spawn runs the real claude CLI as `nobody` with a
// private HOME (SPEC §10.4).
func TestRealEngines_ClaudeAsDedicatedUser(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end with the real claude CLI")
	}
	cli := modelfake.FindCLI(t, "claude")
	if os.Geteuid() != 0 {
		t.Skip("switching to an unprivileged user needs root")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not installed")
	}
	const uid, gid = 65534, 65534 // nobody:nogroup
	root, err := os.MkdirTemp("", "kingdom-e2e-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	asUser := func(args ...string) *exec.Cmd {
		return exec.Command(setpriv, append([]string{"--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(gid), "--clear-groups", "--"}, args...)...)
	}
	// The user must reach the CLI; a checkout under a private home is not
	// reachable, so the binary is copied out then.
	if err := asUser("test", "-x", cli).Run(); err != nil {
		cli = copyExecutable(t, cli, filepath.Join(root, "claude"))
	}
	spawn := copyExecutable(t, filepath.Join(binDir, "soldier-spawn"), filepath.Join(root, "soldier-spawn"))

	fake := modelfake.New()
	t.Cleanup(fake.Close)
	base, home, work := filepath.Join(root, "base"), filepath.Join(root, "home"), filepath.Join(root, "work")
	l := layout.New(base)
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(home, 0o700)
	os.MkdirAll(work, 0o700)
	sys := fmt.Sprintf("runtime:\n  engine: claude\n  claude:\n    command: %q\n  env_passthrough: [PATH, HOME, ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, DISABLE_AUTOUPDATER]\n", cli)
	os.WriteFile(l.ConfigFile("system.yaml"), []byte(sys), 0o600)
	var env strings.Builder
	for k, v := range fake.ClaudeEnv() {
		env.WriteString(k + "=" + v + "\n")
	}
	os.WriteFile(l.EnvFile(), []byte(env.String()), 0o600)
	filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, gid) })

	run := func(task, prompt, resume string) map[string]any {
		t.Helper()
		pf := filepath.Join(base, task+".md")
		os.WriteFile(pf, []byte(prompt), 0o600)
		os.Lchown(pf, uid, gid)
		args := []string{spawn, "run", "--base-dir", base, "--task", task, "--general", "gen-real", "--prompt", pf,
			"--workdir", work, "--soldier-id", "soldier-1-" + task[len(task)-3:]}
		if resume != "" {
			args = append(args, "--resume", resume)
		}
		cmd := asUser(args...)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("soldier-spawn run as nobody: %v\n%s", err, out)
		}
		b, err := os.ReadFile(l.ResultRaw(task))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		return m
	}

	fake.Script("SCEN-USER", modelfake.Turns(
		modelfake.Tool("Write", map[string]any{"file_path": filepath.Join(work, "NOTES.md"), "content": "edited as nobody\n"}),
		so(map[string]any{"status": "needs_human", "summary": "blocked", "question": "Which release?"}),
		so(map[string]any{"status": "success", "summary": "Released as the dedicated user"}),
	))
	first := run("task-20260101-901", "SCEN-USER prepare the release", "")
	if first["status"] != "needs_human" || first["question"] != "Which release?" {
		t.Fatalf("first attempt as nobody: %v", first)
	}
	if b, err := os.ReadFile(filepath.Join(work, "NOTES.md")); err != nil || string(b) != "edited as nobody\n" {
		t.Fatalf("the agent could not edit its cwd under the default permissions: %v %q", err, b)
	}
	project := engine.ClaudeProjectDir(filepath.Join(home, ".claude"), work)
	if _, err := os.Stat(project); err != nil {
		t.Fatalf("the needs_human session is not kept in the private HOME: %v", err)
	}
	sid, _ := first["session_id"].(string)
	second := run("task-20260101-902", "The human answered: 2.0", sid)
	if second["status"] != "success" || second["session_id"] != sid {
		t.Fatalf("resume as nobody: %v", second)
	}
	reqs := fake.Requests("SCEN-USER")
	if last := reqs[len(reqs)-1]; !last.HasText("The human answered: 2.0") || !last.HasText("Which release?") {
		t.Fatalf("the resumed request lacks the earlier turns")
	}
	if r, err := schema.DecodeRawResult(mustJSON(second)); err != nil || r.Usage == nil || r.CostUSD == nil {
		t.Fatalf("raw result %v: %v", second, err)
	}
	if _, err := os.Stat(project); !os.IsNotExist(err) {
		t.Fatalf("the finished task's session store %s is left behind: %v", project, err)
	}

	// As a dedicated user, bypass mode is the operator's choice and runs.
	bypass := strings.Replace(sys, "    command:", "    args: [--permission-mode, bypassPermissions]\n    command:", 1)
	os.WriteFile(l.ConfigFile("system.yaml"), []byte(bypass), 0o600)
	fake.Script("SCEN-USER-BYPASS", modelfake.Turns(so(map[string]any{"status": "success", "summary": "bypass as a user"})))
	if r := run("task-20260101-903", "SCEN-USER-BYPASS go", ""); r["status"] != "success" {
		t.Fatalf("bypass mode as nobody: %v", r)
	}
}

func copyExecutable(t *testing.T, src, dst string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// unprivileged is a dedicated user a whole kingdom runs as: every role,
// hence every soldier and its engine, runs with the user's uid, groups
// and private HOME. This is the setup docs/OPERATING.md recommends (a
// dedicated user that owns $BASE_DIR). A root kingdom that drops
// privileges only for the engine cannot work: the kingdom keeps every
// directory of $BASE_DIR at 0700, so another user cannot reach a task's
// working directory.
type unprivileged struct {
	uid, gid int
	setpriv  string
	root     string // root-owned, 0755: the wrapper scripts, the home
	home     string // the user's private HOME (0700, owned by the user)
}

// newUnprivileged prepares nobody:nogroup. Switching user needs root and
// util-linux's setpriv; without them the test is skipped, except under
// CI=true, where it must run.
func newUnprivileged(t *testing.T) *unprivileged {
	t.Helper()
	skip := t.Skip
	if os.Getenv("CI") == "true" {
		skip = t.Fatal
	}
	if os.Geteuid() != 0 {
		skip("switching to an unprivileged user needs root")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		skip("setpriv (util-linux) not installed")
	}
	root, err := os.MkdirTemp("", "kingdom-e2e-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	u := &unprivileged{uid: 65534, gid: 65534, setpriv: setpriv, root: root, home: filepath.Join(root, "home")}
	os.MkdirAll(u.home, 0o700)
	os.Lchown(u.home, u.uid, u.gid)
	// The test binaries are built into a 0700 directory of root's.
	os.Chmod(binDir, 0o755)
	return u
}

// cmd runs name as the user.
func (u *unprivileged) cmd(name string, args ...string) *exec.Cmd {
	return exec.Command(u.setpriv, append([]string{"--reuid=" + strconv.Itoa(u.uid), "--regid=" + strconv.Itoa(u.gid), "--clear-groups", "--", name}, args...)...)
}

// reach returns a path of the CLI the user can execute: a checkout under
// a private home is not reachable, so the binary is copied out then.
func (u *unprivileged) reach(cli string) string {
	if u.cmd("test", "-x", cli).Run() == nil {
		return cli
	}
	dst := filepath.Join(u.root, filepath.Base(cli))
	in, err := os.ReadFile(cli)
	if err == nil {
		err = os.WriteFile(dst, in, 0o755)
	}
	if err != nil {
		panic(fmt.Sprintf("copy %s for the unprivileged user: %v", cli, err))
	}
	return dst
}

// adopt hands the installation to the user: it owns $BASE_DIR, and the
// test's tmux client reaches the user's private tmux server.
func (u *unprivileged) adopt(k *Kingdom) {
	filepath.Walk(k.L.Base, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, u.uid, u.gid) })
	tm := filepath.Join(u.root, "tmux-as-user")
	script := fmt.Sprintf("#!/bin/sh\nexec %s --reuid=%d --regid=%d --clear-groups -- tmux \"$@\"\n", u.setpriv, u.uid, u.gid)
	if err := os.WriteFile(tm, []byte(script), 0o755); err != nil {
		k.t.Fatal(err)
	}
	k.Tmux.Bin = tm
}

// command is a kingdom binary run by the kingdom's user.
func (k *realKingdom) command(name string, args ...string) *exec.Cmd {
	if k.user == nil {
		return exec.Command(filepath.Join(binDir, name), args...)
	}
	return k.user.cmd(filepath.Join(binDir, name), args...)
}

// dropInbox is DropInbox with the file owned by the kingdom's user.
func (k *realKingdom) dropInbox(name string, v any) {
	k.t.Helper()
	if k.user == nil {
		k.DropInbox(name, v)
		return
	}
	b, _ := json.Marshal(v)
	tmp := filepath.Join(k.L.Inbox(), "."+name+".tmp")
	os.WriteFile(tmp, b, 0o600)
	os.Lchown(tmp, k.user.uid, k.user.gid)
	if err := os.Rename(tmp, filepath.Join(k.L.Inbox(), name+".json")); err != nil {
		k.t.Fatal(err)
	}
}

// A whole kingdom run by a dedicated unprivileged user (nobody, private
// HOME) with the shipped default claude configuration passes every
// scenario the root kingdom does (SPEC §10, issue 11), in parallel.
func TestRealEngines_ClaudeKingdomAsDedicatedUser(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end with the real claude CLI")
	}
	modelfake.FindCLI(t, "claude")
	u := newUnprivileged(t)
	k := newRealKingdomAs(t, "claude", u)
	t.Run("parallel", func(t *testing.T) {
		k.scenarios(t)
		t.Run("a petition runs with no tools and routes the DM", k.petition)
		t.Run("the agent runs as the user, in its private HOME", func(t *testing.T) {
			t.Parallel()
			m := "SCEN-CLAUDE-WHOAMI"
			k.fake.Script(m, modelfake.Turns(
				modelfake.Shell("id -u; id -g; echo \"home=$HOME\"; touch made-by-agent && stat -c owner=%u made-by-agent"),
				so(map[string]any{"status": "success", "summary": "Checked who I am " + m}),
			))
			task := k.taskOf(t, k.drop(m, "who are you"))
			if done := k.final(t, task, "done"); !strings.Contains(done, "Checked who I am") {
				t.Fatalf("✅ %q", done)
			}
			reqs := k.fake.Requests(m)
			if len(reqs) < 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			out := strings.Join(reqs[1].ToolResults, "\n")
			// Its cwd is writable, and what it writes is the user's.
			want := fmt.Sprintf("%d\n%d\nhome=%s\nowner=%d", u.uid, u.gid, u.home, u.uid)
			if !strings.Contains(out, want) {
				t.Fatalf("the agent's shell said %q, want it to contain %q", out, want)
			}
		})
	})
}
