package envoy

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/slackfake"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// posted returns the fake's message whose text contains s.
func (h *harness) posted(s string) slackfake.Posted {
	h.t.Helper()
	for _, p := range h.fake.Messages() {
		if strings.Contains(p.Text, s) {
			return p
		}
	}
	h.t.Fatalf("no posted message contains %q", s)
	return slackfake.Posted{}
}

// click pushes a button click over Socket Mode and waits for its ack.
func (h *harness) click(user string, p slackfake.Posted, action string) string {
	h.t.Helper()
	v := p.Buttons()[action]
	if v == "" {
		h.t.Fatalf("message %s has no %s button: %v", p.TS, action, p.Buttons())
	}
	env, trig, err := h.fake.Click(slackfake.Click{User: user, Channel: p.Channel, MessageTS: p.TS, ThreadTS: p.ThreadTS, ActionID: action, Value: v})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.fake.WaitAck(env, 60*time.Second); err != nil {
		h.t.Fatal(err)
	}
	return trig
}

// waitUntil polls cond (the socket goroutine works after the ack).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) ephemerals(user string) []slackfake.Ephemeral {
	var out []slackfake.Ephemeral
	for _, e := range h.fake.Ephemerals() {
		if e.User == user {
			out = append(out, e)
		}
	}
	return out
}

func (h *harness) button(id string) buttonRecord {
	h.t.Helper()
	r, err := h.e.loadButton(h.t.Context(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// putTask writes a task document (the good schema example, renamed).
func (h *harness) putTask(state, id string, retry int) {
	h.t.Helper()
	b, err := os.ReadFile("../schema/testdata/good/task.json")
	if err != nil {
		h.t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		h.t.Fatal(err)
	}
	doc["id"], doc["retry_count"] = id, retry
	if err := h.e.tasks.Put(state, id, doc); err != nil {
		h.t.Fatal(err)
	}
}

// requests returns the queued control requests.
func (h *harness) requests() []control.Request {
	h.t.Helper()
	qs, err := control.Requests(h.t.Context(), kv.OnStore(h.e.st.st))
	if err != nil {
		h.t.Fatal(err)
	}
	var out []control.Request
	for _, q := range qs {
		var r control.Request
		if err := json.Unmarshal(q.Data, &r); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// A question's Answer: a stranger is refused and opens nothing; the
// asker's click opens a modal whose submission is the thread reply (same
// event, reply_context); the message says who answered; a second click is
// refused.
func TestButtons_AnswerOpensModalAndResumes(t *testing.T) {
	h := newHarness(t, setup{})
	h.startSocket()
	h.put(message("msg-"+task+"-start", "thread_start", task))
	q := message("msg-"+task+"-question", "human_input_request", task)
	q["reply_context"] = replyContext(task)
	h.put(q)
	h.tick()
	qm := h.posted("content of msg-" + task + "-question")
	if b := qm.Buttons(); b[ActionAnswer] == "" || b[ActionCancel] == "" {
		t.Fatalf("question buttons = %v", b)
	}
	rec := h.button(qm.Buttons()[ActionAnswer])
	if rec.TaskID != task || rec.State != btnOpen || rec.TS != qm.TS || rec.ExpiresAt != doc.FormatTime(t0.Add(24*time.Hour)) {
		t.Errorf("record = %+v", rec)
	}

	h.click("USTRANGER", qm, ActionAnswer)
	waitUntil(t, "the stranger's refusal", func() bool { return len(h.ephemerals("USTRANGER")) == 1 })
	if len(h.fake.Views()) != 0 {
		t.Fatalf("a stranger's click opened a modal")
	}

	trig := h.click("UALICE", qm, ActionAnswer)
	waitUntil(t, "the modal", func() bool { return len(h.fake.Views()) == 1 })
	v := h.fake.Views()[0]
	if v["trigger_id"] != trig || v["callback_id"] != AnswerCallback || v["private_metadata"] != rec.ID {
		t.Fatalf("view = %v", v)
	}
	if h.button(rec.ID).State != btnOpen {
		t.Fatal("opening the modal used the button")
	}
	env, err := h.fake.Submit(slackfake.Submission{User: "UALICE", CallbackID: AnswerCallback, PrivateMetadata: rec.ID,
		Values: map[string]map[string]string{AnswerBlock: {AnswerInput: "use main"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.fake.WaitAck(env, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	evs := h.waitEvents(1)
	var ev *doc.Event
	for _, x := range evs {
		ev = x
	}
	thread := rec.ThreadTS
	if thread == "" {
		thread = qm.ThreadTS
	}
	if ev.Type != EventThreadReply || ev.Payload["text"] != "use main" || ev.Payload["user_id"] != "UALICE" ||
		!strings.HasPrefix(ev.ID, "evt-slack-reply-"+strings.ReplaceAll(thread, ".", "-")) {
		t.Fatalf("event = %+v", ev)
	}
	rc, _ := ev.Payload["reply_context"].(map[string]any)
	if rc["task_id"] != task || rc["session_id"] != "sess-1" {
		t.Errorf("reply_context = %v", rc)
	}
	waitUntil(t, "the update", func() bool { p, _ := h.fake.Message(qm.Channel, qm.TS); return p.Updates == 1 })
	p, _ := h.fake.Message(qm.Channel, qm.TS)
	if !strings.Contains(p.Text, "Answered by <@UALICE>: use main") || len(p.Buttons()) != 0 {
		t.Errorf("updated message = %+v", p)
	}
	if r := h.button(rec.ID); r.State != btnUsed || r.By != "UALICE" || !r.Done {
		t.Errorf("record after = %+v", r)
	}
	if r := h.button(qm.Buttons()[ActionCancel]); r.State != btnClosed {
		t.Errorf("the sibling Cancel stayed %s", r.State)
	}

	h.click("UALICE", qm, ActionAnswer)
	waitUntil(t, "the second click's refusal", func() bool { return len(h.ephemerals("UALICE")) == 1 })
	if len(h.fake.Views()) != 1 || len(h.events()) != 1 {
		t.Errorf("a second click did something")
	}
}

// Cancel task on a running task's thread start: one control request by
// slack:<user>, the message updated; a second click refused; the final
// notification removes the button from the thread start.
func TestButtons_CancelGoesThroughControl(t *testing.T) {
	h := newHarness(t, setup{})
	h.startSocket()
	h.putTask(layout.InProgress, task, 0)
	h.put(message("msg-"+task+"-start", "thread_start", task))
	h.tick()
	start := h.posted("content of msg-" + task + "-start")
	h.click("UALICE", start, ActionCancel)
	s := kv.OnStore(h.e.st.st)
	waitUntil(t, "the control request", func() bool {
		qs, _ := control.Requests(h.t.Context(), s)
		return len(qs) == 1
	})
	h.click("UALICE", start, ActionCancel)
	waitUntil(t, "the refusal", func() bool { return len(h.ephemerals("UALICE")) == 1 })
	if rs := h.requests(); len(rs) != 1 || rs[0].Action != control.ActionCancel || rs[0].TaskID != task || rs[0].By != "slack:UALICE" {
		t.Fatalf("requests = %+v", rs)
	}
	if e := h.ephemerals("UALICE")[0]; !strings.Contains(e.Text, "Already done") {
		t.Errorf("refusal = %q", e.Text)
	}
	p, _ := h.fake.Message(start.Channel, start.TS)
	if !strings.Contains(p.Text, "Cancel task requested by <@UALICE>") || len(p.Buttons()) != 0 {
		t.Errorf("updated start = %+v", p)
	}
}

// The thread start's Cancel task goes when the task's final lands; the ❌
// carries Retry, which admits the source event again once; a newer attempt
// and an expired button are refused.
func TestButtons_FinalRemovesCancelAndRetryRetriggers(t *testing.T) {
	h := newHarness(t, setup{})
	h.startSocket()
	h.putTask(layout.Completed, task, 0)
	var tk doc.Task
	if err := h.e.tasks.ReadJSON(layout.Completed, task, &tk); err != nil {
		t.Fatal(err)
	}
	src := doc.Event{ID: tk.EventID, Type: "github.pr.review_requested", Source: "github",
		Payload: map[string]any{"pr": 7}, Priority: "normal", CreatedAt: doc.FormatTime(t0), Status: doc.EventCompleted}
	if err := h.e.events.Put(layout.Completed, src.ID, src); err != nil {
		t.Fatal(err)
	}
	h.put(message("msg-"+task+"-start", "thread_start", task))
	h.tick()
	start := h.posted("content of msg-" + task + "-start")
	if start.Buttons()[ActionCancel] == "" {
		t.Fatal("thread start without Cancel task")
	}
	f := message("msg-"+task+"-failed", "notification", task)
	f["final"], f["content"] = "failed", "❌ gen-pr failed "+task
	f["context"] = map[string]any{"retry_count": 0}
	h.put(f)
	h.tick()
	if p, _ := h.fake.Message(start.Channel, start.TS); len(p.Buttons()) != 0 || p.Updates != 1 {
		t.Errorf("thread start after the final = %+v", p)
	}
	fail := h.posted("gen-pr failed " + task)
	if fail.Buttons()[ActionRetry] == "" {
		t.Fatalf("❌ buttons = %v", fail.Buttons())
	}

	// A newer attempt: refused, nothing admitted.
	h.putTask(layout.Completed, task, 1)
	h.click("UALICE", fail, ActionRetry)
	waitUntil(t, "the newer-attempt refusal", func() bool { return len(h.ephemerals("UALICE")) == 1 })
	if !strings.Contains(h.ephemerals("UALICE")[0].Text, "attempt 1") || len(h.events()) != 0 {
		t.Fatalf("refusal = %+v, events = %v", h.ephemerals("UALICE"), keys(h.events()))
	}
	h.putTask(layout.Completed, task, 0)
	h.click("UALICE", fail, ActionRetry)
	evs := h.waitEvents(1)
	ev := evs["evt-retry-"+fail.Buttons()[ActionRetry]]
	if ev == nil || ev.Type != src.Type || ev.Payload["retry_of"] != task || ev.Payload["retried_by"] != "slack:UALICE" {
		t.Fatalf("events = %v", evs)
	}
	waitUntil(t, "the ❌ update", func() bool { p, _ := h.fake.Message(fail.Channel, fail.TS); return p.Updates == 1 })

	// Expired: refused.
	h.put(message("msg-"+task+"-start2", "thread_start", "task-20261121-002"))
	h.tick()
	s2 := h.posted("content of msg-" + task + "-start2")
	h.clock.Advance(25 * time.Hour)
	h.click("UALICE", s2, ActionCancel)
	waitUntil(t, "the expiry refusal", func() bool { return len(h.ephemerals("UALICE")) == 2 })
	if !strings.Contains(h.ephemerals("UALICE")[1].Text, "expired") {
		t.Errorf("refusal = %q", h.ephemerals("UALICE")[1].Text)
	}
}

// A click used but not carried out (the envoy died between the swap and
// the action) is finished by the next tick, once.
func TestButtons_UsedNotDoneIsFinishedByTheNextTick(t *testing.T) {
	h := newHarness(t, setup{})
	h.putTask(layout.InProgress, task, 0)
	h.put(message("msg-"+task+"-start", "thread_start", task))
	h.tick()
	start := h.posted("content of msg-" + task + "-start")
	id := start.Buttons()[ActionCancel]
	if _, err := h.e.useButton(t.Context(), id, "UALICE", "", "", ""); err != nil {
		t.Fatal(err)
	}
	h.tick()
	h.tick()
	if rs := h.requests(); len(rs) != 1 || rs[0].By != "slack:UALICE" {
		t.Fatalf("requests = %+v", rs)
	}
	if r := h.button(id); !r.Done {
		t.Errorf("record = %+v", r)
	}
}

// The console prints each button as the command that does the same.
func TestButtons_ConsolePrintsCommands(t *testing.T) {
	h := newHarness(t, setup{console: true})
	q := message("msg-"+task+"-question", "human_input_request", task)
	q["reply_context"] = replyContext(task)
	h.put(q)
	h.tick()
	out := h.stdout.String()
	if !strings.Contains(out, "[Answer] envoy reply "+task) || !strings.Contains(out, "[Cancel task] start task cancel "+task) {
		t.Errorf("console = %s", out)
	}
}

// A park alert carries Unpark: a control "unpark" request naming the park.
func TestButtons_UnparkGoesThroughControl(t *testing.T) {
	h := newHarness(t, setup{})
	h.startSocket()
	m := message("msg-park-1", "notification", "")
	m["context"] = map[string]any{"park": "general:gen-pr"}
	h.put(m)
	h.tick()
	p := h.posted("content of msg-park-1")
	h.click("UALICE", p, ActionUnpark)
	waitUntil(t, "the unpark request", func() bool { return len(h.requests()) == 1 })
	qs, _ := control.Requests(t.Context(), kv.OnStore(h.e.st.st))
	var req control.Request
	json.Unmarshal(qs[0].Data, &req)
	if req.Action != control.ActionUnpark || req.Target != "general:gen-pr" || req.By != "slack:UALICE" || req.ID != qs[0].Key {
		t.Errorf("request = %+v", req)
	}
	// The king validates what it reads back: the button's request passes.
	if err := req.Validate(); err != nil {
		t.Errorf("the button's request does not validate: %v", err)
	}
	// A second run of the action (after a crash) queues nothing more.
	if err := h.e.submitControl(t.Context(), req); err != nil || len(h.requests()) != 1 {
		t.Errorf("second submit: %v, %d requests", err, len(h.requests()))
	}
}
