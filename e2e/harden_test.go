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

	"github.com/kingdom-dev/kingdom/internal/testkit/slackfake"
	"github.com/kingdom-dev/kingdom/pkg/doc"
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

	k.DropInbox("leak", map[string]any{"id": "evt-e2e-leak-1", "type": "test.leak", "priority": "high", "payload": map[string]any{"leak": evil}})
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

// Issue #13 item 5 on the real binaries: sessions.json truncated while a
// soldier works. The registry is rebuilt from what is true (the task's
// soldier-id), so the chamberlain does not kill the live soldier as an
// orphan, and the task finishes on its first attempt.
func TestKingdom_TruncatedRegistryKillsNoLiveSoldier(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts the whole kingdom")
	}
	k := NewKingdom(t, map[string]string{
		"config/system.yaml":   "runtime:\n  engine: claude\n  claude:\n    command: " + filepath.Join(binDir, "fakeclaude") + "\n    args: []\nwatchdog:\n  interval_seconds: 1\n",
		"config/sentinel.yaml": "polling:\n  inbox:\n    interval_seconds: 1\n",
		// Orphan grace 0: an unregistered soldier session is killed at once.
		// A loaded test machine must not hold admission (health red).
		"config/chamberlain.yaml": "monitoring:\n  interval_seconds: 1\nsessions:\n  orphan_grace_minutes: 0\n" +
			"thresholds:\n  cpu_yellow: 100\n  cpu_orange: 100\n  cpu_red: 100\n  memory_yellow: 95\n  memory_orange: 98\n  memory_red: 99\n",
		"config/generals/gen-dev.yaml": "name: gen-dev\ndescription: test work\ntimeout_seconds: 300\nmax_concurrent: 2\nsubscribes: [\"test.*\"]\n",
	})
	k.Start()
	k.WaitRoles("sentinel", "king", "chamberlain", "gen-dev")
	k.DropInbox("hold", map[string]any{"id": "evt-e2e-hold-1", "type": "test.hold", "priority": "high", "payload": map[string]any{"hold_file": "release-hold"}})
	var task, soldier string
	k.Eventually("the soldier to run and be registered", 60*time.Second, func() bool {
		tk := k.TaskForEvent("evt-e2e-hold-1")
		if tk == nil {
			return false
		}
		task = tk.ID
		b, err := os.ReadFile(k.L.ResultSoldierID(task))
		soldier = strings.TrimSpace(string(b))
		reg, _ := os.ReadFile(k.L.SessionsJSON())
		return err == nil && soldier != "" && strings.Contains(string(reg), soldier)
	})
	reg, _ := os.ReadFile(k.L.SessionsJSON())
	if err := os.WriteFile(k.L.SessionsJSON(), reg[:len(reg)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	// Several chamberlain ticks (1 s each) see the truncated registry.
	time.Sleep(4 * time.Second)
	if ok, err := k.Tmux.Has(t.Context(), soldier); err != nil || !ok {
		t.Fatalf("soldier %s killed after the registry was truncated (has=%v, %v)", soldier, ok, err)
	}
	os.WriteFile(filepath.Join(k.L.Base, "release-hold"), nil, 0o600)
	k.Eventually("the task to finish", 60*time.Second, func() bool { return k.Result(task) != nil })
	if r := k.Result(task); r == nil || r.Status != "success" || r.RetryCount != 0 {
		t.Fatalf("result %+v, want success on the first attempt", r)
	}
	for _, ev := range k.InternalEvents() {
		if ev.Type == "recovery.session_killed" || ev.Type == "soldier.killed" {
			t.Errorf("%s: %s", ev.Type, ev.Data)
		}
	}
}

// Issue #13 item 4 on the real binaries: the directory where the envoy
// records its deliveries (the files store's kv namespace deliveries) sits
// on a 2 MiB tmpfs that fills up. The envoy posts nothing it cannot record
// (before: the same message every tick), alerts once, and posts the message
// exactly once when space comes back.
func TestKingdom_EnvoyOnAFullDiskPostsNothingItCannotRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts the whole kingdom")
	}
	slack := slackfake.New()
	t.Cleanup(slack.Close)
	k := NewKingdom(t, map[string]string{
		"config/system.yaml":   "watchdog:\n  interval_seconds: 1\n",
		"config/sentinel.yaml": "polling:\n  inbox:\n    interval_seconds: 1\n",
		"config/envoy.yaml":    "slack:\n  api_url: " + slack.APIURL() + "\n  default_channel: C0KINGDOM\n  allowed_users: [UHUMAN]\nintervals:\n  outbound_seconds: 1\n",
		"config/kingdom.env":   "SLACK_BOT_TOKEN=xoxb-e2e-bot\nSLACK_APP_TOKEN=xapp-e2e-app\n",
	})
	envoyState := filepath.Join(k.L.StateDir(), "store", "kv", "deliveries")
	os.MkdirAll(envoyState, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", envoyState).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", envoyState).Run() })
	k.Start()
	k.WaitRoles("envoy")
	if err := slack.WaitConnected(30 * time.Second); err != nil {
		t.Fatalf("envoy never connected: %v", err)
	}
	// Fill the envoy's filesystem (a dot-file: no delivery record).
	filler := filepath.Join(envoyState, ".filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			break
		}
	}
	f.Close()
	before := len(slack.Calls("chat.postMessage"))
	id := "msg-e2e-disk-1"
	m := doc.Message{ID: id, Type: doc.MessageNotification, Urgency: doc.UrgencyNormal, Content: "hello from a full disk",
		Context: map[string]any{}, CreatedAt: doc.FormatTime(time.Now()), Status: doc.MessagePending}
	if err := k.Msgs.PutOnce(layout.Pending, id, m); err != nil {
		t.Fatal(err)
	}
	k.Eventually("the one alert", 30*time.Second, func() bool { return len(slack.Calls("chat.postMessage")) > before })
	// Five outbound intervals: before the fix, five posts of the message.
	time.Sleep(5 * time.Second)
	var alerts, posts int
	for _, c := range slack.Calls("chat.postMessage")[before:] {
		switch text := c.Form.Get("text"); {
		case strings.Contains(text, "outbound messages are held"):
			alerts++
		case strings.Contains(text, "hello from a full disk"):
			posts++
		}
	}
	if alerts != 1 || posts != 0 {
		t.Fatalf("on a full disk: %d alerts and %d posts of the message, want 1 and 0", alerts, posts)
	}
	os.Remove(filler)
	k.Eventually("the message sent", 30*time.Second, func() bool { return k.Msgs.Exists(layout.Sent, id) })
	time.Sleep(2 * time.Second) // two more intervals: nothing is posted again
	posts = 0
	for _, c := range slack.Calls("chat.postMessage")[before:] {
		if strings.Contains(c.Form.Get("text"), "hello from a full disk") {
			posts++
		}
	}
	if posts != 1 {
		t.Fatalf("the message was posted %d times, want once", posts)
	}
}
