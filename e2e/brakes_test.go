package e2e

// The brakes (SPEC §12.4) judged from outside on the real binaries: the
// queue files, the event log, `start status --json` and the fake Slack.
// Two kingdoms run side by side: one whose attempts meet the no-progress,
// burn and per-item brakes (a command soldier that sleeps, the real claude
// CLI looping on tool calls against the fake model, a pull request of the
// fake GitHub re-triggered), and one whose general fails alike until it is
// parked, survives a SIGKILL of its king parked, and is lifted by its one
// canary.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/modelfake"
	"github.com/kingdom-dev/kingdom/internal/testkit/slackfake"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// brakesSoldier is the command engine of both kingdoms: gen-stall's agent
// prints nothing and changes nothing; gen-flaky's fails alike until the
// operator's fix (the heal file) is in place; every other task succeeds.
const brakesSoldier = `#!/bin/sh
task="$1"; result="$2"
case "$KINGDOM_GENERAL" in
gen-stall) exec sleep 600 ;;
gen-flaky)
  if [ ! -f "$KINGDOM_BASE_DIR/heal" ]; then
    echo "flaky: the same failure every time" >&2
    exit 1
  fi ;;
esac
printf '{"task_id":"%s","status":"success","summary":"done %s"}' "$task" "$task" > "$result"
`

// The smallest values king.yaml accepts for the timed brakes (pkg/config:
// no_progress_minutes and park_minutes take whole minutes, min 1;
// burn_tokens min 1000).
const (
	brakeStallMinutes = 1
	brakeParkMinutes  = 1
	brakeBurnTokens   = 1000
)

// brakeWait bounds every wait of these tests: the slowest (a Stalled
// attempt retried once) takes two no-progress limits.
const brakeWait = 5 * time.Minute

func writeBrakesSoldier(t *testing.T) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "brakes-soldier.sh")
	if err := os.WriteFile(script, []byte(brakesSoldier), 0o700); err != nil {
		t.Fatal(err)
	}
	return script
}

func TestBrakes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: two kingdoms and the real claude CLI")
	}
	t.Run("attempts", func(t *testing.T) {
		t.Parallel()
		brakesOnAttempts(t)
	})
	t.Run("general parked, SIGKILLed king, one canary lifts it", func(t *testing.T) {
		t.Parallel()
		brakesOnGeneral(t)
	})
}

// brakesOnAttempts is the kingdom of the per-attempt and per-item brakes.
func brakesOnAttempts(t *testing.T) {
	cli := modelfake.FindCLI(t, "claude")
	fake := modelfake.New()
	t.Cleanup(fake.Close)
	slack := slackfake.New()
	t.Cleanup(slack.Close)
	gh := newFakeGitHub(t)
	remotes := t.TempDir()
	makeBareRepo(t, filepath.Join(remotes, "acme", "widgets.git"))
	if out, err := exec.Command("git", "-C", filepath.Join(remotes, "acme", "widgets.git"), "update-ref", "refs/pull/42/head", "refs/heads/main").CombinedOutput(); err != nil {
		t.Fatalf("make refs/pull/42/head: %v: %s", err, out)
	}
	home := t.TempDir()
	env := "SLACK_BOT_TOKEN=xoxb-e2e-bot\nSLACK_APP_TOKEN=xapp-e2e-app\nGH_TOKEN=ghp_e2etesttoken0000000000\n"
	for k, v := range fake.ClaudeEnv() {
		env += k + "=" + v + "\n"
	}
	files := map[string]string{
		"config/system.yaml": fmt.Sprintf(`runtime:
  engine: command
  command:
    argv: ["/bin/sh", %q, "{task_id}", "{result_path}"]
  claude:
    command: %q
  env_passthrough: [PATH, HOME, LANG, TZ, ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, DISABLE_AUTOUPDATER]
git:
  clone_url: "file://%s/{repo}.git"
watchdog:
  interval_seconds: 1
`, writeBrakesSoldier(t), cli, remotes),
		"config/sentinel.yaml": fmt.Sprintf("polling:\n  github:\n    interval_seconds: 1\n    api_url: %q\n  inbox:\n    interval_seconds: 1\n", gh.srv.URL),
		// The general's brake (failure_threshold) is off here: this kingdom's
		// failures are the attempt brakes'.
		"config/king.yaml": fmt.Sprintf(`concurrency:
  max_soldiers: 6
retry:
  max_attempts: 1
  backoff_seconds: 1
  max_backoff_seconds: 2
breaker:
  no_progress_minutes: %d
  burn_tokens: %d
  max_attempts_per_item: 2
  item_window_hours: 24
  failure_threshold: 0
`, brakeStallMinutes, brakeBurnTokens),
		"config/envoy.yaml":                     fmt.Sprintf("slack:\n  api_url: %q\n  default_channel: C0KINGDOM\n  allowed_users: [UHUMAN]\nintervals:\n  outbound_seconds: 1\n", slack.APIURL()),
		"config/chamberlain.yaml":               calmThresholds,
		"config/generals/gen-stall.yaml":        "name: gen-stall\ndescription: an agent that does nothing\ntimeout_seconds: 900\nmax_concurrent: 2\nsubscribes: [\"brake.stall\"]\n",
		"config/generals/gen-burn.yaml":         "name: gen-burn\ndescription: an agent that calls tools forever\nengine: claude\ntimeout_seconds: 600\nmax_concurrent: 2\nsubscribes: [\"brake.burn\"]\n",
		"config/generals/templates/gen-burn.md": "Task {{task_id}}.\n\n{{payload.text}}\n",
		"config/kingdom.env":                    env,
	}
	k := NewKingdom(t, files)
	os.Chmod(k.L.EnvFile(), 0o600)
	rk := &realKingdom{Kingdom: k, engine: "claude", fake: fake, slack: slack, home: home}
	rk.startWithHome()
	k.WaitRoles("sentinel", "king", "envoy", "chamberlain", "gen-pr", "gen-stall", "gen-burn")
	if err := slack.WaitConnected(30 * time.Second); err != nil {
		t.Fatalf("envoy never connected to the fake Socket Mode: %v", err)
	}

	t.Run("a silent command soldier is Stalled at the no-progress limit, retried once, then terminal", func(t *testing.T) {
		t.Parallel()
		k.DropInbox("stall", map[string]any{"id": "evt-brake-stall", "type": "brake.stall", "payload": map[string]any{"n": 1}})
		task := brkTaskOf(t, k, "evt-brake-stall")
		brkEventually(t, "the ❌ of "+task, brakeWait, func() bool { return k.Msgs.Exists(layout.Sent, "msg-"+task+"-failed") })
		r := k.Result(task)
		if r == nil || r.Status != doc.ResultFailed || r.ErrorReason != doc.ReasonStalled || r.RetryCount != 1 {
			t.Fatalf("final result %+v, want failed Stalled on the retry (retry_count 1)", r)
		}
		if !strings.Contains(r.Error, "no_progress_minutes") {
			t.Errorf("the Stalled error %q does not name the limit", r.Error)
		}
		tk := k.TaskForEvent("evt-brake-stall")
		if st, _ := k.Tasks.Find(task); st != layout.Completed || tk.Status != doc.ResultFailed || tk.RetryCount != 1 {
			t.Fatalf("task %s in %s: %+v, want completed failed after one retry", task, st, tk)
		}
		spawns := brkEvents(k, "soldier.spawned", "task_id", task)
		retries := brkEvents(k, "task.retry_scheduled", "task_id", task)
		failed := brkEvents(k, "task.failed", "task_id", task)
		if len(spawns) != 2 || len(retries) != 1 || len(failed) != 1 {
			t.Fatalf("%d attempts, %d retries, %d task.failed; want 2, 1, 1", len(spawns), len(retries), len(failed))
		}
		if d := brkData(retries[0].Event); d["error_reason"] != doc.ReasonStalled {
			t.Errorf("the retry was scheduled for %v, want Stalled", d["error_reason"])
		}
		if d := brkData(failed[0].Event); d["error_reason"] != doc.ReasonStalled {
			t.Errorf("task.failed says %v, want Stalled", d["error_reason"])
		}
		// Its process tree is gone: no process carries the task's id.
		if pids := brkTaskProcs(task); len(pids) != 0 {
			t.Errorf("processes of the stalled task still run: %v", pids)
		}
		if n := len(brkPosts(slack, "❌", task, "Stalled")); n != 1 {
			t.Errorf("%d ❌ posts naming %s Stalled in the fake Slack, want 1", n, task)
		}
		limit := time.Duration(brakeStallMinutes) * time.Minute
		t.Logf("no-progress limit %v: attempt 0 killed %v after its spawn, attempt 1 %v after its spawn",
			limit, retries[0].Time().Sub(spawns[0].Time()).Round(100*time.Millisecond),
			failed[0].Time().Sub(spawns[1].Time()).Round(100*time.Millisecond))
	})

	t.Run("a real claude soldier calling tools forever is stopped by the burn cap: Runaway, terminal, one ❌", func(t *testing.T) {
		t.Parallel()
		const m = "BRAKE-BURN-LOOP"
		loop := modelfake.Shell("git --version")
		loop.InputTokens, loop.OutputTokens = 300, 50
		fake.Script(m, modelfake.Always(loop))
		k.DropInbox("burn", map[string]any{"id": "evt-brake-burn", "type": "brake.burn", "priority": "high",
			"payload": map[string]any{"text": m + " look around the repository"}})
		task := brkTaskOf(t, k, "evt-brake-burn")
		brkEventually(t, "the ❌ of "+task, brakeWait, func() bool { return k.Msgs.Exists(layout.Sent, "msg-"+task+"-failed") })
		r := k.Result(task)
		if r == nil || r.Status != doc.ResultFailed || r.ErrorReason != doc.ReasonRunaway || r.RetryCount != 0 {
			t.Fatalf("final result %+v, want failed Runaway on the first attempt", r)
		}
		if !strings.Contains(r.Error, "burn_tokens") {
			t.Errorf("the Runaway error %q does not name the cap", r.Error)
		}
		if n := len(brkEvents(k, "soldier.spawned", "task_id", task)); n != 1 {
			t.Errorf("%d attempts, want 1 (Runaway is terminal)", n)
		}
		if n := len(brkEvents(k, "task.retry_scheduled", "task_id", task)); n != 0 {
			t.Errorf("%d retries of a Runaway", n)
		}
		if n := len(brkPosts(slack, "❌", task)); n != 1 {
			t.Errorf("%d ❌ posts for %s in the fake Slack, want 1", n, task)
		}
		if n := len(brkPosts(slack, "❌", task, "Runaway")); n != 1 {
			t.Errorf("the ❌ of %s does not say Runaway", task)
		}
		reqs := fake.Requests(m)
		var tokens int64
		if r.Usage != nil {
			tokens = r.Usage.InputTokens + r.Usage.OutputTokens + r.Usage.CacheReadInputTokens + r.Usage.CacheCreationInputTokens
		}
		if len(reqs) < 2 || tokens <= brakeBurnTokens {
			t.Fatalf("%d model requests, %d tokens recorded: the loop never passed the cap", len(reqs), tokens)
		}
		// The kill stopped the loop: no model request after the result.
		time.Sleep(2 * time.Second)
		if after := len(fake.Requests(m)); after != len(reqs) {
			t.Errorf("the killed agent went on calling the model: %d requests, then %d", len(reqs), after)
		}
		// The brake's own figure is in its words; the result's usage adds
		// what the engine reported until the kill took effect.
		var atBrake int64
		if _, words, ok := strings.Cut(r.Error, "used "); ok {
			fmt.Sscanf(words, "%d", &atBrake)
		}
		t.Logf("burn_tokens %d: the brake fired at %d tokens, the attempt ended at %d after %d model requests (%d tokens each), %.1f s into it",
			brakeBurnTokens, atBrake, tokens, len(reqs), loop.InputTokens+loop.OutputTokens, r.DurationSeconds)
	})

	t.Run("a pull request re-triggered past max_attempts_per_item gets one ❌ and no more attempts", func(t *testing.T) {
		t.Parallel()
		const item = "gh:acme:widgets:42"
		trigger := func(i int) string {
			updated := time.Date(2026, 11, 21, 12, i, 0, 0, time.UTC)
			gh.add(map[string]any{
				"id": "7101", "unread": true, "reason": "review_requested", "updated_at": updated.Format(time.RFC3339),
				"subject":    map[string]any{"title": "Fix the flaky uploader", "url": "https://api.github.com/repos/acme/widgets/pulls/42", "type": "PullRequest"},
				"repository": map[string]any{"full_name": "acme/widgets"},
				"url":        "https://api.github.com/notifications/threads/7101",
			})
			ev := "evt-github-7101-" + updated.Format("20060102150405")
			// Read, it leaves the unread list: the next trigger is new.
			brkEventually(t, "thread 7101 read after trigger "+fmt.Sprint(i), brakeWait, func() bool {
				n := 0
				for _, id := range gh.markedRead() {
					if id == "7101" {
						n++
					}
				}
				return n >= i
			})
			return ev
		}
		prTasks := func() []string {
			var ids []string
			for _, st := range layout.QueueStates[layout.QTasks] {
				for _, tk := range k.TaskList(st) {
					if tk.TargetGeneral == "gen-pr" && strings.HasPrefix(tk.EventID, "evt-github-7101-") {
						ids = append(ids, tk.ID)
					}
				}
			}
			return ids
		}
		// max_attempts_per_item 2: two triggers run.
		for i := 1; i <= 2; i++ {
			task := brkTaskOf(t, k, trigger(i))
			brkEventually(t, task+" done", brakeWait, func() bool { return k.Msgs.Exists(layout.Sent, "msg-"+task+"-done") })
		}
		parked := func(ev string) {
			t.Helper()
			brkEventually(t, ev+" completed as parked", brakeWait, func() bool { return k.Events.Exists(layout.Completed, ev) })
			var d map[string]any
			b, _ := k.Events.Read(layout.Completed, ev)
			json.Unmarshal(b, &d)
			if s, _ := d["discarded"].(string); !strings.HasPrefix(s, "parked: item "+item) || !strings.Contains(s, "start unpark item "+item) {
				t.Fatalf("event %s discarded %q, want parked naming %s and its unpark", ev, s, item)
			}
			// Emitted just after the move.
			brkEventually(t, "event.parked of "+ev, 30*time.Second, func() bool { return len(brkEvents(k, "event.parked", "event_id", ev)) > 0 })
		}
		ev3 := trigger(3)
		parked(ev3)
		alert := func() []string { return brkPosts(slack, "❌", "item "+item+" parked") }
		brkEventually(t, "the park's ❌ in the fake Slack", brakeWait, func() bool { return len(alert()) > 0 })
		if a := alert()[0]; !strings.Contains(a, "max_attempts_per_item 2") || !strings.Contains(a, "start unpark item "+item) {
			t.Errorf("the park's ❌ %q does not name the cap and how to lift it", a)
		}
		ev4 := trigger(4)
		parked(ev4)
		st := brkStatus(t, k)
		if p := st.park("item", item); p == nil || p.Count < 2 {
			t.Errorf("start status --json parks %+v: no park of %s with its count", st.Parks, item)
		}
		// The envoy had every chance to post a second alert: none.
		brkEventually(t, "messages sent", 30*time.Second, func() bool { return k.Msgs.Count(layout.Pending) == 0 })
		if n := len(alert()); n != 1 {
			t.Errorf("%d ❌ of the item's park, want 1", n)
		}
		if ts := prTasks(); len(ts) != 2 {
			t.Errorf("tasks of PR 42: %v, want the 2 the cap allows", ts)
		}
		if n := len(brkEvents(k, "breaker.parked", "name", item)); n != 1 {
			t.Errorf("%d breaker.parked of %s, want 1", n, item)
		}
	})
}

// brakesOnGeneral is the kingdom of the correlated-failure brake.
func brakesOnGeneral(t *testing.T) {
	const gen = "gen-flaky"
	slack := slackfake.New()
	t.Cleanup(slack.Close)
	k := NewKingdom(t, map[string]string{
		"config/system.yaml": fmt.Sprintf("runtime:\n  engine: command\n  command:\n    argv: [\"/bin/sh\", %q, \"{task_id}\", \"{result_path}\"]\nwatchdog:\n  interval_seconds: 1\n",
			writeBrakesSoldier(t)),
		"config/sentinel.yaml": "polling:\n  inbox:\n    interval_seconds: 1\n",
		// No retries: every failure is one task's, so the count is plain.
		"config/king.yaml": fmt.Sprintf(`concurrency:
  max_soldiers: 6
retry:
  max_attempts: 0
breaker:
  failure_threshold: 3
  park_minutes: %d
`, brakeParkMinutes),
		"config/envoy.yaml":              fmt.Sprintf("slack:\n  api_url: %q\n  default_channel: C0KINGDOM\n  allowed_users: [UHUMAN]\nintervals:\n  outbound_seconds: 1\n", slack.APIURL()),
		"config/chamberlain.yaml":        calmThresholds,
		"config/generals/gen-flaky.yaml": "name: gen-flaky\ndescription: an agent that fails alike\ntimeout_seconds: 120\nmax_concurrent: 3\nsubscribes: [\"flaky.*\"]\n",
		"config/kingdom.env":             "SLACK_BOT_TOKEN=xoxb-e2e-bot\nSLACK_APP_TOKEN=xapp-e2e-app\n",
	})
	os.Chmod(k.L.EnvFile(), 0o600)
	k.Start()
	k.WaitRoles("sentinel", "king", "envoy", "chamberlain", gen)
	if err := slack.WaitConnected(30 * time.Second); err != nil {
		t.Fatalf("envoy never connected to the fake Socket Mode: %v", err)
	}
	drop := func(i int) string {
		id := fmt.Sprintf("evt-flaky-%d", i)
		k.DropInbox(fmt.Sprintf("flaky-%d", i), map[string]any{"id": id, "type": "flaky.work", "payload": map[string]any{"n": i}})
		return id
	}
	// Three failures alike park the general.
	var failedTasks []string
	for i := 1; i <= 3; i++ {
		failedTasks = append(failedTasks, brkTaskOf(t, k, drop(i)))
	}
	var parkedEv brkEv
	brkEventually(t, gen+" parked", brakeWait, func() bool {
		evs := brkEvents(k, "breaker.parked", "name", gen)
		if len(evs) > 0 {
			parkedEv = evs[0]
		}
		return len(evs) > 0
	})
	pd := brkData(parkedEv.Event)
	until, err := time.Parse(time.RFC3339Nano, fmt.Sprint(pd["until"]))
	if err != nil {
		t.Fatalf("breaker.parked until %v: %v", pd["until"], err)
	}
	reasons := map[string]int{}
	for _, task := range failedTasks {
		brkEventually(t, task+" completed", brakeWait, func() bool { st, _ := k.Tasks.Find(task); return st == layout.Completed })
		if r := k.Result(task); r != nil && r.Status == doc.ResultFailed {
			reasons[r.ErrorReason]++
		}
	}
	if len(reasons) != 1 || pd["count"] != float64(3) {
		t.Fatalf("failures by reason %v, park count %v: want 3 alike", reasons, pd["count"])
	}
	alert := func() []string { return brkPosts(slack, "❌", gen+" parked") }
	brkEventually(t, "the park's ❌ in the fake Slack", brakeWait, func() bool { return len(alert()) > 0 })
	if a := alert()[0]; !strings.Contains(a, "failure_threshold 3") || !strings.Contains(a, "start unpark "+gen) || !strings.Contains(a, "canary") {
		t.Errorf("the park's ❌ %q does not name the threshold, the canary and the unpark", a)
	}
	// New work waits on the park.
	waitingOnPark := func(ids ...string) func() bool {
		return func() bool {
			st := brkStatus(t, k)
			for _, id := range ids {
				if w := st.wait(id); w == nil || w.Reason != "parked" || k.TaskForEvent(id) != nil {
					return false
				}
			}
			return true
		}
	}
	e4, e5 := drop(4), drop(5)
	brkEventually(t, "events 4 and 5 waiting on the park", brakeWait, waitingOnPark(e4, e5))

	// The king SIGKILLed mid-park: start relaunches it; the park and the
	// waits are still there, and no second alert goes out.
	old := rolePIDs(t, k)["king"]
	if old <= 0 {
		t.Fatal("no king pid in tmux")
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	brkEventually(t, "the king relaunched", brakeWait, func() bool {
		pid := rolePIDs(t, k)["king"]
		st, err := os.Stat(k.L.Heartbeat("king"))
		return pid > 0 && pid != old && err == nil && st.ModTime().After(killedAt)
	})
	relaunched := time.Since(killedAt)
	st := brkStatus(t, k)
	p := st.park("general", gen)
	if p == nil || p.Count != 3 || p.Canary != "" {
		t.Fatalf("after the SIGKILL, start status --json parks %+v: want %s parked on 3 failures, no canary yet", st.Parks, gen)
	}
	// The relaunched king has ticked (it beat after the kill): it
	// dispatched neither event (a king that forgot the park would have at
	// once; the canary's time below shows it kept the park's end too).
	if time.Now().Before(until) {
		if !waitingOnPark(e4, e5)() {
			t.Fatalf("after the restart, events 4 and 5 no longer wait on the park: %+v", brkStatus(t, k).Waits)
		}
	} else {
		t.Logf("the king came back after the park's end: its waits after the restart are not checked")
	}

	// The operator fixes the cause; after park_minutes one canary runs and
	// its success lifts the park.
	os.WriteFile(filepath.Join(k.L.Base, "heal"), nil, 0o600)
	var canaryEv brkEv
	brkEventually(t, "the canary", brakeWait+time.Duration(brakeParkMinutes)*time.Minute, func() bool {
		evs := brkEvents(k, "breaker.canary", "general", gen)
		if len(evs) > 0 {
			canaryEv = evs[0]
		}
		return len(evs) > 0
	})
	cd := brkData(canaryEv.Event)
	canary, canaryEvent := fmt.Sprint(cd["task_id"]), fmt.Sprint(cd["event_id"])
	other := e4
	if canaryEvent == e4 {
		other = e5
	} else if canaryEvent != e5 {
		t.Fatalf("the canary %s is of event %s, want one of the waiting %s, %s", canary, canaryEvent, e4, e5)
	}
	if canaryEv.Time().Before(until.Truncate(time.Second)) {
		t.Errorf("the canary was dispatched at %s, before the park's end %s", canaryEv.TS, pd["until"])
	}
	var unparkedEv brkEv
	brkEventually(t, "the canary lifts the park", brakeWait, func() bool {
		evs := brkEvents(k, "breaker.unparked", "name", gen)
		if len(evs) > 0 {
			unparkedEv = evs[0]
		}
		return len(evs) > 0
	})
	if d := brkData(unparkedEv.Event); d["by"] != "canary" {
		t.Errorf("unparked by %v, want the canary", d["by"])
	}
	if r := k.Result(canary); r == nil || r.Status != doc.ResultSuccess {
		t.Fatalf("the canary's result %+v, want success", r)
	}
	brkEventually(t, "the other waiting event runs after the lift", brakeWait, func() bool {
		tk := k.TaskForEvent(other)
		return tk != nil && k.Result(tk.ID) != nil
	})
	// Exactly one task ran between the park and its lift: the canary.
	var during []string
	for _, ev := range brkEvents(k, "soldier.spawned", "general", gen) {
		if ev.Seq > parkedEv.Seq && ev.Seq < unparkedEv.Seq {
			during = append(during, fmt.Sprint(brkData(ev.Event)["task_id"]))
		}
	}
	if len(during) != 1 || during[0] != canary {
		t.Errorf("attempts between the park and its lift: %v, want only the canary %s", during, canary)
	}
	if n := len(brkEvents(k, "breaker.canary", "general", gen)); n != 1 {
		t.Errorf("%d canaries, want 1", n)
	}
	otherTask := k.TaskForEvent(other).ID
	if sp := brkEvents(k, "soldier.spawned", "task_id", otherTask); len(sp) != 1 || sp[0].Seq < unparkedEv.Seq {
		t.Errorf("the other waiting event's task %s ran %d times, or before the lift", otherTask, len(sp))
	}
	if r := k.Result(otherTask); r == nil || r.Status != doc.ResultSuccess {
		t.Errorf("the task after the lift: %+v, want success", r)
	}
	brkEventually(t, "messages sent", 30*time.Second, func() bool { return k.Msgs.Count(layout.Pending) == 0 })
	if n := len(alert()); n != 1 {
		t.Errorf("%d ❌ of the park in the fake Slack, want 1 (one alert per park, the SIGKILL included)", n)
	}
	if st := brkStatus(t, k); st.park("general", gen) != nil {
		t.Errorf("start status --json still shows the park after the canary: %+v", st.Parks)
	}
	t.Logf("park_minutes %d: parked at %s, canary dispatched %v after the park (until %s), lifted %v after the park; the king beat again %v after its SIGKILL",
		brakeParkMinutes, parkedEv.TS, canaryEv.Time().Sub(parkedEv.Time()).Round(100*time.Millisecond), pd["until"],
		unparkedEv.Time().Sub(parkedEv.Time()).Round(100*time.Millisecond), relaunched.Round(100*time.Millisecond))
}

// brkEventually is Kingdom.Eventually failing the calling (sub)test.
func brkEventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// brkTaskOf waits for the task made from an event.
func brkTaskOf(t *testing.T, k *Kingdom, ev string) string {
	t.Helper()
	var id string
	brkEventually(t, "a task for "+ev, brakeWait, func() bool {
		if tk := k.TaskForEvent(ev); tk != nil {
			id = tk.ID
			return true
		}
		return false
	})
	return id
}

// brkEv is an internal event with its place in the log (its time has
// whole seconds: the order of the lines is what says what came first).
type brkEv struct {
	eventlog.Event
	Seq int
}

// brkEvents are the internal events of typ whose data has key = val, in
// the log's order.
func brkEvents(k *Kingdom, typ, key, val string) []brkEv {
	var out []brkEv
	for i, ev := range k.InternalEvents() {
		if ev.Type == typ && fmt.Sprint(brkData(ev)[key]) == val {
			out = append(out, brkEv{ev, i})
		}
	}
	return out
}

func brkData(ev eventlog.Event) map[string]any {
	var d map[string]any
	json.Unmarshal(ev.Data, &d)
	return d
}

// brkPosts are the texts the fake Slack received that contain every sub.
func brkPosts(s *slackfake.Server, subs ...string) []string {
	var out []string
	for _, c := range s.Calls("chat.postMessage") {
		text := c.Form.Get("text")
		ok := true
		for _, sub := range subs {
			ok = ok && strings.Contains(text, sub)
		}
		if ok {
			out = append(out, text)
		}
	}
	return out
}

// brkStatusDoc is the part of `start status --json` these tests read.
type brkStatusDoc struct {
	Parks []brkPark    `json:"parks"`
	Waits []waits.Wait `json:"waits"`
}

type brkPark struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Until  string `json:"until"`
	Count  int    `json:"count"`
	Canary string `json:"canary_task_id"`
}

func (d brkStatusDoc) park(kind, name string) *brkPark {
	for i := range d.Parks {
		if d.Parks[i].Kind == kind && d.Parks[i].Name == name {
			return &d.Parks[i]
		}
	}
	return nil
}

func (d brkStatusDoc) wait(event string) *waits.Wait {
	for i := range d.Waits {
		if d.Waits[i].EventID == event {
			return &d.Waits[i]
		}
	}
	return nil
}

// brkStatus runs `start status --json` (a park makes it degraded: its
// exit code is not the point).
func brkStatus(t *testing.T, k *Kingdom) brkStatusDoc {
	t.Helper()
	out, _ := k.runBin("start", "status", "--json")
	var d brkStatusDoc
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("start status --json: %v\n%s", err, out)
	}
	return d
}

// brkTaskProcs are the pids of processes whose environment names task
// (every soldier's engine carries KINGDOM_TASK_ID).
func brkTaskProcs(task string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	want := []byte("KINGDOM_TASK_ID=" + task + "\x00")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(b, want) {
			pids = append(pids, pid)
		}
	}
	return pids
}
