package chamberlain

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

func (e *env) newSession(name string) tmux.Session {
	e.t.Helper()
	ctx := context.Background()
	if err := e.tm.c.NewSession(ctx, name, tmux.NewOptions{}, "sleep", "600"); err != nil {
		e.t.Fatal(err)
	}
	ss, err := e.tm.c.List(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range ss {
		if s.Name == name {
			return s
		}
	}
	e.t.Fatalf("session %s not listed", name)
	return tmux.Session{}
}

func (e *env) alive(name string) bool {
	ok, err := e.tm.c.Has(context.Background(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return ok
}

func TestHeartbeat_HungSentinelIsKilledAndItsRelaunchSeen(t *testing.T) {
	e := newEnv(t, time.Now())
	old := e.newSession("sentinel")
	// Hung: the session is alive, its last heartbeat (after the session
	// started) is five minutes old.
	setMtime(t, e.l.Heartbeat("sentinel"), old.Created)
	e.clk.Set(old.Created.Add(5 * time.Minute))
	r := e.role(ModeDaemon)
	e.tick(r)
	if e.alive("sentinel") {
		t.Fatal("hung sentinel session still alive")
	}
	hm := e.events("system.heartbeat_missed")
	if len(hm) != 1 || dataOf(t, hm[0])["target"] != "sentinel" || dataOf(t, hm[0])["threshold_seconds"] != 120.0 {
		t.Fatalf("heartbeat_missed = %v", hm)
	}
	if n := len(e.messages()); n != 0 {
		t.Fatalf("alerted at once (%d messages); start gets a watchdog round first", n)
	}
	// start's watchdog relaunches it; the new role ticks.
	e.clk.Advance(30 * time.Second)
	fresh := e.newSession("sentinel")
	setMtime(t, e.l.Heartbeat("sentinel"), e.clk.Now())
	e.tick(r)
	rs := e.events("recovery.session_restarted")
	if len(rs) != 1 {
		t.Fatalf("session_restarted events = %d, want 1", len(rs))
	}
	if d := dataOf(t, rs[0]); d["target"] != "sentinel" || d["pid"] != float64(fresh.PID) {
		t.Fatalf("session_restarted data = %v, want pid %d", d, fresh.PID)
	}
	if !e.alive("sentinel") || len(e.messages()) != 0 {
		t.Fatal("healthy relaunched sentinel was killed or alerted about")
	}
	if n := len(e.events("system.heartbeat_missed")); n != 1 {
		t.Fatalf("heartbeat_missed repeated: %d", n)
	}
}

func TestHeartbeat_SentinelStillDownAfterWatchdogRoundAlerts(t *testing.T) {
	e := newEnv(t, time.Now())
	now := e.clk.Now()
	setMtime(t, e.l.Heartbeat("sentinel"), now.Add(-5*time.Minute)) // no session at all
	r := e.role(ModeDaemon)
	e.tick(r)
	if len(e.messages()) != 0 {
		t.Fatal("alerted before start had a watchdog round")
	}
	e.clk.Advance(e.cfg.WatchdogInterval + e.cfg.Chamberlain.MonitoringInterval())
	e.tick(r)
	ms := e.messages()
	if len(ms) != 1 || !strings.Contains(ms[0].Content, "sentinel") || ms[0].Urgency != doc.UrgencyNormal {
		t.Fatalf("messages = %+v", ms)
	}
	if !strings.HasPrefix(ms[0].ID, "msg-chamberlain-role-sentinel-") {
		t.Fatalf("alert id %s", ms[0].ID)
	}
}

func TestHeartbeat_KingDeadAlertsHighAtOnce(t *testing.T) {
	e := newEnv(t, time.Now())
	setMtime(t, e.l.Heartbeat("king"), e.clk.Now().Add(-3*time.Minute))
	setMtime(t, e.l.Heartbeat("envoy"), e.clk.Now()) // fresh: fine
	r := e.role(ModeDaemon)
	e.tick(r)
	ms := e.messages()
	if len(ms) != 1 || ms[0].Urgency != doc.UrgencyHigh || !strings.Contains(ms[0].Content, "king") {
		t.Fatalf("messages = %+v", ms)
	}
	// Recovery: the king ticks again → one recovered note.
	e.clk.Advance(30 * time.Second)
	setMtime(t, e.l.Heartbeat("king"), e.clk.Now())
	e.tick(r)
	e.clk.Advance(RecoverAfter)
	setMtime(t, e.l.Heartbeat("king"), e.clk.Now())
	setMtime(t, e.l.Heartbeat("envoy"), e.clk.Now())
	e.tick(r)
	if n := len(e.messages()); n != 2 {
		t.Fatalf("messages after recovery = %d, want 2", n)
	}
}

func TestAlerts_FlappingConditionDoesNotStorm(t *testing.T) {
	var sent []string
	a := &alerter{st: &AlertState{Active: map[string]*ActiveAlert{}}, repeat: 30 * time.Minute,
		send: func(kind, key, urgency, content string, at time.Time) error {
			sent = append(sent, kind)
			return nil
		}}
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	red := []condition{{Kind: KindHealth, Key: "red", Urgency: doc.UrgencyHigh, Content: "red"}}
	// CPU hovering at the red line for an hour: bad, clear, bad, clear…
	for i := 0; i < 120; i++ {
		var conds []condition
		if i%2 == 0 {
			conds = red
		}
		a.evaluate(now, []string{KindHealth}, conds)
		now = now.Add(30 * time.Second)
	}
	// One alert, one repeat at 30 min; no recovered notes (never clear for 2 min).
	if len(sent) != 2 || sent[0] != KindHealth || sent[1] != KindHealth {
		t.Fatalf("sent %v over a flapping hour, want [health health]", sent)
	}
	// It clears for good: one recovered note; a relapse within the repeat
	// window after it stays quiet.
	for i := 0; i < 6; i++ {
		a.evaluate(now, []string{KindHealth}, nil)
		now = now.Add(30 * time.Second)
	}
	a.evaluate(now, []string{KindHealth}, red)
	if len(sent) != 3 || sent[2] != KindRecovered {
		t.Fatalf("sent %v, want a recovered note and a quiet relapse", sent)
	}
}

func TestHeartbeat_NewSessionOlderHeartbeatIgnored(t *testing.T) {
	e := newEnv(t, time.Now())
	s := e.newSession("king")
	setMtime(t, e.l.Heartbeat("king"), s.Created.Add(-10*time.Minute))
	e.clk.Set(s.Created.Add(30 * time.Second))
	r := e.role(ModeDaemon)
	e.tick(r)
	if len(e.events("system.heartbeat_missed")) != 0 || len(e.messages()) != 0 {
		t.Fatal("a relaunched role's pre-session heartbeat counted as missed")
	}
}

func TestHeartbeat_DeadGeneralSoldiersKilledOthersUntouched(t *testing.T) {
	e := newEnv(t, time.Now())
	writeFile(t, e.l.GeneralManifest("gen-pr"), "name: gen-pr\ndescription: PR review\n")
	writeFile(t, e.l.GeneralManifest("gen-ops"), "name: gen-ops\ndescription: ops\n")
	tq := e.queue(layout.QTasks)
	mk := func(task, gen, soldier string) {
		if err := tq.Put(layout.InProgress, task, doc.Task{ID: task, EventID: "evt-" + task, TargetGeneral: gen, Type: "x",
			Priority: "normal", CreatedAt: doc.FormatTime(e.clk.Now()), Status: "in_progress"}); err != nil {
			t.Fatal(err)
		}
		writeFile(t, e.l.ResultSoldierID(task), soldier+"\n")
		e.newSession(soldier)
	}
	mk("task-20261121-001", "gen-pr", "soldier-1-aaa")
	mk("task-20261121-002", "gen-ops", "soldier-2-bbb")
	e.newSession("soldier-3-ccc") // registered to gen-pr only in sessions.json
	reg := sessions.New(e.l)
	for _, x := range []sessions.Entry{
		{ID: "soldier-1-aaa", TaskID: "task-20261121-001", General: "gen-pr", StartedAt: e.clk.Now()},
		{ID: "soldier-2-bbb", TaskID: "task-20261121-002", General: "gen-ops", StartedAt: e.clk.Now()},
		{ID: "soldier-3-ccc", TaskID: "task-20261121-003", General: "gen-pr", StartedAt: e.clk.Now()},
	} {
		if err := reg.Add(x); err != nil {
			t.Fatal(err)
		}
	}
	setMtime(t, e.l.Heartbeat("gen-pr"), e.clk.Now().Add(-10*time.Minute))
	setMtime(t, e.l.Heartbeat("gen-ops"), e.clk.Now())
	r := e.role(ModeDaemon)
	e.tick(r)
	// SPEC §9.14: while start may still relaunch the general (which then
	// re-attaches its soldiers), the soldiers are left alone.
	if !e.alive("soldier-1-aaa") || !e.alive("soldier-3-ccc") {
		t.Fatal("soldiers killed before start had a watchdog round to relaunch their general")
	}
	if n := len(e.events("soldier.killed")); n != 0 {
		t.Fatalf("soldier.killed events = %d before giving up, want 0", n)
	}
	// A watchdog round later the general is still gone: start gave up.
	e.clk.Advance(r.cfg.WatchdogInterval + r.c.MonitoringInterval())
	setMtime(t, e.l.Heartbeat("gen-ops"), e.clk.Now())
	e.tick(r)
	if e.alive("soldier-1-aaa") || e.alive("soldier-3-ccc") {
		t.Fatal("soldiers of the dead general survive")
	}
	if !e.alive("soldier-2-bbb") {
		t.Fatal("a live general's soldier was killed")
	}
	sk := e.events("soldier.killed")
	if len(sk) != 2 {
		t.Fatalf("soldier.killed events = %d, want 2", len(sk))
	}
	for _, ev := range sk {
		if d := dataOf(t, ev); d["reason"] != "general_dead" || d["general"] != "gen-pr" {
			t.Fatalf("soldier.killed data = %v", d)
		}
	}
	ms := e.messages()
	if len(ms) != 1 || !strings.Contains(ms[0].Content, "gen-pr") || ms[0].Urgency != doc.UrgencyNormal {
		t.Fatalf("messages = %+v", ms)
	}
}

func TestSessions_HundredEntriesOneTmuxProcess(t *testing.T) {
	e := newEnv(t, time.Now())
	reg := sessions.New(e.l)
	var es []sessions.Entry
	for i := 0; i < 100; i++ {
		id := fmt.Sprintf("soldier-%d-x%02d", 1700000000+i, i)
		es = append(es, sessions.Entry{ID: id, TaskID: fmt.Sprintf("task-20261121-%03d", i), General: "gen-pr", StartedAt: e.clk.Now().Add(-time.Hour)})
		if i%2 == 0 {
			e.newSession(id)
		}
	}
	young := sessions.Entry{ID: "soldier-1-young", TaskID: "task-20261121-999", General: "gen-pr", StartedAt: e.clk.Now().Add(-time.Minute)}
	if err := reg.Replace(append(es, young)); err != nil {
		t.Fatal(err)
	}
	r := e.role(ModeDaemon)
	e.tm.calls.Store(0)
	e.tick(r)
	if n := e.tm.calls.Load(); n != 1 {
		t.Fatalf("tmux processes in the tick = %d, want 1", n)
	}
	got, err := reg.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 51 {
		t.Fatalf("registry holds %d entries, want 50 live + 1 young", len(got))
	}
	for _, x := range got {
		if x.ID != young.ID && !e.alive(x.ID) {
			t.Fatalf("kept %s without a session", x.ID)
		}
	}
	if n := len(e.events("system.session_orphaned")); n != 50 {
		t.Fatalf("session_orphaned events = %d, want 50", n)
	}
	sc := e.events("recovery.sessions_cleaned")
	if len(sc) != 1 || dataOf(t, sc[0])["removed_count"] != 50.0 {
		t.Fatalf("sessions_cleaned = %v", sc)
	}
	if r.Last.Resources.Sessions.SoldiersActive != 51 {
		t.Fatalf("soldiers_active = %d", r.Last.Resources.Sessions.SoldiersActive)
	}
}

func TestSessions_UnregisteredOldSoldierKilledYoungKept(t *testing.T) {
	e := newEnv(t, time.Now())
	orphan := e.newSession("soldier-1-orphan")
	e.newSession("soldier-2-owned")
	e.newSession("gen-pr") // not a soldier: never touched
	if err := sessions.New(e.l).Add(sessions.Entry{ID: "soldier-2-owned", TaskID: "task-20261121-001", General: "gen-pr", StartedAt: orphan.Created}); err != nil {
		t.Fatal(err)
	}
	r := e.role(ModeDaemon)
	e.clk.Set(orphan.Created.Add(5 * time.Minute)) // younger than the 10 min grace
	e.tick(r)
	if !e.alive("soldier-1-orphan") {
		t.Fatal("young unregistered soldier killed")
	}
	e.clk.Set(orphan.Created.Add(11 * time.Minute))
	e.tick(r)
	if e.alive("soldier-1-orphan") {
		t.Fatal("old unregistered soldier survives")
	}
	if !e.alive("soldier-2-owned") || !e.alive("gen-pr") {
		t.Fatal("registered soldier or role session killed")
	}
	sk := e.events("recovery.session_killed")
	if len(sk) != 1 || dataOf(t, sk[0])["soldier_id"] != "soldier-1-orphan" {
		t.Fatalf("session_killed = %v", sk)
	}
}
