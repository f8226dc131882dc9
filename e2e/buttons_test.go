package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/slackfake"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/envoy"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// The buttons of the envoy's messages (SPEC §12.5), from outside: the fake
// Slack clicks them over Socket Mode, the real binaries act. Answer is
// refused to a stranger and opens a modal for the asker whose submission
// resumes the same session; Cancel task cancels a running task once; Retry
// re-runs a ❌ once; each message is updated in place; a SIGKILL of the
// envoy right after a click's ack does the click once or refuses it, never
// twice.
func TestButtons_EndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts the whole kingdom")
	}
	k := newConnectedKingdom(t, map[string]string{"config/chamberlain.yaml": calmThresholds})

	t.Run("Answer: a stranger is refused, the asker's modal resumes the session once", func(t *testing.T) {
		k.DropInbox("btn-ask", map[string]any{"id": "evt-btn-ask-1", "type": "test.ask", "payload": map[string]any{"needs_human": true}})
		var first string
		k.Eventually("the question", 120*time.Second, func() bool {
			if tk := k.TaskForEvent("evt-btn-ask-1"); tk != nil {
				first = tk.ID
				return k.Msgs.Exists(layout.Sent, "msg-"+first+"-question")
			}
			return false
		})
		ch, thread := k.threadOf(first)
		q := k.buttonMsg(t, ch, thread, envoy.ActionAnswer)
		if !strings.Contains(q.Text, "Ship it to staging or production?") {
			t.Fatalf("the Answer button is on %q, not on the question", q.Text)
		}
		if q.Buttons()[envoy.ActionCancel] == "" {
			t.Errorf("the question has no Cancel task button: %v", q.Buttons())
		}
		answer := q.Buttons()[envoy.ActionAnswer]

		// A stranger: an ephemeral refusal, no modal.
		env, _, err := k.slack.Click(slackfake.Click{User: "USTRANGER", Channel: ch, MessageTS: q.TS, ThreadTS: thread,
			ActionID: envoy.ActionAnswer, Value: answer})
		if err != nil {
			t.Fatal(err)
		}
		if err := k.slack.WaitAck(env, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		refusal := k.waitEphemeral(t, "USTRANGER", 1)
		if !strings.Contains(refusal.Text, "only the person who asked") || refusal.Channel != ch {
			t.Errorf("stranger's refusal %+v", refusal)
		}
		if v := k.slack.Views(); len(v) != 0 {
			t.Fatalf("a stranger's click opened a modal: %v", v)
		}

		// The asker: a modal bound to the button.
		_, trig, err := k.slack.Click(slackfake.Click{User: "UHUMAN", Channel: ch, MessageTS: q.TS, ThreadTS: thread,
			ActionID: envoy.ActionAnswer, Value: answer})
		if err != nil {
			t.Fatal(err)
		}
		k.Eventually("the Answer modal", 30*time.Second, func() bool { return len(k.slack.Views()) == 1 })
		view := k.slack.Views()[0]
		if view["trigger_id"] != trig || view["private_metadata"] != answer || view["callback_id"] != envoy.AnswerCallback {
			t.Fatalf("modal %v, want trigger %s bound to %s", view, trig, answer)
		}
		if n := len(k.ephemeralsFor("UHUMAN")); n != 0 {
			t.Fatalf("the asker's click was refused: %v", k.ephemeralsFor("UHUMAN"))
		}
		if _, err := k.slack.Submit(slackfake.Submission{User: "UHUMAN", CallbackID: envoy.AnswerCallback, PrivateMetadata: answer,
			Values: map[string]map[string]string{envoy.AnswerBlock: {envoy.AnswerInput: "staging"}}}); err != nil {
			t.Fatal(err)
		}
		var resume string
		k.Eventually("the resume task to finish", 180*time.Second, func() bool {
			for _, tk := range k.TaskList(layout.Completed) {
				if tk.Type == doc.TaskTypeResume && fmt.Sprint(tk.Payload["original_task_id"]) == first {
					resume = tk.ID
					return k.Msgs.Exists(layout.Sent, "msg-"+resume+"-done")
				}
			}
			return false
		})
		if rt := taskPayload(k.Kingdom, resume)["text"]; rt != "staging" {
			t.Errorf("resume task text = %v, want the modal's answer", rt)
		}
		// The engine saw --resume with the first run's session.
		var firstCall, resumeCall struct {
			Args      []string `json:"args"`
			Resume    string   `json:"resume"`
			SessionID string   `json:"session_id"`
		}
		readCall(t, k.Kingdom, first, &firstCall)
		readCall(t, k.Kingdom, resume, &resumeCall)
		if firstCall.SessionID == "" || resumeCall.Resume != firstCall.SessionID || !slices.Contains(resumeCall.Args, "--resume") {
			t.Fatalf("resume argv %q (resume %q), want --resume %q", resumeCall.Args, resumeCall.Resume, firstCall.SessionID)
		}
		if res := k.Result(resume); res == nil || res.Status != doc.ResultSuccess || res.SessionID != firstCall.SessionID {
			t.Fatalf("resume result %+v", res)
		}
		k.Eventually("one ✅ in the thread", 30*time.Second, func() bool { return k.countPosts(ch, thread, "✅") >= 1 })

		// Updated in place: who answered what, no buttons.
		k.Eventually("the question updated in place", 30*time.Second, func() bool {
			m, _ := k.slack.Message(ch, q.TS)
			return strings.Contains(m.Text, "Answered by <@UHUMAN>: staging")
		})
		if m, _ := k.slack.Message(ch, q.TS); len(m.Buttons()) != 0 || !strings.Contains(m.Text, "Ship it to staging or production?") {
			t.Errorf("updated question %q keeps buttons %v", m.Text, m.Buttons())
		}
		if n := k.countUpdates(ch, q.TS, "Answered by"); n != 1 {
			t.Errorf("%d chat.update calls say the answer, want 1", n)
		}

		// A second click on the same Answer: refused, nothing opens or runs.
		env, _, err = k.slack.Click(slackfake.Click{User: "UHUMAN", Channel: ch, MessageTS: q.TS, ThreadTS: thread,
			ActionID: envoy.ActionAnswer, Value: answer})
		if err != nil {
			t.Fatal(err)
		}
		again := k.waitEphemeral(t, "UHUMAN", 1)
		if !strings.Contains(again.Text, "Already done") && !strings.Contains(again.Text, "already answered") {
			t.Errorf("second click's refusal %q", again.Text)
		}
		// A replayed submission of the modal changes nothing either.
		if _, err := k.slack.Submit(slackfake.Submission{User: "UHUMAN", CallbackID: envoy.AnswerCallback, PrivateMetadata: answer,
			Values: map[string]map[string]string{envoy.AnswerBlock: {envoy.AnswerInput: "production"}}}); err != nil {
			t.Fatal(err)
		}
		k.waitEphemeral(t, "UHUMAN", 2)
		time.Sleep(3 * time.Second) // an outbound round or three: nothing more may happen
		if v := k.slack.Views(); len(v) != 1 {
			t.Errorf("%d modals opened, want 1", len(v))
		}
		var resumes int
		for _, st := range layout.QueueStates[layout.QTasks] {
			for _, tk := range k.TaskList(st) {
				if tk.Type == doc.TaskTypeResume && fmt.Sprint(tk.Payload["original_task_id"]) == first {
					resumes++
				}
			}
		}
		if resumes != 1 {
			t.Errorf("%d resume tasks of %s, want 1", resumes, first)
		}
		if n := k.countPosts(ch, thread, "✅"); n != 1 {
			t.Errorf("%d ✅ in the thread, want 1", n)
		}
	})

	t.Run("Cancel task on a running task cancels it once", func(t *testing.T) {
		task, ch, ts, cancel := k.runningWithCancel(t, "evt-btn-hold-1")
		if _, _, err := k.slack.Click(slackfake.Click{User: "UHUMAN", Channel: ch, MessageTS: ts, ActionID: envoy.ActionCancel, Value: cancel}); err != nil {
			t.Fatal(err)
		}
		k.waitTask(task, layout.Completed)
		// The same records as `start task cancel`: failed/Cancelled, by the
		// Slack user.
		if r := k.Result(task); r == nil || r.Status != doc.ResultFailed || r.ErrorReason != doc.ReasonCancelled || r.Error != "cancelled by slack:UHUMAN" {
			t.Fatalf("cancelled task's result %+v", r)
		}
		k.Eventually("the thread start updated in place", 30*time.Second, func() bool {
			m, _ := k.slack.Message(ch, ts)
			return strings.Contains(m.Text, "Cancel task requested by <@UHUMAN>") && len(m.Buttons()) == 0
		})
		// A second click: refused, nothing more.
		before := len(k.ephemeralsFor("UHUMAN"))
		if _, _, err := k.slack.Click(slackfake.Click{User: "UHUMAN", Channel: ch, MessageTS: ts, ActionID: envoy.ActionCancel, Value: cancel}); err != nil {
			t.Fatal(err)
		}
		if e := k.waitEphemeral(t, "UHUMAN", before+1); !strings.Contains(e.Text, "Already done") {
			t.Errorf("second cancel's refusal %q", e.Text)
		}
		time.Sleep(2 * time.Second)
		if n := k.countEvents("task.cancelled", "task_id", task, "slack:UHUMAN"); n != 1 {
			t.Errorf("%d task.cancelled events by slack:UHUMAN for %s, want 1", n, task)
		}
		if n := k.countEvents("slack.button", "task_id", task, "slack:UHUMAN"); n != 1 {
			t.Errorf("%d slack.button events for %s, want 1", n, task)
		}
		if n := k.countUpdates(ch, ts, "Cancel task requested"); n != 1 {
			t.Errorf("%d chat.update calls say the cancel, want 1", n)
		}
		out, _ := k.runBin("start", "tasks", "--json")
		var rows []map[string]any
		json.Unmarshal([]byte(out), &rows)
		var row map[string]any
		for _, r := range rows {
			if r["id"] == task {
				row = r
			}
		}
		if row["state"] != layout.Completed || row["error_reason"] != doc.ReasonCancelled {
			t.Errorf("start tasks --json row of %s: %v", task, row)
		}
		// `start tasks` names no canceller (for `start task cancel` either):
		// the result and the event log above do.
	})

	t.Run("Retry on a ❌ re-runs it once", func(t *testing.T) {
		// Every run fails while the scenario file is there (both attempts).
		scen := filepath.Join(k.L.Base, "fake", "scenario.json")
		os.MkdirAll(filepath.Dir(scen), 0o700)
		if err := os.WriteFile(scen, []byte(`{"mode":"fail"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		k.DropInbox("btn-fail", map[string]any{"id": "evt-btn-fail-1", "type": "test.fail", "payload": map[string]any{"n": 1}})
		task := k.taskOf("evt-btn-fail-1")
		k.Eventually("the ❌", 180*time.Second, func() bool { return k.Msgs.Exists(layout.Sent, "msg-"+task+"-failed") })
		os.Remove(scen)
		ch, thread := k.threadOf(task)
		x := k.buttonMsg(t, ch, thread, envoy.ActionRetry)
		if !strings.HasPrefix(x.Text, "❌") {
			t.Errorf("the Retry button is on %q", x.Text)
		}
		retry := x.Buttons()[envoy.ActionRetry]
		before := len(k.ephemeralsFor("UHUMAN"))
		if _, _, err := k.slack.Click(slackfake.Click{User: "UHUMAN", Channel: ch, MessageTS: x.TS, ThreadTS: thread, ActionID: envoy.ActionRetry, Value: retry}); err != nil {
			t.Fatal(err)
		}
		rerun := k.taskOf("evt-retry-" + retry)
		k.waitTask(rerun, layout.Completed)
		if r := k.Result(rerun); r == nil || r.Status != doc.ResultSuccess {
			t.Fatalf("re-run's result %+v", r)
		}
		if p := taskPayload(k.Kingdom, rerun); p["retry_of"] != task || p["retried_by"] != "slack:UHUMAN" {
			t.Errorf("re-run's payload %v", p)
		}
		k.Eventually("the ❌ updated in place", 30*time.Second, func() bool {
			m, _ := k.slack.Message(ch, x.TS)
			return strings.Contains(m.Text, "Retry requested by <@UHUMAN>") && len(m.Buttons()) == 0
		})
		if _, _, err := k.slack.Click(slackfake.Click{User: "UHUMAN", Channel: ch, MessageTS: x.TS, ThreadTS: thread, ActionID: envoy.ActionRetry, Value: retry}); err != nil {
			t.Fatal(err)
		}
		if e := k.waitEphemeral(t, "UHUMAN", before+1); !strings.Contains(e.Text, "Already done") {
			t.Errorf("second retry's refusal %q", e.Text)
		}
		time.Sleep(3 * time.Second)
		if n := k.retriesOf(task); n != 1 {
			t.Errorf("%d re-runs of %s, want 1", n, task)
		}
		if n := k.countUpdates(ch, x.TS, "Retry requested"); n != 1 {
			t.Errorf("%d chat.update calls say the retry, want 1", n)
		}
	})

	// The kill lands where it lands: on this machine, right after the ack
	// is mostly before the swap; right after the swap is before or after
	// the action. Each case must end with exactly one effect.
	t.Run("SIGKILL of the envoy right after the ack: the click is done once or refused, never twice", func(t *testing.T) {
		k.killAfterClick(t, "evt-btn-hold-2", false)
	})
	t.Run("SIGKILL of the envoy right after the swap: the action is finished once, the next click refused", func(t *testing.T) {
		k.killAfterClick(t, "evt-btn-hold-3", true)
	})
}

// killAfterClick clicks Cancel task on a running task and SIGKILLs the
// envoy as soon as the fake sees the ack (afterSwap: as soon as the
// button's record is used), lets start relaunch it, clicks again as an
// operator who saw nothing happen would, and checks that the task was
// cancelled exactly once.
func (c *connectedKingdom) killAfterClick(t *testing.T, ev string, afterSwap bool) {
	task, ch, ts, cancel := c.runningWithCancel(t, ev)
	pid := rolePIDs(t, c.Kingdom)["envoy"]
	if pid <= 0 {
		t.Fatal("no envoy pid")
	}
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) != "envoy" {
		t.Fatalf("pid %d is %q, not the envoy", pid, comm)
	}
	recFile := filepath.Join(c.L.Base, "state", "store", "kv", envoy.NSButtons, cancel)
	if _, err := os.Stat(recFile); err != nil {
		t.Fatalf("the button's record is not where the files store keeps it: %v", err)
	}
	opens := c.slack.Opens()
	env, _, err := c.slack.Click(slackfake.Click{User: "UHUMAN", Channel: ch, MessageTS: ts, ActionID: envoy.ActionCancel, Value: cancel})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.slack.WaitAck(env, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if afterSwap {
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, _ := os.ReadFile(recFile)
			if strings.Contains(string(b), `"state":"used"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the click never used its record: %s", b)
			}
		}
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.Eventually("the envoy dead", 10*time.Second, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(b), ") Z ")
	})
	rec := c.buttonRecord(t, cancel)
	cancelled := c.countEvents("task.cancelled", "task_id", task, "")
	t.Logf("SIGKILLed the envoy (pid %d): its record %q done %v, %d task.cancelled", pid, rec["state"], rec["done"], cancelled)

	c.Eventually("the envoy relaunched and connected", 120*time.Second, func() bool {
		p := rolePIDs(t, c.Kingdom)["envoy"]
		return p > 0 && p != pid && c.slack.Opens() > opens && c.slack.Connected()
	})
	if rec["state"] == "used" {
		// The swap landed: the relaunched envoy finishes the action by
		// itself, without a click.
		c.Eventually("the used record finished", 60*time.Second, func() bool {
			r := c.buttonRecord(t, cancel)
			return r["done"] == true
		})
	} else {
		time.Sleep(2 * time.Second) // a tick or two: nothing is to be finished
		if r := c.buttonRecord(t, cancel); r["state"] != "open" {
			t.Fatalf("a click the envoy died before recording became %v", r)
		}
	}
	before := len(c.ephemeralsFor("UHUMAN"))
	if _, _, err := c.slack.Click(slackfake.Click{User: "UHUMAN", Channel: ch, MessageTS: ts, ActionID: envoy.ActionCancel, Value: cancel}); err != nil {
		t.Fatal(err)
	}
	c.waitTask(task, layout.Completed)
	if r := c.Result(task); r == nil || r.ErrorReason != doc.ReasonCancelled {
		t.Fatalf("task's result %+v, want Cancelled", r)
	}
	c.Eventually("the thread start updated in place", 60*time.Second, func() bool {
		m, _ := c.slack.Message(ch, ts)
		return strings.Contains(m.Text, "Cancel task requested by <@UHUMAN>") && len(m.Buttons()) == 0
	})
	c.Eventually("the record used and done", 30*time.Second, func() bool {
		r := c.buttonRecord(t, cancel)
		return r["state"] == "used" && r["done"] == true && r["by"] == "UHUMAN"
	})
	time.Sleep(2 * time.Second)
	if rec["state"] == "used" {
		if got := c.ephemeralsFor("UHUMAN"); len(got) != before+1 || !strings.Contains(got[len(got)-1].Text, "Already done") {
			t.Errorf("the click after the relaunch was not refused: %v", got[before:])
		}
	} else if got := c.ephemeralsFor("UHUMAN"); len(got) != before {
		t.Errorf("the click after the relaunch was refused: %v", got[before:])
	}
	// One swap. The files store's journal replays a transaction's events
	// when the crash fell between their append and the journal's removal:
	// an identical line twice is that replay, not a second swap.
	if n, lines := c.countEvents("slack.button", "task_id", task, "slack:UHUMAN"), c.distinctEvents("slack.button", "task_id", task); lines != 1 {
		t.Errorf("%d distinct slack.button events (swaps) for %s, want 1", lines, task)
	} else if n != 1 {
		t.Logf("the swap's slack.button event is in the log %d times (the files store's journal replay)", n)
	}
	if n := c.countEvents("task.cancelled", "task_id", task, ""); n != 1 {
		t.Errorf("%d task.cancelled events for %s, want 1", n, task)
	}
	if n := c.countEvents("task.cancelled", "task_id", task, "slack:UHUMAN"); n != 1 {
		t.Errorf("the cancel of %s is not by slack:UHUMAN", task)
	}
}

// buttonMsg waits for the message of channel with the button action: the
// message ts itself or one in the thread ts.
func (c *connectedKingdom) buttonMsg(t *testing.T, channel, ts, action string) slackfake.Posted {
	t.Helper()
	var out slackfake.Posted
	c.Eventually("a message with "+action, 60*time.Second, func() bool {
		for _, p := range c.slack.Messages() {
			if p.Channel == channel && (p.TS == ts || p.ThreadTS == ts) && p.Buttons()[action] != "" {
				out = p
				return true
			}
		}
		return false
	})
	return out
}

// runningWithCancel drops a task that holds its soldier and returns it
// once running, with its thread start and the Cancel task button.
func (c *connectedKingdom) runningWithCancel(t *testing.T, ev string) (task, channel, ts, button string) {
	t.Helper()
	c.DropInbox(ev, map[string]any{"id": ev, "type": "test.hold", "payload": map[string]any{"hold_file": "release-" + ev}})
	t.Cleanup(func() { os.WriteFile(filepath.Join(c.L.Base, "release-"+ev), nil, 0o600) })
	task = c.taskOf(ev)
	c.Eventually("the soldier of "+task+" running", 120*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(c.L.Base, "fake-calls", task+"-0.json"))
		return err == nil && c.taskState(task) == layout.InProgress
	})
	c.Eventually("the thread start of "+task, 60*time.Second, func() bool {
		channel, ts = c.threadOf(task)
		return ts != ""
	})
	m := c.buttonMsg(t, channel, ts, envoy.ActionCancel)
	if m.TS != ts {
		t.Fatalf("the Cancel task button is on %s, not on the thread start %s", m.TS, ts)
	}
	return task, channel, ts, m.Buttons()[envoy.ActionCancel]
}

func (c *connectedKingdom) ephemeralsFor(user string) []slackfake.Ephemeral {
	var out []slackfake.Ephemeral
	for _, e := range c.slack.Ephemerals() {
		if e.User == user {
			out = append(out, e)
		}
	}
	return out
}

// waitEphemeral waits for user's n-th ephemeral message and returns it.
func (c *connectedKingdom) waitEphemeral(t *testing.T, user string, n int) slackfake.Ephemeral {
	t.Helper()
	c.Eventually(fmt.Sprintf("ephemeral #%d to %s", n, user), 30*time.Second, func() bool { return len(c.ephemeralsFor(user)) >= n })
	return c.ephemeralsFor(user)[n-1]
}

// countPosts counts the chat.postMessage calls into the thread whose text
// has sub.
func (c *connectedKingdom) countPosts(channel, thread, sub string) int {
	n := 0
	for _, p := range c.posts(channel, thread) {
		if strings.Contains(p.Form.Get("text"), sub) {
			n++
		}
	}
	return n
}

// countUpdates counts the chat.update calls on channel/ts whose text has sub.
func (c *connectedKingdom) countUpdates(channel, ts, sub string) int {
	n := 0
	for _, u := range c.slack.Calls("chat.update") {
		if u.Form.Get("channel") == channel && u.Form.Get("ts") == ts && strings.Contains(u.Form.Get("text"), sub) {
			n++
		}
	}
	return n
}

// countEvents counts the event log's events of type typ whose data has
// key = val (and by = by unless by is "").
func (c *connectedKingdom) countEvents(typ, key, val, by string) int {
	n := 0
	for _, ev := range c.InternalEvents() {
		var d map[string]any
		if ev.Type != typ || json.Unmarshal(ev.Data, &d) != nil {
			continue
		}
		if d[key] == val && (by == "" || d["by"] == by) {
			n++
		}
	}
	return n
}

// distinctEvents counts the distinct event log lines of type typ whose
// data has key = val.
func (c *connectedKingdom) distinctEvents(typ, key, val string) int {
	seen := map[string]bool{}
	for _, ev := range c.InternalEvents() {
		var d map[string]any
		if ev.Type == typ && json.Unmarshal(ev.Data, &d) == nil && d[key] == val {
			seen[ev.TS+" "+string(ev.Data)] = true
		}
	}
	return len(seen)
}

// retriesOf counts the events that re-run task (a Retry's evt-retry-…).
func (c *connectedKingdom) retriesOf(task string) int {
	n := 0
	for _, st := range layout.QueueStates[layout.QEvents] {
		for _, ev := range decodeAll[doc.Event](c.Events, st) {
			if ev.Payload["retry_of"] == task {
				n++
			}
		}
	}
	return n
}

// buttonRecord reads a button's record from the store.
func (c *connectedKingdom) buttonRecord(t *testing.T, id string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := c.St.Value(ctx, envoy.NSButtons, id)
	if err != nil {
		t.Fatalf("button record %s: %v", id, err)
	}
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func readCall(t *testing.T, k *Kingdom, task string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(k.L.Base, "fake-calls", task+"-0.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}
