package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/internal/testkit/slackfake"
	"github.com/kingdom-dev/kingdom/internal/testkit/tcpproxy"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

// The shortest host-loss timings system.yaml accepts (pkg/config/store.go:
// both at least 10 s, takeover above self-fence).
const (
	clusterSelfFence = 10
	clusterTakeover  = 11
)

// clusterWork is the event type the cluster's one general subscribes to.
const clusterWork = "cluster.work"

// clusterSoldier is the command engine of the cluster tests: it logs when
// it starts and ends (task, pid, unix ns, base dir) to the cluster's run
// log, sleeps payload.sleep_s seconds, asks a question when the payload
// says needs_human and answers a resume; a payload with fail_once fails
// the task's first attempt as an engine that exits 3 without a result
// (EngineError, retryable; a marker file beside the run log says it ran)
// and succeeds the next. The task reaches it only through
// the prompt (the general renders the payload into it): in PostgreSQL mode
// no queue file exists for it to read.
const clusterSoldier = `#!/bin/sh
prompt="$1"; task="$3"; result="$4"; log=%q
echo "start $task $$ $(date +%%s%%N) $KINGDOM_BASE_DIR" >> "$log"
secs=$(grep -o '"sleep_s":[0-9]*' "$prompt" | head -n 1 | cut -d: -f2)
if [ -n "$secs" ]; then sleep "$secs"; fi
if grep -q '"fail_once":true' "$prompt" && [ ! -e "$log.failed-$task" ]; then
  : > "$log.failed-$task"
  echo "end $task $$ $(date +%%s%%N) $KINGDOM_BASE_DIR" >> "$log"
  echo "first attempt fails on purpose" >&2
  exit 3
fi
if grep -q '(resume)' "$prompt"; then
  printf '{"task_id":"%%s","status":"success","summary":"resumed on %%s"}' "$task" "$KINGDOM_BASE_DIR" > "$result"
elif grep -q '"needs_human":true' "$prompt"; then
  printf '{"task_id":"%%s","status":"needs_human","summary":"blocked","question":"Which environment?"}' "$task" > "$result"
else
  printf '{"task_id":"%%s","status":"success","summary":"worked"}' "$task" > "$result"
fi
echo "end $task $$ $(date +%%s%%N) $KINGDOM_BASE_DIR" >> "$log"
echo '{"type":"result","session_id":"cl-'"$task"'"}'
`

// clusterHost is one host of a cluster: a whole kingdom with its own base
// dir, tmux socket and inbox.
type clusterHost struct {
	*Kingdom
	ID    string
	Proxy *tcpproxy.Proxy // between this host and PostgreSQL, when asked for
}

// Cluster is several kingdoms sharing one PostgreSQL database (SPEC §11.7).
type Cluster struct {
	t      *testing.T
	PG     *pgtest.Server
	DSN    string    // the database, reached directly
	St     *pg.Store // the test's own view of the store
	Hosts  []*clusterHost
	RunLog string // the soldiers' start/end lines
	// Slack is the fake Slack every host's envoy posts to (clusterOpts.slack);
	// nil: the envoys write to their console logs.
	Slack *slackfake.Server
}

type clusterOpts struct {
	hosts   int
	proxied int // index of the host behind a tcpproxy; -1 for none
	// selfFence and takeover replace clusterSelfFence and clusterTakeover
	// when set; leaderStall sets store.leader_stall_seconds.
	selfFence, takeover, leaderStall int
	// crashLoop keeps the default crash-loop guard (5 deaths in 10
	// minutes), so a role dying on the weather is given up as it would be
	// in production; otherwise the guard is 1000 deaths, for the chaos
	// tests' own kills.
	crashLoop bool
	// slack points every host's envoy at one fake Slack (Cluster.Slack)
	// instead of its console log.
	slack bool
	// files replaces or adds config files on every host (path → body).
	files map[string]string
}

// clusterFiles returns a kingdom's config with the command engine at
// soldier; store is system.yaml's store section ("" for files).
func clusterFiles(soldier, store string) map[string]string {
	return map[string]string{
		"config/system.yaml": fmt.Sprintf(`runtime:
  engine: command
  command:
    argv: [%q, "{prompt_file}", "{workdir}", "{task_id}", "{result_path}"]
watchdog:
  interval_seconds: 1
  crash_loop:
    max_restarts: 1000
    window_minutes: 10
%s`, soldier, store),
		"config/sentinel.yaml":    "polling:\n  inbox:\n    interval_seconds: 1\n",
		"config/king.yaml":        "concurrency:\n  max_soldiers: 9\nretry:\n  max_attempts: 5\n  backoff_seconds: 1\n  max_backoff_seconds: 2\n",
		"config/envoy.yaml":       "slack:\n  default_channel: \"#cluster\"\nintervals:\n  outbound_seconds: 1\n",
		"config/chamberlain.yaml": "thresholds:\n  cpu_yellow: 100\n  cpu_orange: 100\n  cpu_red: 100\n  memory_yellow: 95\n  memory_orange: 98\n  memory_red: 99\n",
		"config/generals/gen-work.yaml": "name: gen-work\ndescription: cluster worker\ntimeout_seconds: 120\nmax_concurrent: 9\n" +
			"subscribes: [\"" + clusterWork + "\"]\n",
	}
}

// writeSoldier writes the cluster soldier script logging to runLog.
func writeSoldier(t *testing.T, dir, runLog string) string {
	t.Helper()
	p := filepath.Join(dir, "cluster-soldier.sh")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(clusterSoldier, runLog)), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// newCluster makes (not starts) a cluster on a PostgreSQL server of the
// test's own, so a Restart disturbs no other test.
func newCluster(t *testing.T, o clusterOpts) *Cluster {
	t.Helper()
	srv := pgtest.New(t)
	dsn := srv.DB(t)
	dir := t.TempDir()
	c := &Cluster{t: t, PG: srv, DSN: dsn, RunLog: filepath.Join(dir, "runs.log")}
	soldier := writeSoldier(t, dir, c.RunLog)
	st, err := pg.Open(context.Background(), dsn, "e2e-observer")
	if err != nil {
		t.Fatalf("open the cluster's store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	c.St = st
	if o.slack {
		c.Slack = slackfake.New()
		t.Cleanup(c.Slack.Close)
	}
	fence, takeover := clusterSelfFence, clusterTakeover
	if o.selfFence > 0 {
		fence, takeover = o.selfFence, o.takeover
	}
	for i := 0; i < o.hosts; i++ {
		id := fmt.Sprintf("h%d", i+1)
		storeYAML := fmt.Sprintf("store:\n  kind: postgres\n  host_id: %s\n  self_fence_seconds: %d\n  takeover_seconds: %d\n",
			id, fence, takeover)
		if o.leaderStall > 0 {
			storeYAML += fmt.Sprintf("  leader_stall_seconds: %d\n", o.leaderStall)
		}
		files := clusterFiles(soldier, storeYAML)
		if o.crashLoop {
			files["config/system.yaml"] = strings.Replace(files["config/system.yaml"],
				"  crash_loop:\n    max_restarts: 1000\n    window_minutes: 10\n", "", 1)
		}
		if c.Slack != nil {
			files["config/envoy.yaml"] = fmt.Sprintf("slack:\n  api_url: %q\n  default_channel: C0CLUSTER\nintervals:\n  outbound_seconds: 1\n", c.Slack.APIURL())
			files["config/kingdom.env"] = "SLACK_BOT_TOKEN=xoxb-e2e-bot\nSLACK_APP_TOKEN=xapp-e2e-app\n"
		}
		for path, body := range o.files {
			files[path] = body
		}
		h := &clusterHost{Kingdom: NewKingdom(t, files), ID: id}
		hostDSN := dsn
		if i == o.proxied {
			h.Proxy = tcpproxy.Start(t, srv.Addr())
			hostDSN = srv.Via(dsn, h.Proxy.Addr())
		}
		// Short keepalives: a cut link is noticed in seconds.
		h.Env = []string{"KINGDOM_PG_DSN=" + pgtest.WithKeepalives(hostDSN, 1, 1, 2)}
		c.Hosts = append(c.Hosts, h)
	}
	return c
}

// Start starts every host not yet started and waits for its per-host
// roles and for a king and an envoy leading somewhere (the chamberlain runs
// on every host and leads its cluster duties inside its tick). A second
// `start` on a host would meet the first one's sessions.
func (c *Cluster) Start() {
	c.t.Helper()
	for _, h := range c.Hosts {
		if h.start == nil {
			h.Start()
		}
	}
	for _, h := range c.Hosts {
		h.WaitRoles(layout.RoleSentinel, "gen-work")
	}
	c.Eventually("a leader of each leader role", 90*time.Second, func() bool {
		for _, r := range []string{layout.RoleKing, layout.RoleEnvoy} {
			if c.Leader(r) == "" {
				return false
			}
		}
		return true
	})
}

// Eventually polls cond until it holds or timeout passes.
func (c *Cluster) Eventually(what string, timeout time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Leader returns the host holding role's leadership now ("" for none).
func (c *Cluster) Leader(role string) string {
	ls, err := c.St.Leaders(context.Background())
	if err != nil {
		return ""
	}
	if li, ok := ls[role]; ok && li.Held {
		return li.Holder
	}
	return ""
}

// Host returns the host with id.
func (c *Cluster) Host(id string) *clusterHost {
	for _, h := range c.Hosts {
		if h.ID == id {
			return h
		}
	}
	c.t.Fatalf("no host %q", id)
	return nil
}

// HostOfBase maps a base dir to its host id.
func (c *Cluster) HostOfBase(base string) string {
	for _, h := range c.Hosts {
		if h.L.Base == base {
			return h.ID
		}
	}
	return "?" + base
}

// Drop writes an event into host i's inbox.
func (c *Cluster) Drop(i int, id string, payload map[string]any) {
	if payload == nil {
		payload = map[string]any{}
	}
	c.Hosts[i].DropInbox(id, map[string]any{"id": id, "type": clusterWork, "payload": payload})
}

// clusterTask is a task document as the store holds it.
type clusterTask struct {
	doc.Task
	State string
	Claim store.Claim
}

// Tasks returns every task of the store.
func (c *Cluster) Tasks() []clusterTask {
	var out []clusterTask
	for _, st := range layout.QueueStates[layout.QTasks] {
		docs, err := c.St.List(context.Background(), layout.QTasks, st)
		if err != nil {
			c.t.Fatalf("list tasks/%s: %v", st, err)
		}
		for _, d := range docs {
			var tk doc.Task
			if err := json.Unmarshal(d.Data, &tk); err != nil {
				c.t.Errorf("task %s in %s: %v", d.ID, st, err)
				continue
			}
			out = append(out, clusterTask{Task: tk, State: st, Claim: d.Claim})
		}
	}
	return out
}

// TasksByEvent groups the store's tasks by event id.
func (c *Cluster) TasksByEvent() map[string][]clusterTask {
	out := map[string][]clusterTask{}
	for _, tk := range c.Tasks() {
		out[tk.EventID] = append(out[tk.EventID], tk)
	}
	return out
}

// Count returns how many documents a queue state holds.
func (c *Cluster) Count(q, state string) int {
	docs, err := c.St.List(context.Background(), q, state)
	if err != nil {
		return -1
	}
	return len(docs)
}

// Result returns a task's final result from the store (nil when none).
func (c *Cluster) Result(task string) *doc.Result {
	b, err := c.St.Value(context.Background(), "results", task)
	if err != nil {
		return nil
	}
	var r doc.Result
	if json.Unmarshal(b, &r) != nil {
		return nil
	}
	return &r
}

// doneRE finds the ✅ of a finished task in a console log.
var doneRE = regexp.MustCompile(`✅ \S+ finished ([A-Za-z0-9._:@-]+)`)

// Dones counts ✅ notifications per task across every host's console log
// (the envoy writes to the log of the host where it leads) and, with a
// fake Slack, the ✅ posts Slack accepted.
func (c *Cluster) Dones() map[string]int {
	out := map[string]int{}
	for _, h := range c.Hosts {
		for task, n := range consoleDones(h.L) {
			out[task] += n
		}
	}
	if c.Slack != nil {
		for _, call := range c.Slack.Calls("chat.postMessage") {
			for _, m := range doneRE.FindAllStringSubmatch(call.Form.Get("text"), -1) {
				out[m[1]]++
			}
		}
	}
	return out
}

func consoleDones(l layout.Layout) map[string]int {
	out := map[string]int{}
	b, _ := os.ReadFile(l.EnvoyConsoleLog())
	for _, m := range doneRE.FindAllStringSubmatch(string(b), -1) {
		out[m[1]]++
	}
	return out
}

// run is one soldier process as the run log saw it.
type run struct {
	Task       string
	PID        int
	Host       string
	Start, End time.Time // End is zero when the process never logged its end
}

// Runs parses the run log.
func (c *Cluster) Runs() []run {
	f, err := os.Open(c.RunLog)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []run
	idx := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 5 {
			continue
		}
		pid, _ := strconv.Atoi(fs[2])
		ns, _ := strconv.ParseInt(fs[3], 10, 64)
		key := fs[1] + "/" + fs[2] + "/" + fs[4]
		switch fs[0] {
		case "start":
			idx[key] = len(out)
			out = append(out, run{Task: fs[1], PID: pid, Host: c.HostOfBase(fs[4]), Start: time.Unix(0, ns)})
		case "end":
			if i, ok := idx[key]; ok {
				out[i].End = time.Unix(0, ns)
			}
		}
	}
	return out
}

// KillHost kills host i whole, as a machine that dies: SIGKILL to start,
// to the tmux server and to every process below it (roles, soldiers and
// their agents, which run in process groups of their own).
func (c *Cluster) KillHost(i int) {
	c.t.Helper()
	h := c.Hosts[i]
	ctx := context.Background()
	var trees [][]proctree.Proc
	if ss, err := h.Tmux.List(ctx); err == nil {
		for _, s := range ss {
			trees = append(trees, proctree.Descendants(s.PID))
		}
	}
	if h.start != nil && h.start.Process != nil {
		h.start.Process.Kill()
		h.start.Wait()
		h.start = nil
	}
	for _, tr := range trees {
		proctree.Kill(tr)
	}
	h.Tmux.KillServer(ctx)
}

// KillRole SIGKILLs the process of a role's tmux session on host i and
// returns whether there was one to kill.
func (c *Cluster) KillRole(i int, role string) bool {
	pid, err := c.Hosts[i].Tmux.PanePID(context.Background(), role)
	if err != nil || pid <= 1 {
		return false
	}
	return syscall.Kill(pid, syscall.SIGKILL) == nil
}

// HostIndex returns the index of host id.
func (c *Cluster) HostIndex(id string) int {
	for i, h := range c.Hosts {
		if h.ID == id {
			return i
		}
	}
	c.t.Fatalf("no host %q", id)
	return -1
}

// watchDeaths polls the pids of the run log until stop is closed and
// records when each process was first seen gone: a soldier killed by a
// signal logs no end of its own.
type deathWatch struct {
	mu   sync.Mutex
	dead map[int]time.Time
	stop chan struct{}
	done chan struct{}
}

func (c *Cluster) watchDeaths() *deathWatch {
	w := &deathWatch{dead: map[int]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			for _, r := range c.Runs() {
				w.mu.Lock()
				_, seen := w.dead[r.PID]
				w.mu.Unlock()
				if !seen && !proctree.Alive(r.PID) {
					w.mu.Lock()
					w.dead[r.PID] = time.Now()
					w.mu.Unlock()
				}
			}
		}
	}()
	return w
}

// Stop ends the watch and returns the death times by pid.
func (w *deathWatch) Stop() map[int]time.Time {
	close(w.stop)
	<-w.done
	return w.dead
}

// checkExactlyOnce asserts that each event has exactly one task, completed,
// with exactly one ✅ across the hosts.
func (c *Cluster) checkExactlyOnce(events []string) {
	c.t.Helper()
	byEvent := c.TasksByEvent()
	dones := c.Dones()
	for _, ev := range events {
		ts := byEvent[ev]
		if len(ts) != 1 {
			c.t.Errorf("event %s has %d tasks, want exactly one", ev, len(ts))
			continue
		}
		if ts[0].State != layout.Completed {
			c.t.Errorf("task %s of %s is %s, want completed", ts[0].ID, ev, ts[0].State)
		}
		if n := dones[ts[0].ID]; n != 1 {
			c.t.Errorf("task %s of %s has %d ✅ across the hosts, want 1", ts[0].ID, ev, n)
		}
	}
}

// allDone reports whether every event has a completed task with its ✅.
func (c *Cluster) allDone(events []string) bool {
	byEvent := c.TasksByEvent()
	dones := c.Dones()
	for _, ev := range events {
		ts := byEvent[ev]
		if len(ts) == 0 || ts[0].State != layout.Completed || dones[ts[0].ID] == 0 {
			return false
		}
	}
	return true
}

// Once runs `chamberlain --once --json` on host i as its operator would
// (the host's environment, its base dir and tmux socket) and returns its
// combined output and exit code.
func (c *Cluster) Once(i int) (string, int) {
	c.t.Helper()
	h := c.Hosts[i]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "chamberlain"), "--once", "--json")
	cmd.Env = append(append(cleanEnv(), "KINGDOM_TMUX_SOCKET="+h.Tmux.Socket, "KINGDOM_BASE_DIR="+h.L.Base), h.Env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		c.t.Fatalf("run chamberlain --once on %s: %v", h.ID, err)
	}
	return string(out), 0
}

// GivenUp returns every sign that start gave a role up on some host: its
// "role keeps dying" lines (start.out, logs/system.log) and the event
// log's system.crash_loop rows.
func (c *Cluster) GivenUp() []string {
	var out []string
	for _, h := range c.Hosts {
		for _, f := range []string{filepath.Join(h.L.Base, "start.out"), h.L.SystemLog()} {
			b, _ := os.ReadFile(f)
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "role keeps dying") {
					out = append(out, h.ID+": "+line)
				}
			}
		}
	}
	for _, e := range c.EventsOf("system.crash_loop") {
		out = append(out, "event log: "+e.Type+" "+string(e.Data))
	}
	return out
}

// LogLines returns the lines of host i's logs/system.log holding every
// one of subs.
func (c *Cluster) LogLines(i int, subs ...string) []string {
	b, _ := os.ReadFile(c.Hosts[i].L.SystemLog())
	var out []string
next:
	for _, line := range strings.Split(string(b), "\n") {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

// EventsOf returns the event log's rows of type typ (none when the store
// does not answer).
func (c *Cluster) EventsOf(typ string) []store.Event {
	var out []store.Event
	cur := ""
	for {
		evs, err := c.St.Events(context.Background(), store.Cursor(cur), 500)
		if err != nil || len(evs) == 0 {
			return out
		}
		for _, e := range evs {
			if e.Type == typ {
				out = append(out, e)
			}
		}
		cur = string(evs[len(evs)-1].Cursor)
	}
}

// eventTime parses an event's store-stamped ts.
func eventTime(e store.Event) time.Time {
	ts, _ := time.Parse(time.RFC3339Nano, e.TS)
	return ts
}

// FirstAfter returns the earliest row of type typ stamped after t (zero
// when none yet).
func (c *Cluster) FirstAfter(typ string, t time.Time) time.Time {
	var first time.Time
	for _, e := range c.EventsOf(typ) {
		if ts := eventTime(e); ts.After(t) && (first.IsZero() || ts.Before(first)) {
			first = ts
		}
	}
	return first
}

// appHostRE takes the host out of an application_name
// (kingdom-<role>@<host>, its listener's with "/listen" after it).
var appHostRE = regexp.MustCompile(`@([^/@]+)(/listen)?$`)

// ConnectionsByApp counts the server connections to the cluster's
// database by application_name ("" for the test's own and unnamed ones).
func (c *Cluster) ConnectionsByApp() (map[string]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT coalesce(application_name, '') FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var app string
		if err := rows.Scan(&app); err != nil {
			return nil, err
		}
		out[app]++
	}
	return out, rows.Err()
}

// Connections counts the server connections to the cluster's database per
// host, by application_name (the test's own and unnamed ones under "?").
func (c *Cluster) Connections() (map[string]int, error) {
	byApp, err := c.ConnectionsByApp()
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for app, n := range byApp {
		host := "?"
		if m := appHostRE.FindStringSubmatch(app); m != nil {
			host = m[1]
		}
		out[host] += n
	}
	return out, nil
}

// poolLimit is pg.Options.MaxConns' default: the pool of one process.
const poolLimit = 3

// logConnections logs the connections per host and per process as a
// figure, beside the limit: each process's pool (poolLimit) plus a
// connection for each lease it holds (leaders of king, envoy, the
// chamberlain's cluster duties, the sentinel's pollers, start's host
// lease) and a standby's lead attempt; its listener has one of its own
// (application_name ending "/listen").
func (c *Cluster) logConnections(when string) {
	c.t.Helper()
	byApp, err := c.ConnectionsByApp()
	if err != nil {
		c.t.Logf("count connections %s: %v", when, err)
		return
	}
	perHost := map[string]int{}
	procs, listeners := map[string]int{}, map[string]int{}
	apps := make([]string, 0, len(byApp))
	maxApp := 0
	for app, n := range byApp {
		host := "?"
		if m := appHostRE.FindStringSubmatch(app); m != nil {
			host = m[1]
			if strings.HasSuffix(app, "/listen") {
				listeners[host]++
			} else {
				procs[host]++
				maxApp = max(maxApp, n)
			}
		}
		perHost[host] += n
		apps = append(apps, fmt.Sprintf("%s=%d", app, n))
	}
	slices.Sort(apps)
	leases := map[string]int{}
	if ls, err := c.St.Leaders(context.Background()); err == nil {
		for _, li := range ls {
			if li.Held {
				leases[li.Holder]++
			}
		}
	}
	bounds := map[string]string{}
	for host, p := range procs {
		bounds[host] = fmt.Sprintf("%d (%d processes × MaxConns %d + %d listeners + %d leases held)",
			p*poolLimit+listeners[host]+leases[host], p, poolLimit, listeners[host], leases[host])
	}
	c.t.Logf("FIGURE: server connections per host %s: %v (by application_name; ? is the test's own and unnamed); "+
		"bound per host %v (a standby's lead attempt may add one for a moment); the most of one process (listener apart) %d, "+
		"beside its pool's MaxConns %d plus one per lease it holds", when, perHost, bounds, maxApp, poolLimit)
	c.t.Logf("connections by application_name %s: %s", when, strings.Join(apps, " "))
}

// SoldierSessions returns host i's soldier tmux sessions.
func (c *Cluster) SoldierSessions(i int) []string {
	ss, _ := c.Hosts[i].Tmux.List(context.Background())
	var out []string
	for _, s := range ss {
		if strings.HasPrefix(s.Name, "soldier-") {
			out = append(out, s.Name)
		}
	}
	return out
}

// Completed counts the completed tasks (-1 when the store does not
// answer).
func (c *Cluster) Completed() int { return c.Count(layout.QTasks, layout.Completed) }
