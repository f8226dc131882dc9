package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

func TestCheckListen_OutsideLoopbackNeedsAToken(t *testing.T) {
	for _, tc := range []struct {
		listen, token string
		ok            bool
	}{
		{"127.0.0.1:8765", "", true},
		{"127.0.0.2:0", "", true},
		{"[::1]:8765", "", true},
		{"localhost:8765", "", true},
		{"0.0.0.0:8765", "", false},
		{":8765", "", false},
		{"192.168.1.5:8765", "", false},
		{"[::]:8765", "", false},
		{"0.0.0.0:8765", "s3cret", true},
		{"nonsense", "", false},
	} {
		err := config.CheckListen(tc.listen, tc.token, "KINGDOM_HTTP_TOKEN")
		if (err == nil) != tc.ok {
			t.Errorf("CheckListen(%q, token=%v) = %v, want ok=%v", tc.listen, tc.token != "", err, tc.ok)
		}
		if !tc.ok && tc.listen != "nonsense" && (!errors.Is(err, config.ErrTokenRequired) || !strings.Contains(err.Error(), "$KINGDOM_HTTP_TOKEN")) {
			t.Errorf("CheckListen(%q): %v, want ErrTokenRequired naming the variable", tc.listen, err)
		}
	}
	if _, err := New(Options{Layout: newBase(t), Listen: "0.0.0.0:0"}); !errors.Is(err, config.ErrTokenRequired) {
		t.Fatalf("New without token outside loopback: %v", err)
	}
}

func get(t testing.TB, url string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAuth_TokenRequiredOnEveryPath(t *testing.T) {
	l := newBase(t)
	_, url := startServer(t, Options{Layout: l, Token: "tok-123"})
	for _, p := range []string{"/", "/api/v1/state", "/api/v1/events", "/metrics"} {
		if code, _ := get(t, url+p); code != http.StatusUnauthorized {
			t.Errorf("%s without token: %d, want 401", p, code)
		}
		if code, _ := get(t, url+p, "Authorization", "Bearer tok-12"); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d, want 401", p, code)
		}
	}
	if code, _ := get(t, url+"/api/v1/state", "Authorization", "Bearer tok-123"); code != http.StatusOK {
		t.Errorf("state with the token: %d", code)
	}
	req, _ := http.NewRequest("GET", url+"/", nil)
	req.SetBasicAuth("anyone", "tok-123")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("page with the token as Basic password: %d", resp.StatusCode)
	}
	c := openSSE(t, url+"/api/v1/events", "", "Authorization", "Bearer tok-123")
	c.WaitComment(t, "kingdom events from")
}

func scrape(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, url+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return fams
}

func metricValue(t testing.TB, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s", name)
	}
	for _, m := range f.Metric {
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

func TestMetrics_ParseAndMoveWithATask(t *testing.T) {
	l := newBase(t)
	_, url := startServer(t, Options{Layout: l})
	q := filesQueue(t, l, layout.QEvents)
	q.Put(layout.Pending, "evt-1", validEvent("evt-1"))
	os.WriteFile(l.Resources(), []byte(`{"timestamp":"`+time.Now().UTC().Format(time.RFC3339)+`","system":{"cpu_percent":10,"memory_percent":10,"disk_percent":10,"load_average":[0,0,0]},"sessions":{"soldiers_active":0,"soldiers_max":3,"list":[]},"health":"yellow"}`), 0o600)

	before := scrape(t, url)
	if v := metricValue(t, before, "kingdom_queue_depth", "queue", "events", "state", "pending"); v != 1 {
		t.Errorf("events pending = %v, want 1", v)
	}
	if v := metricValue(t, before, "kingdom_health_level"); v != 1 {
		t.Errorf("health level = %v, want 1 (yellow)", v)
	}
	if v := metricValue(t, before, "kingdom_tasks_total", "outcome", "success"); v != 0 {
		t.Errorf("tasks success before = %v", v)
	}
	if v := metricValue(t, before, "kingdom_role_up", "role", "king"); v != 0 {
		t.Errorf("king up with no session = %v", v)
	}

	// A task finishes the way the king reports it: its final result on
	// disk and task.completed in events.log with the task's totals (§10.6).
	os.WriteFile(l.ResultFinal("task-20261124-001"), []byte(`{"task_id":"task-20261124-001","status":"success","summary":"ok","general":"gen-pr","duration_seconds":42,"completed_at":"2026-11-24T10:00:00Z","retry_count":0,"cost_usd":0.25,"usage":{"input_tokens":1000,"output_tokens":200,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}`), 0o600)
	em := emitter(l, "gen-pr")
	defer em.Close()
	em.Emit("task.completed", map[string]any{"task_id": "task-20261124-001", "status": "success", "duration_seconds": 42, "general": "gen-pr",
		"cost_usd": 0.25, "usage": map[string]any{"input_tokens": 1000, "output_tokens": 200, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}, "attempts_costed": 1})
	em.Emit("message.sent", map[string]any{"msg_id": "msg-chamberlain-dead-king-1700000000"})
	em.Emit("message.sent", map[string]any{"msg_id": "msg-chamberlain-report-20261124-1700000000"})
	em.Emit("system.rate_limited", map[string]any{"engine": "claude", "until": "2026-11-24T12:00:00Z"})

	after := scrape(t, url)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"kingdom_tasks_total", []string{"outcome", "success"}, 1},
		{"kingdom_task_duration_seconds", nil, 1},
		{"kingdom_cost_usd_total", nil, 0.25},
		{"kingdom_tokens_total", []string{"kind", "input"}, 1000},
		{"kingdom_tokens_total", []string{"kind", "output"}, 200},
		{"kingdom_alerts_sent_total", nil, 1},
		{"kingdom_engine_pauses_total", []string{"engine", "claude"}, 1},
		{"kingdom_internal_events_total", []string{"category", "task"}, 1},
	} {
		if v := metricValue(t, after, c.name, c.labels...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestState_ShowsTasksSoldiersAndOutsideTextVerbatim(t *testing.T) {
	l := newBase(t)
	now := time.Now()
	tasks := filesQueue(t, l, layout.QTasks)
	xss := `<img src=x onerror=alert(1)>`
	tasks.Put(layout.Completed, "task-20261124-001", validTask("task-20261124-001", "github.pr.review_requested",
		map[string]any{"subject_title": xss}, "completed"))
	os.WriteFile(l.ResultFinal("task-20261124-001"), []byte(`{"task_id":"task-20261124-001","status":"failed","summary":"<b>bold</b>","error":"boom","error_reason":"AgentFailed","general":"gen-pr","duration_seconds":7.5,"completed_at":"2026-11-24T10:00:00Z","retry_count":1,"cost_usd":1.0}`), 0o600)
	tasks.Put(layout.InProgress, "task-20261124-002", validTask("task-20261124-002", "demo", map[string]any{"text": "deploy"}, "in_progress"))
	// Today's cost ledger (the king's): task 001 cost 0.5 + 1.0 over two
	// attempts, the running task 0.1 in its first, failed attempt.
	date := spend.Date(now)
	var keys []string
	var entries []spend.Entry
	for i, e := range []spend.Entry{
		{Task: "task-20261124-001", Attempt: 0, General: "gen-pr", Engine: "claude", CostUSD: ptr(0.5), Status: "failed"},
		{Task: "task-20261124-001", Attempt: 1, General: "gen-pr", Engine: "claude", CostUSD: ptr(1.0), Status: "failed"},
		{Task: "task-20261124-002", Attempt: 0, General: "gen-pr", Engine: "claude", CostUSD: ptr(0.1), Status: "failed"},
	} {
		e.At = doc.FormatTime(now)
		keys, entries = append(keys, spend.Key(e.Task, e.Attempt, strconv.Itoa(i))), append(entries, e)
	}
	if _, err := spend.StoreDays(kv.OnStore(storeOf(t, l))).Open(t.Context(), date).Record(keys, entries); err != nil {
		t.Fatal(err)
	}
	sessions.New(l).Add(sessions.Entry{ID: "soldier-1-a", TaskID: "task-20261124-002", General: "gen-pr", StartedAt: now.Add(-90 * time.Second)})
	sessions.New(l).Add(sessions.Entry{ID: "soldier-1-b", TaskID: "../../etc/passwd", General: "gen-pr", StartedAt: now})
	os.MkdirAll(filepath.Join(l.StateDir(), "king"), 0o700)
	os.WriteFile(filepath.Join(l.StateDir(), "king", "engine-pause.json"), []byte(`{"claude":{"until":"`+now.Add(time.Hour).UTC().Format(time.RFC3339)+`","reason":"usage limit"},"codex":{"until":"2000-01-01T00:00:00Z","reason":"old"}}`), 0o600)
	_, url := startServer(t, Options{Layout: l, Budget: config.KingBudget{DailyUSD: ptr(10.0)}})

	code, body := get(t, url+"/api/v1/state")
	if code != 200 {
		t.Fatalf("state: %d %s", code, body)
	}
	if err := schema.Validate(doc.KindState, []byte(body)); err != nil {
		t.Fatalf("state does not match schemas/state.json: %v\n%s", err, body)
	}
	var st State
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.RecentTasks) != 1 {
		t.Fatalf("recent tasks %+v", st.RecentTasks)
	}
	rt := st.RecentTasks[0]
	if rt.Title != xss || rt.Outcome != "failed" || rt.ErrorReason != "AgentFailed" || *rt.DurationSeconds != 7.5 || *rt.CostUSD != 1.5 ||
		rt.Summary != "<b>bold</b> — error: boom" {
		t.Errorf("recent task %+v", rt)
	}
	if len(st.Soldiers) != 2 || st.Soldiers[0].Title != "deploy" || st.Soldiers[0].CostUSD == nil || *st.Soldiers[0].CostUSD != 0.1 ||
		st.Soldiers[0].ElapsedSeconds < 89 || st.Soldiers[1].Title != "" {
		t.Errorf("soldiers %+v", st.Soldiers)
	}
	if st.Queues["tasks"]["in_progress"] != 1 || st.Queues["tasks"]["completed"] != 1 {
		t.Errorf("queues %v", st.Queues)
	}
	if len(st.Roles) != 4 || st.Roles[0].Name != "sentinel" || st.Roles[0].HeartbeatAgeSeconds != nil {
		t.Errorf("roles %+v", st.Roles)
	}
	if len(st.EnginePause) != 2 || !st.EnginePause[0].Active || st.EnginePause[1].Active {
		t.Errorf("engine pause %+v", st.EnginePause)
	}
	if b := st.Budget; b.DailyUSD == nil || *b.DailyUSD != 10 || math.Abs(b.SpentTodayUSD-1.6) > 1e-9 || b.Attempts != 3 ||
		b.Percent == nil || math.Abs(*b.Percent-16) > 1e-9 || b.Warning || b.Exceeded || st.Health.Level != "green" || !st.Health.Missing {
		t.Errorf("budget %+v health %+v", st.Budget, st.Health)
	}
	if st.Pause.State != "running" {
		t.Errorf("pause %+v, want running (no paused.json)", st.Pause)
	}

	// The king's pause record (state/king/paused.json, pkg/control).
	if err := atomicfile.WriteJSON(l.KingPaused(), control.Pause{Since: "2026-11-24T10:00:00Z", By: "alice"}); err != nil {
		t.Fatal(err)
	}
	_, body = get(t, url+"/api/v1/state")
	st = State{}
	json.Unmarshal([]byte(body), &st)
	if st.Pause != (PauseInfo{State: "paused", Since: "2026-11-24T10:00:00Z", Detail: "by alice"}) {
		t.Errorf("pause %+v, want paused since 10:00 by alice", st.Pause)
	}
	os.WriteFile(l.KingPaused(), []byte("{broken"), 0o600)
	_, body = get(t, url+"/api/v1/state")
	st = State{}
	json.Unmarshal([]byte(body), &st)
	if st.Pause.State != "paused" {
		t.Errorf("an unreadable pause record shows %+v, want paused (never lifted by accident)", st.Pause)
	}
}

func TestPage_IsServedWithoutOutsideSources(t *testing.T) {
	l := newBase(t)
	_, url := startServer(t, Options{Layout: l})
	code, body := get(t, url+"/")
	if code != 200 || !strings.Contains(body, "<title>Kingdom</title>") {
		t.Fatalf("page: %d", code)
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "http://", "https://", "src=\""} {
		if strings.Contains(body, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	if code, _ := get(t, url+"/nope"); code != 404 {
		t.Errorf("/nope: %d", code)
	}
}

func TestStart_PortTakenIsRetriedNotFatal(t *testing.T) {
	l := newBase(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := taken.Addr().String()
	s, err := New(withStore(t, Options{Layout: l, Listen: addr, Tmux: noTmux{}, RetryBind: 20 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatalf("Start with the port taken: %v (the chamberlain must keep running)", err)
	}
	if s.Addr() != "" {
		t.Fatalf("bound %s while the port was taken", s.Addr())
	}
	taken.Close()
	deadline := time.Now().Add(60 * time.Second)
	for s.Addr() == "" {
		if time.Now().After(deadline) {
			t.Fatal("never bound after the port freed")
		}
		time.Sleep(10 * time.Millisecond) // the retry runs in the background
	}
	trustTree(t, l, addr)
	if code, _ := get(t, "http://"+addr+"/api/v1/state"); code != 200 {
		t.Fatalf("state after the late bind: %d", code)
	}
}

// validEvent and validTask are schema-valid queue documents: the queue
// rejects anything else as poison (issue #13).
func validEvent(id string) doc.Event {
	return doc.Event{ID: id, Type: "inbox.demo", Source: "inbox", Payload: map[string]any{},
		Priority: "normal", CreatedAt: doc.FormatTime(time.Now()), Status: "pending"}
}

func validTask(id, typ string, payload map[string]any, status string) map[string]any {
	b, _ := json.Marshal(doc.Task{ID: id, EventID: "evt-" + id, TargetGeneral: "gen-pr", Type: typ, Payload: payload,
		Priority: "normal", CreatedAt: doc.FormatTime(time.Now()), Status: status})
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}
