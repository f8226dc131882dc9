package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
)

// Issue #13 item 7, on the real binaries: a sentinel frozen (stopped) keeps
// its leader lock. The chamberlain kills the frozen process itself, not only
// its tmux session, and start's relaunch (--standby) takes the lock over: a
// new sentinel ticks again and the crash-loop guard never trips.
func TestHungRole_IsKilledAndItsRelaunchTakesOver(t *testing.T) {
	k := NewKingdom(t, map[string]string{
		"config/system.yaml":      "watchdog:\n  interval_seconds: 1\n  crash_loop:\n    max_restarts: 3\n    window_minutes: 10\n",
		"config/sentinel.yaml":    "polling:\n  inbox:\n    interval_seconds: 1\n",
		"config/chamberlain.yaml": "monitoring:\n  interval_seconds: 1\nheartbeat:\n  threshold_seconds: 3\n",
	})
	k.Start()
	k.WaitRoles("sentinel", "king", "chamberlain")
	var frozen int
	k.Eventually("sentinel to lead", 30*time.Second, func() bool {
		held, pid := lockfile.Held(k.L.LeaderLock("sentinel"))
		frozen = pid
		return held && pid > 0
	})
	freeze(t, frozen)
	t.Cleanup(func() { syscall.Kill(frozen, syscall.SIGKILL) })
	stoppedAt := time.Now()
	k.Eventually("a new sentinel to lead and tick", 90*time.Second, func() bool {
		held, pid := lockfile.Held(k.L.LeaderLock("sentinel"))
		if !held || pid == frozen || pid <= 0 {
			return false
		}
		fi, err := os.Stat(k.L.Heartbeat("sentinel"))
		return err == nil && fi.ModTime().After(stoppedAt)
	})
	if proctree.Alive(frozen) {
		t.Errorf("the frozen sentinel (pid %d) is still alive", frozen)
	}
	for _, ev := range k.InternalEvents() {
		if ev.Type == "system.crash_loop" && strings.Contains(string(ev.Data), "sentinel") {
			t.Errorf("the crash-loop guard counted the relaunches as crashes: %s", ev.Data)
		}
	}
	t.Logf("a new sentinel ticked %v after the old one froze", time.Since(stoppedAt).Round(time.Millisecond))
}

// freeze stops every thread of pid in a ptrace stop (PTRACE_SEIZE then
// PTRACE_INTERRUPT) until the test ends: a process that stays hung. SIGSTOP
// would not do: tmux sends SIGCONT to a pane process that stops, and
// SIGTSTP/SIGTTIN are discarded for a pane's orphaned process group. A
// SIGKILL still ends a ptrace-stopped process.
func freeze(t *testing.T, pid int) {
	t.Helper()
	const ptraceSeize, ptraceInterrupt = 0x4206, 0x4207
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		// ptrace requests must come from the tracer thread.
		runtime.LockOSThread()
		seized := map[int]bool{}
		for more := true; more; {
			more = false
			tids, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*")
			for _, p := range tids {
				tid, _ := strconv.Atoi(filepath.Base(p))
				if tid <= 0 || seized[tid] {
					continue
				}
				if _, _, e := syscall.Syscall6(syscall.SYS_PTRACE, ptraceSeize, uintptr(tid), 0, 0, 0, 0); e != 0 {
					errc <- e
					return
				}
				if _, _, e := syscall.Syscall6(syscall.SYS_PTRACE, ptraceInterrupt, uintptr(tid), 0, 0, 0, 0); e != 0 {
					errc <- e
					return
				}
				seized[tid], more = true, true
			}
		}
		errc <- nil
		<-done
		for tid := range seized {
			syscall.PtraceDetach(tid)
		}
	}()
	if err := <-errc; err != nil {
		t.Fatalf("freeze pid %d: %v", pid, err)
	}
	t.Cleanup(func() { close(done) })
}

// evil is the adversarial text of issue #13 item 1.
const evil = "Fix typo <!channel> <https://evil.example|https://github.com/login>"

// Issue #13 items 1 and 2 on the real binaries: a GitHub title reaches
// Slack escaped; an agent that prints its token and kingdom.env leaves no
// secret in Slack, session logs, results or events; and the tmux server's
// environment holds no secret.
func TestKingdom_OutsideTextEscapedAndSecretsRedactedEverywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts the whole kingdom")
	}
	k := newConnectedKingdom(t)
	secrets := []string{"ghp_e2etesttoken0000000000", "jira-e2e-token", "xoxb-e2e-bot", "xapp-e2e-app"}

	k.gh.add(map[string]any{
		"id": "7101", "unread": true, "reason": "review_requested", "updated_at": "2026-11-21T12:00:00Z",
		"subject":    map[string]any{"title": evil, "url": "https://api.github.com/repos/acme/widgets/pulls/43", "type": "PullRequest"},
		"repository": map[string]any{"full_name": "acme/widgets"},
		"url":        "https://api.github.com/notifications/threads/7101",
	})
	var gtask string
	k.Eventually("the thread_start of the GitHub task", 90*time.Second, func() bool {
		for _, st := range []string{layout.Pending, layout.InProgress, layout.Completed} {
			for _, tk := range k.TaskList(st) {
				if strings.HasPrefix(tk.EventID, "evt-github-7101-") {
					gtask = tk.ID
				}
			}
		}
		return gtask != "" && k.Msgs.Exists(layout.Sent, "msg-"+gtask+"-start")
	})

	k.DropInbox("leak", map[string]any{"id": "evt-e2e-leak-1", "type": "test.leak", "payload": map[string]any{"leak": evil}})
	var ltask string
	k.Eventually("the ❌ of the leaking agent", 90*time.Second, func() bool {
		if tk := k.TaskForEvent("evt-e2e-leak-1"); tk != nil {
			ltask = tk.ID
			return k.Msgs.Exists(layout.Sent, "msg-"+ltask+"-failed")
		}
		return false
	})

	var escaped, failedPost bool
	for _, c := range k.slack.Calls("chat.postMessage") {
		text := c.Form.Get("text")
		if strings.Contains(text, "<!channel>") || strings.Contains(text, "<https://evil") {
			t.Errorf("outside text posted unescaped: %q", text)
		}
		escaped = escaped || strings.Contains(text, "&lt;!channel&gt;")
		if strings.Contains(text, "❌") && strings.Contains(text, ltask) {
			failedPost = true
			if !strings.Contains(text, "[REDACTED]") {
				t.Errorf("the ❌ shows no redaction marker: %q", text)
			}
		}
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("secret %q posted to Slack: %q", s, text)
			}
		}
	}
	if !escaped || !failedPost {
		t.Fatalf("escaped title seen: %v, ❌ seen: %v", escaped, failedPost)
	}

	// Every file the kingdom wrote: session logs, results, events, logs.
	var scanned int
	filepath.WalkDir(k.L.Base, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(p, k.L.ConfigDir()) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		scanned++
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				t.Errorf("secret %q written to %s", s, strings.TrimPrefix(p, k.L.Base))
			}
		}
		return nil
	})
	if logs, _ := filepath.Glob(filepath.Join(k.L.SessionLogsDir(), "*")); len(logs) == 0 || scanned < 20 {
		t.Fatalf("session logs %v, %d files scanned: the scan proves nothing", logs, scanned)
	}

	out, err := exec.Command("tmux", "-L", k.Tmux.Socket, "show-environment", "-g").CombinedOutput()
	if err != nil {
		t.Fatalf("show-environment -g: %v: %s", err, out)
	}
	for _, s := range secrets {
		if strings.Contains(string(out), s) {
			t.Errorf("the tmux server's global environment holds %q", s)
		}
	}
}
