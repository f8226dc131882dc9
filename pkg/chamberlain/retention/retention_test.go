package retention

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
)

func newLayout(t *testing.T) layout.Layout {
	t.Helper()
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	return l
}

// tasksOf is the task queue of l's files store.
func tasksOf(t testing.TB, l layout.Layout) *queue.Queue {
	t.Helper()
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return queue.OnStore(st, l, layout.QTasks, nil, "test-host")
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func setMtime(t testing.TB, path string, at time.Time) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		writeFile(t, path, "")
	}
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func TestCleanup_RemovesExpiredFilesOnly(t *testing.T) {
	now := time.Date(2026, 11, 21, 3, 30, 0, 0, time.Local)
	l := newLayout(t)
	old, recent := now.Add(-8*24*time.Hour), now.Add(-time.Hour)
	expired := []string{
		filepath.Join(l.LogsDir(), "system.log.old"),
		l.SessionLog("soldier-1-a"), l.SessionErr("soldier-1-a"),
		l.DailyReport("20261110"),
		l.ResultFinal("task-20261110-001"), l.ResultSoldierID("task-20261110-001"),
		l.Prompt("task-20261117-001"), // prompts: 3 days
		filepath.Join(l.QueueState(layout.QEvents, layout.Completed), "evt-x.json"),
		filepath.Join(l.QueueState(layout.QTasks, layout.Completed), "task-20261110-002.json"),
		filepath.Join(l.QueueState(layout.QMessages, layout.Sent), "msg-1.json"),
		filepath.Join(l.QueueState(layout.QMessages, layout.Failed), "msg-2.json"),
		filepath.Join(l.QueueState(layout.QEvents, layout.Rejected), "bad.json"),
		filepath.Join(l.QueueState(layout.QEvents, layout.Rejected), "bad.json.reason"),
		filepath.Join(l.InboxRejected(), "x.json"),
		l.PetitionResult("evt-slack-msg-1"),
	}
	kept := []string{
		l.SystemLog(), l.EventsLog(), // live logs are never aged out
		filepath.Join(l.LogsDir(), "tasks.log.old"), // recent
		l.ResultFinal("task-20261120-001"),
		filepath.Join(l.QueueState(layout.QTasks, layout.Pending), "task-20261110-003.json"), // active queues untouched
		filepath.Join(l.QueueState(layout.QTasks, layout.InProgress), "task-20261110-004.json"),
	}
	// The active tasks are whole documents (the store rejects an empty
	// file as poison).
	for _, id := range []string{"task-20261110-003", "task-20261110-004"} {
		st := layout.Pending
		if id == "task-20261110-004" {
			st = layout.InProgress
		}
		writeFile(t, filepath.Join(l.QueueState(layout.QTasks, st), id+".json"), `{"id":"`+id+`","priority":"normal","created_at":"2026-11-10T10:00:00Z"}`)
	}
	seenOld, seenKept := filepath.Join(l.SeenDir(), "evt-a"), filepath.Join(l.SeenDir(), "evt-b")
	for _, p := range expired {
		setMtime(t, p, old)
	}
	setMtime(t, seenOld, now.Add(-31*24*time.Hour))
	setMtime(t, seenKept, old) // seen markers: 30 days
	for _, p := range kept {
		setMtime(t, p, old)
	}
	setMtime(t, filepath.Join(l.LogsDir(), "tasks.log.old"), recent)
	setMtime(t, l.ResultFinal("task-20261120-001"), recent)
	// task dirs: the expired one goes, the one of an in-progress task stays.
	oldDir := l.TaskDir("gen-pr", "task-20261110-009")
	liveDir := l.TaskDir("gen-pr", "task-20261110-004")
	for _, d := range []string{oldDir, liveDir} {
		writeFile(t, filepath.Join(d, "repo", "f.txt"), "x")
		os.Chtimes(d, old, old)
	}
	r := New(l, tasksOf(t, l), config.DefaultChamberlain().Retention, nil)
	n, err := r.Clean(now)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(expired, seenOld, oldDir) {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s survived", p)
		}
	}
	for _, p := range append(kept, seenKept, liveDir) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	if want := len(expired) + 2; n != want { // + the old seen marker and task dir
		t.Fatalf("Clean removed %d, want %d", n, want)
	}
}

// SPEC §10.5: a task dir that retention removes takes the engines' stored
// sessions with it (a question never answered, a conversation gone quiet):
// claude's project directory of the task's cwd, codex's rollout of its
// thread. Another task's sessions stay.
func TestCleanup_TaskDirTakesItsEngineSessionsAlong(t *testing.T) {
	now := time.Date(2026, 11, 24, 3, 30, 0, 0, time.Local)
	l := newLayout(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Setenv("CODEX_HOME", "")
	old := now.Add(-30 * 24 * time.Hour)
	const task, other = "task-20261020-001", "task-20261120-002"
	const sess, otherSess = "0b7f3c1e-2a4d-4c6b-9e8f-1a2b3c4d5e6f", "9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
	taskDir, otherDir := l.TaskDir("gen-herald", task), l.TaskDir("gen-herald", other)
	writeFile(t, filepath.Join(taskDir, "repo", "f.txt"), "x")
	writeFile(t, filepath.Join(otherDir, "repo", "f.txt"), "x")
	os.Chtimes(taskDir, old, old)
	writeFile(t, l.ResultFinal(task), `{"session_id":"`+sess+`"}`)
	claudeProj := engine.ClaudeProjectDir(filepath.Join(home, ".claude"), filepath.Join(taskDir, "repo"))
	otherProj := engine.ClaudeProjectDir(filepath.Join(home, ".claude"), filepath.Join(otherDir, "repo"))
	writeFile(t, filepath.Join(claudeProj, sess+".jsonl"), "{}\n")
	writeFile(t, filepath.Join(otherProj, otherSess+".jsonl"), "{}\n")
	rollout := filepath.Join(home, ".codex", "sessions", "2026", "10", "20", "rollout-2026-10-20T10-00-00-"+sess+".jsonl")
	otherRollout := filepath.Join(home, ".codex", "sessions", "2026", "11", "20", "rollout-2026-11-20T10-00-00-"+otherSess+".jsonl")
	writeFile(t, rollout, "{}\n")
	writeFile(t, otherRollout, "{}\n")

	r := New(l, tasksOf(t, l), config.DefaultChamberlain().Retention, nil)
	if _, err := r.Clean(now); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{taskDir, claudeProj, rollout} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s survived the task dir's retention", p)
		}
	}
	for _, p := range []string{otherDir, filepath.Join(otherProj, otherSess+".jsonl"), otherRollout} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed with another task: %v", p, err)
		}
	}
}

// A task dir that a pending or running resume borrows (a question's, or a
// resume waiting out a week-long usage limit) outlives task_dirs_days: the
// resume runs in it. Once no resume holds it, it ages out as any other.
func TestCleanup_KeepsATaskDirABorrowingResumeNeeds(t *testing.T) {
	now := time.Date(2026, 11, 21, 3, 30, 0, 0, time.Local)
	l := newLayout(t)
	old := now.Add(-8 * 24 * time.Hour)
	borrowed := l.TaskDir("gen-pr", "task-20261110-001")
	writeFile(t, filepath.Join(borrowed, "repo", "f.txt"), "x")
	os.Chtimes(borrowed, old, old)
	resume := doc.Task{ID: "task-20261120-002", EventID: "evt-r", TargetGeneral: "gen-pr", Type: doc.TaskTypeResume,
		Priority: "normal", CreatedAt: doc.FormatTime(old), Status: doc.TaskPending, SessionID: "s-1",
		OriginalTaskID: "task-20261110-001", Workdir: filepath.Join(borrowed, "repo"), NotBefore: doc.FormatTime(now.Add(5 * 24 * time.Hour))}
	b, _ := json.Marshal(resume)
	pending := filepath.Join(l.QueueState(layout.QTasks, layout.Pending), resume.ID+".json")
	writeFile(t, pending, string(b))
	r := New(l, tasksOf(t, l), config.DefaultChamberlain().Retention, nil)
	if _, err := r.Clean(now); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(borrowed); err != nil {
		t.Fatalf("the task dir a pending resume borrows was removed: %v", err)
	}
	// The resume finished: the dir ages out.
	if err := os.Rename(pending, filepath.Join(l.QueueState(layout.QTasks, layout.Completed), resume.ID+".json")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Clean(now); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(borrowed); err == nil {
		t.Fatal("the task dir survived once no resume borrowed it")
	}
}

// Base clones unused for retention.clone_days are
// removed by the daily cleanup; a recently used one, one with a live
// worktree and one a general holds locked are kept.
func TestCleanup_RemovesBaseClonesUnusedForCloneDays(t *testing.T) {
	now := time.Date(2026, 11, 21, 3, 30, 0, 0, time.Local)
	l := newLayout(t)
	old := now.Add(-15 * 24 * time.Hour) // clone_days: 14
	clone := func(name string, used time.Time) string {
		c := l.RepoClone("gen-pr", name)
		writeFile(t, filepath.Join(c, ".git", "HEAD"), "ref: refs/heads/main\n")
		writeFile(t, filepath.Join(c, ".git", "objects", "pack", "p.pack"), "x")
		setMtime(t, layout.CloneUsedMarker(c), used)
		for _, d := range []string{filepath.Join(c, ".git", "objects", "pack"), filepath.Join(c, ".git", "objects"), filepath.Join(c, ".git"), c} {
			os.Chtimes(d, old, old)
		}
		return c
	}
	unused := clone("acme/old", old)
	fresh := clone("acme/fresh", now.Add(-24*time.Hour))
	busy := clone("acme/busy", old)
	live := l.TaskDir("gen-pr", "task-20261121-001")
	writeFile(t, filepath.Join(live, "repo", ".git"), "gitdir: x\n")
	writeFile(t, filepath.Join(busy, ".git", "worktrees", "repo", "gitdir"), filepath.Join(live, "repo", ".git")+"\n")
	os.Chtimes(busy, old, old)
	locked := clone("acme/locked", old)
	lf, err := lockfile.Open(layout.CloneLock(locked))
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := lf.Lock(); err != nil {
		t.Fatal(err)
	}

	r := New(l, tasksOf(t, l), config.DefaultChamberlain().Retention, nil)
	if _, err := r.Clean(now); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(unused); err == nil {
		t.Error("a clone unused for 15 days is still on disk")
	}
	for _, c := range []string{fresh, busy, locked} {
		if _, err := os.Stat(filepath.Join(c, ".git", "HEAD")); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(c), err)
		}
	}
}

func TestSweepTemps_RemovesDeadTempsInEveryStateDir(t *testing.T) {
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old := now.Add(-2 * TempMaxAge)
	var dead []string
	for _, dir := range []string{l.InboxRejected(), l.RoleStateDir("gen-x"), l.RoleStateDir("host-h1"), l.MemoryGeneral("gen-x")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, ".tmp-gen_x-1-abc")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		dead = append(dead, p)
	}
	fresh := filepath.Join(l.RoleStateDir("gen-x"), ".tmp-gen_x-2-def")
	if err := os.WriteFile(fresh, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := SweepTemps(l, now); n != len(dead) {
		t.Errorf("swept %d temps, want %d", n, len(dead))
	}
	for _, p := range dead {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s: an old temp was kept (%v)", p, err)
		}
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh temp (its writer may be alive) was removed: %v", err)
	}
}
