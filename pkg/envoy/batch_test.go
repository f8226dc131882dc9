package envoy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
)

// errCrash is what a crash point panics with: the envoy dies there.
var errCrash = errors.New("crash point")

// tickUntilCrash runs one tick that is expected to stop at a crash point.
func tickUntilCrash(t *testing.T, h *harness) {
	t.Helper()
	defer func() {
		if r := recover(); r != errCrash {
			t.Fatalf("tick did not stop at the crash point (recovered %v)", r)
		}
	}()
	_ = h.e.Tick(context.Background())
}

// restart replaces h's envoy with a fresh one on the same tree and the same
// Slack: what a new process finds after the old one was killed.
func restart(t *testing.T, h *harness) {
	t.Helper()
	e, err := New(Options{Layout: h.l, Config: h.e.cfg, Events: h.e.em, Clock: h.clock, Stdout: h.stdout,
		BotToken: "xoxb-test-bot-token",
		Sleep:    func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	h.e = e
}

// threeMessages queues a thread's start and update and another task's start.
func threeMessages(h *harness) []string {
	idl := []string{"msg-" + task + "-start", "msg-" + task + "-update", "msg-task-20261121-002-start"}
	h.put(message(idl[0], "thread_start", task))
	h.put(message(idl[1], "thread_update", task))
	h.put(message(idl[2], "thread_start", "task-20261121-002"))
	return idl
}

// afterRestart checks that every message was posted exactly once, in order
// (the update into the start's thread), is in sent/ with its status and
// Slack coordinates, and that the thread mappings survived.
func afterRestart(t *testing.T, h *harness, idl []string) {
	t.Helper()
	calls := h.fake.Calls("chat.postMessage")
	if len(calls) != len(idl) {
		t.Fatalf("postMessage calls = %d, want %d (each message once)", len(calls), len(idl))
	}
	for i, id := range idl {
		if got := calls[i].Form.Get("text"); !strings.Contains(got, "content of "+id) {
			t.Errorf("post %d = %q, want %s", i, got, id)
		}
	}
	if calls[1].Form.Get("thread_ts") == "" {
		t.Errorf("the update was not posted into its thread")
	}
	for _, id := range idl {
		if s := h.msgState(id); s != layout.Sent {
			t.Fatalf("%s in %q, want sent", id, s)
		}
		b, err := os.ReadFile(h.e.messages.Path(layout.Sent, id))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Status string `json:"status"`
			Slack  struct {
				Channel, TS string
			} `json:"slack"`
		}
		if err := json.Unmarshal(b, &doc); err != nil || doc.Status != layout.Sent || doc.Slack.TS == "" {
			t.Errorf("sent file of %s: %v %s", id, err, b)
		}
	}
	h.checkpoint()
	b, err := os.ReadFile(h.l.EnvoyThreadMappings())
	if err != nil {
		t.Fatal(err)
	}
	var mappings map[string]ThreadMapping
	if err := json.Unmarshal(b, &mappings); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{task, "task-20261121-002"} {
		if mappings[k].ThreadTS == "" {
			t.Errorf("mapping of %s lost: %s", k, b)
		}
	}
}

// A kill after a tick's posts, with their records appended but not yet
// synced and no file moved: the restarted envoy finds every record and
// finishes the messages without posting any again.
func TestBatch_CrashAfterThePostsBeforeTheFilesMove(t *testing.T) {
	h := newHarness(t, setup{})
	idl := threeMessages(h)
	afterPosts = func() { panic(errCrash) }
	t.Cleanup(func() { afterPosts = nil })
	tickUntilCrash(t, h)
	afterPosts = nil
	if n := len(h.fake.Calls("chat.postMessage")); n != 3 {
		t.Fatalf("posts before the crash = %d, want 3", n)
	}
	for _, id := range idl {
		if s := h.msgState(id); s != layout.Pending {
			t.Fatalf("%s in %q before the batch, want pending", id, s)
		}
	}
	restart(t, h)
	h.tick()
	afterRestart(t, h, idl)
}

// A kill inside the batch, after the first status rewrite: one file in
// pending/ already says sent. The restarted envoy posts nothing again.
func TestBatch_CrashInsideTheStatusRewrites(t *testing.T) {
	for _, swap := range []bool{true, false} {
		name := "spare swap"
		if !swap {
			name = "group commit"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, setup{})
			h.e.sparesOpened = !swap // true: no pool, new files
			idl := threeMessages(h)
			afterRename = func(i int) {
				if i == 0 {
					panic(errCrash)
				}
			}
			t.Cleanup(func() { afterRename = nil })
			tickUntilCrash(t, h)
			afterRename = nil
			if swap != (h.e.spares != nil) {
				t.Fatalf("pool in use %v, want %v", h.e.spares != nil, swap)
			}
			b, err := os.ReadFile(h.e.messages.Path(layout.Pending, idl[0]))
			if err != nil || !strings.Contains(string(b), `"status": "sent"`) {
				t.Fatalf("first file not rewritten in pending/ at the crash: %v %s", err, b)
			}
			restart(t, h)
			h.tick()
			afterRestart(t, h, idl)
		})
	}
}

// The spares are reused: a second batch allocates no new file, and each
// spare holds an old version of a message, never a queue file's only copy.
// The envoy's old inodes need no rest: the second tick comes at once.
func TestBatch_SparesAreReused(t *testing.T) {
	h := newHarness(t, setup{console: true})
	h.put(message("msg-20261121-001", "report", ""))
	h.put(message("msg-20261121-002", "report", ""))
	h.tick()
	first := spareInodes(t, h)
	if len(first) != 2 {
		t.Fatalf("spares after the first batch = %d, want 2", len(first))
	}
	for ino, pending := range first {
		if !pending {
			t.Errorf("spare %d holds no old pending version of a message", ino)
		}
	}
	h.put(message("msg-20261121-003", "report", ""))
	h.put(message("msg-20261121-004", "report", ""))
	h.tick()
	second := spareInodes(t, h)
	if len(second) != 2 {
		t.Fatalf("spares after the second batch = %d, want 2", len(second))
	}
	for _, id := range []string{"msg-20261121-001", "msg-20261121-002", "msg-20261121-003", "msg-20261121-004"} {
		if s := h.msgState(id); s != layout.Sent {
			t.Errorf("%s in %q", id, s)
		}
		fi, err := os.Stat(h.e.messages.Path(layout.Sent, id))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", id, fi.Mode().Perm())
		}
	}
	// The first batch's spares became the second batch's sent files.
	for ino := range first {
		if second[ino] {
			t.Errorf("inode %d still a spare: the second batch did not use it", ino)
		}
	}
}

// spareInodes maps each inode of the pool to whether it holds an old
// version of a message (status pending) with no other name.
func spareInodes(t *testing.T, h *harness) map[uint64]bool {
	t.Helper()
	ents, err := os.ReadDir(sparesDir(h.l))
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]bool{}
	for _, de := range ents {
		fi, err := de.Info()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(sparesDir(h.l), de.Name()))
		st := fi.Sys().(*syscall.Stat_t)
		out[st.Ino] = st.Nlink == 1 && strings.Contains(string(b), `"status": "pending"`)
	}
	return out
}

// Spares on another filesystem than the queue (state/envoy mounted apart)
// cannot be swapped in: the rewrite falls back to a group commit.
func TestBatch_SparesOnAnotherFilesystemFallBack(t *testing.T) {
	h := newHarness(t, setup{console: true})
	h.e.spareDir = smallDisk(t)
	h.put(message("msg-20261121-001", "report", ""))
	h.tick()
	if h.e.spares != nil {
		t.Errorf("a pool across filesystems was used")
	}
	b, err := os.ReadFile(h.e.messages.Path(layout.Sent, "msg-20261121-001"))
	if err != nil || !strings.Contains(string(b), `"status": "sent"`) {
		t.Fatalf("message not finished by the fallback: %v %s", err, b)
	}
	h.put(message("msg-20261121-002", "report", ""))
	h.tick()
	if s := h.msgState("msg-20261121-002"); s != layout.Sent {
		t.Errorf("second message in %q", s)
	}
}

// Console mode holds the log open for a tick's posts under the rotation
// lock, and lets go of both when the tick ends (a rotation waits for the
// tick, never longer).
func TestConsole_TickReleasesTheRotationLock(t *testing.T) {
	h := newHarness(t, setup{console: true})
	h.put(message("msg-20261121-001", "report", ""))
	h.put(message("msg-20261121-002", "report", ""))
	h.tick()
	lf, err := lockfile.Open(h.l.RotateLock())
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if ok, err := lf.TryLock(); err != nil || !ok {
		t.Fatalf("rotation lock still held after the tick: %v %v", ok, err)
	}
	lf.Unlock()
	b, err := os.ReadFile(h.l.EnvoyConsoleLog())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"msg-20261121-001", "msg-20261121-002"} {
		if !strings.Contains(string(b), "content of "+id) {
			t.Errorf("console log lacks %s:\n%s", id, b)
		}
	}
}

// A tick with more than batchMax messages finishes them batch by batch:
// each batch's messages reach sent/ before the next batch is posted.
func TestBatch_LongTickFinishesAsItGoes(t *testing.T) {
	h := newHarness(t, setup{console: true})
	n := 2*batchMax + 22
	for i := range n {
		h.put(message(fmt.Sprintf("msg-20261121-%04d", i), "report", ""))
	}
	var sentAtFinish []int
	afterPosts = func() {
		ents, _ := os.ReadDir(h.e.messages.Dir(layout.Sent))
		sentAtFinish = append(sentAtFinish, len(ents))
	}
	t.Cleanup(func() { afterPosts = nil })
	h.tick()
	if want := []int{0, batchMax, 2 * batchMax}; fmt.Sprint(sentAtFinish) != fmt.Sprint(want) {
		t.Errorf("messages in sent/ when each batch finished = %v, want %v", sentAtFinish, want)
	}
	for i := range n {
		if s := h.msgState(fmt.Sprintf("msg-20261121-%04d", i)); s != layout.Sent {
			t.Fatalf("message %d in %q", i, s)
		}
	}
}

// A spare with another name (a hard link planted in spares/) is dropped,
// never written through.
func TestBatch_HardLinkedSpareIsNotWrittenThrough(t *testing.T) {
	h := newHarness(t, setup{console: true})
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep me"), 0o600)
	os.MkdirAll(sparesDir(h.l), 0o700)
	if err := os.Link(victim, filepath.Join(sparesDir(h.l), "spare-planted")); err != nil {
		t.Skipf("hard link: %v", err)
	}
	h.put(message("msg-20261121-001", "report", ""))
	h.tick()
	if b, _ := os.ReadFile(victim); string(b) != "keep me" {
		t.Errorf("linked file written through: %q", b)
	}
	if s := h.msgState("msg-20261121-001"); s != layout.Sent {
		t.Errorf("message in %q", s)
	}
}
