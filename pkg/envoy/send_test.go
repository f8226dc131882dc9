package envoy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
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
	bot := "xoxb-test-bot-token"
	if h.e.Console() {
		bot = ""
	}
	e, err := New(Options{Layout: h.l, Store: openStore(t, h.l), Host: testHost, Config: h.e.config(), Events: h.e.em,
		Clock: h.clock, Stdout: h.stdout, BotToken: bot,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
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

// crashAt makes h's envoy die (panic errCrash) at the n-th time (from 0) a
// send reaches step.
func crashAt(h *harness, step string, n int) {
	seen := 0
	h.e.afterStep = func(s, _ string) {
		if s != step {
			return
		}
		if seen == n {
			panic(errCrash)
		}
		seen++
	}
}

// A kill at any step of any message's send, after the post: the restarted
// envoy posts nothing twice, loses nothing, and every message ends in sent/
// with its status, each update in its thread.
func TestSend_CrashAfterAPostLosesNothingAndPostsNothingTwice(t *testing.T) {
	for _, step := range []string{"recorded", "finished"} {
		for n := range 3 {
			t.Run(fmt.Sprintf("%s-%d", step, n), func(t *testing.T) {
				h := newHarness(t, setup{})
				idl := threeMessages(h)
				crashAt(h, step, n)
				tickUntilCrash(t, h)
				if got := len(h.fake.Calls("chat.postMessage")); got != n+1 {
					t.Fatalf("posts before the crash = %d, want %d", got, n+1)
				}
				if s := h.msgState(idl[n]); step == "recorded" && s != layout.Pending {
					t.Fatalf("%s in %q at the crash, want pending", idl[n], s)
				}
				restart(t, h)
				h.tick()
				afterRestart(t, h, idl)
				if _, err := os.Stat(h.e.messages.Path(layout.Pending, idl[n])); !os.IsNotExist(err) {
					t.Errorf("pending copy of %s left: %v", idl[n], err)
				}
			})
		}
	}
}

// Each message's record is durable before its file leaves pending/: at
// the moment the file is finished, the store holds its "recorded" record;
// at the end of the tick the documents hold it and no record is left.
func TestSend_RecordIsInTheStoreBeforeTheFileMoves(t *testing.T) {
	h := newHarness(t, setup{console: true})
	h.put(message("msg-20261121-001", "report", ""))
	h.put(message("msg-20261121-002", "report", ""))
	var recordedAt []string
	h.e.afterStep = func(step, id string) {
		if step != "finished" {
			return
		}
		if r, ok := h.records()[id]; ok && r.State == recRecorded && r.TS != "" {
			recordedAt = append(recordedAt, id)
		}
	}
	h.tick()
	if fmt.Sprint(recordedAt) != "[msg-20261121-001 msg-20261121-002]" {
		t.Errorf("messages recorded when finished = %v", recordedAt)
	}
	if recs := h.records(); len(recs) != 0 {
		t.Errorf("delivery records left at the end of the tick: %v", recs)
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
