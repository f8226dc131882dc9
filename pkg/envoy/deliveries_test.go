package envoy

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// An envoy that died after recording a delivery and moving its message to
// sent/, but before the end-of-tick write of the documents, loses
// nothing: the next envoy replays the record and the thread mapping is
// there; the message is not posted again.
func TestRecords_ReplayAfterACrashBeforeTheDocumentsWereWritten(t *testing.T) {
	h := newHarness(t, setup{console: true})
	id := "msg-task-20261121-001-start"
	h.put(message(id, "thread_start", "task-20261121-001"))
	// A tick's work without its final flush: what a kill at that instant
	// leaves on disk.
	if err := h.e.sendPending(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := h.msgState(id); s != layout.Sent {
		t.Fatalf("message in %q, want sent", s)
	}
	if b, err := os.ReadFile(h.l.EnvoyThreadMappings()); err == nil && len(b) > 3 {
		t.Fatalf("mappings written before the flush: %s", b)
	}
	if r := h.records()[id]; r.State != recRecorded {
		t.Fatalf("record of the sent message = %+v, want recorded", r)
	}
	posted := h.stdout.Len()

	restart(t, h) // the same tree, a fresh process
	h.tick()
	b, err := os.ReadFile(h.l.EnvoyThreadMappings())
	if err != nil {
		t.Fatal(err)
	}
	var mappings map[string]ThreadMapping
	if err := json.Unmarshal(b, &mappings); err != nil {
		t.Fatal(err)
	}
	if _, ok := mappings["task-20261121-001"]; !ok {
		t.Errorf("thread mapping lost across the crash: %s", b)
	}
	if h.stdout.Len() != posted {
		t.Errorf("message posted again after the restart: %q", h.stdout.String()[posted:])
	}
	if recs := h.records(); len(recs) != 0 {
		t.Errorf("records left after the documents were written: %v", recs)
	}
}

// crashAfterPost is a poster whose process dies right after a post left:
// before its delivery could be recorded.
type crashAfterPost struct{ poster }

func (c crashAfterPost) Post(ctx context.Context, p post) (string, string, error) {
	c.poster.Post(ctx, p)
	panic(errCrash)
}

// A kill between a post and its record, in file mode too: the restarted
// envoy finds the post (in Slack, or in the console log) and finishes the
// message with its ts, without posting it again; the update goes into the
// thread the start opened.
func TestRecords_PostInDoubtIsFoundNotPostedAgain(t *testing.T) {
	for _, console := range []bool{true, false} {
		t.Run(map[bool]string{true: "console", false: "slack"}[console], func(t *testing.T) {
			h := newHarness(t, setup{console: console})
			// The fake Slack's ts count up from this time: a look-up since a
			// record's started_at must see them, as real ts are real times.
			h.clock.Set(time.Unix(1700000000, 0))
			start, update := "msg-"+task+"-start", "msg-"+task+"-update"
			h.put(message(start, "thread_start", task))
			h.put(message(update, "thread_update", task))
			h.e.poster = crashAfterPost{h.e.poster}
			tickUntilCrash(t, h)
			if r := h.records()[start]; r.State != recPosting || r.Host != testHost {
				t.Fatalf("record at the crash = %+v, want this host's posting record", r)
			}
			restart(t, h)
			h.tick()
			var posts []string
			if console {
				b, _ := os.ReadFile(h.l.EnvoyConsoleLog())
				for _, line := range strings.Split(string(b), "\n") {
					if strings.HasPrefix(line, "[") {
						posts = append(posts, line)
					}
				}
			} else {
				for _, c := range h.fake.Calls("chat.postMessage") {
					posts = append(posts, c.Form.Get("text")+" thread "+c.Form.Get("thread_ts"))
				}
			}
			if len(posts) != 2 {
				t.Fatalf("posts = %q, want the start and the update once each", posts)
			}
			var doc struct{ Slack struct{ TS string } }
			b, err := h.e.messages.Read(layout.Sent, start)
			if err != nil || json.Unmarshal(b, &doc) != nil || doc.Slack.TS == "" {
				t.Fatalf("start not finished with its ts: %v %s", err, b)
			}
			if !strings.Contains(posts[1], "thread "+doc.Slack.TS) {
				t.Errorf("update %q not posted into the start's thread %s", posts[1], doc.Slack.TS)
			}
			if s := h.msgState(update); s != layout.Sent {
				t.Errorf("update in %q, want sent", s)
			}
			if recs := h.records(); len(recs) != 0 {
				t.Errorf("records left: %v", recs)
			}
		})
	}
}

// A kill between a message's record and its post: nothing left, so the
// restarted envoy finds nothing and posts it, once.
func TestRecords_CrashBeforeThePostPostsOnce(t *testing.T) {
	h := newHarness(t, setup{console: true})
	id := "msg-20261121-001"
	h.put(message(id, "report", ""))
	crashAt(h, "begun", 0)
	tickUntilCrash(t, h)
	restart(t, h)
	h.tick()
	if n := strings.Count(h.stdout.String(), "content of "+id); n != 1 {
		t.Errorf("posted %d times, want once:\n%s", n, h.stdout)
	}
	if s := h.msgState(id); s != layout.Sent {
		t.Errorf("in %q, want sent", s)
	}
}
