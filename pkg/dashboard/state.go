package dashboard

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/operator"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/spend"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// State is /api/v1/state (documented in schemas/state.json). Values read
// from files other roles own are optional: a file that is missing or
// unreadable shows as null or "unknown", never as an error.
type State struct {
	GeneratedAt string                    `json:"generated_at"`
	Start       StartInfo                 `json:"start"`
	Roles       []RoleInfo                `json:"roles"`
	Queues      map[string]map[string]int `json:"queues"`
	Soldiers    []SoldierInfo             `json:"soldiers"`
	RecentTasks []TaskInfo                `json:"recent_tasks"`
	Health      HealthInfo                `json:"health"`
	Tokens      TokensInfo                `json:"tokens"`
	Budget      BudgetInfo                `json:"budget"`
	Spend       SpendInfo                 `json:"spend"`
	Waits       []WaitInfo                `json:"waits"`
	// WaitsOmitted counts the held events and tasks past maxWaits.
	WaitsOmitted int               `json:"waits_omitted"`
	Pause        PauseInfo         `json:"pause"`
	EnginePause  []EnginePauseInfo `json:"engine_pause"`
	// Parks are the breaker's parks with their evidence (parks.go).
	Parks []ParkInfo `json:"parks"`
	// Cluster is the store's hosts and leaders (absent without
	// Options.Cluster).
	Cluster *ClusterInfo `json:"cluster,omitempty"`
	// Verdict is the chamberlain's latest verdict (absent without
	// Options.Verdict, or before its first tick).
	Verdict *Verdict `json:"verdict,omitempty"`
	Errors  []string `json:"errors"`
}

// Verdict is the chamberlain's judgement of the kingdom, as chamberlain
// --once prints it.
type Verdict struct {
	At string `json:"at"`
	// Exit is --once's exit code: 0 all well, 1 degraded, 2 down, 3
	// cannot evaluate.
	Exit int `json:"exit"`
	// Problems names each reason Exit is not 0 ("store store unreachable
	// since …", "host b lost since …").
	Problems []string `json:"problems"`
	// Roles is each role's state where it is not plain up: "standby
	// (leader on b)", "store unreachable since …: …", "down: no tmux
	// session".
	Roles map[string]string `json:"roles"`
}

// ClusterInfo is every host of the cluster and the leader of each leader
// role (SPEC §11.7 "Operators").
type ClusterInfo struct {
	Hosts   []HostInfo   `json:"hosts"`
	Leaders []LeaderInfo `json:"leaders"`
}

// HostInfo is one host of the registry.
type HostInfo struct {
	ID                string  `json:"id"`
	RenewalAgeSeconds float64 `json:"renewal_age_seconds"`
	Alive             bool    `json:"alive"`
	Version           string  `json:"version"`
}

// LeaderInfo is who leads one leader role.
type LeaderInfo struct {
	Role  string `json:"role"`
	Host  string `json:"host"`
	Epoch int64  `json:"epoch"`
	Since string `json:"since"`
}

// cluster reads the cluster for the state document and /metrics: every
// host, the leaders held now (by role), and what could not be read. Nil
// without Options.Cluster.
func (s *Server) cluster(ctx context.Context) (*ClusterInfo, []string) {
	if s.o.Cluster == nil {
		return nil, nil
	}
	c := operator.ReadCluster(ctx, s.o.Store, *s.o.Cluster)
	ci := &ClusterInfo{Hosts: []HostInfo{}, Leaders: []LeaderInfo{}}
	for _, h := range c.Hosts {
		ci.Hosts = append(ci.Hosts, HostInfo{ID: h.ID, RenewalAgeSeconds: h.Age.Seconds(), Alive: h.Alive, Version: h.Version})
	}
	for _, role := range slices.Sorted(maps.Keys(c.Leaders)) {
		if l := c.Leaders[role]; l.Held {
			ci.Leaders = append(ci.Leaders, LeaderInfo{Role: role, Host: l.Holder, Epoch: l.Epoch, Since: doc.FormatTime(l.Since)})
		}
	}
	if c.Err != nil {
		return ci, []string{"cluster: " + c.Err.Error()}
	}
	return ci, nil
}

// StartInfo is the launcher.
type StartInfo struct {
	Running bool `json:"running"`
	PID     int  `json:"pid,omitempty"`
}

// RoleInfo is one role's liveness.
type RoleInfo struct {
	Name                string   `json:"name"`
	SessionAlive        bool     `json:"session_alive"`
	HeartbeatAgeSeconds *float64 `json:"heartbeat_age_seconds"` // null: never beat
	LeaderPID           int      `json:"leader_pid,omitempty"`
	Up                  bool     `json:"up"`
}

// SoldierInfo is one running soldier.
type SoldierInfo struct {
	ID             string   `json:"id"`
	TaskID         string   `json:"task_id"`
	General        string   `json:"general"`
	Title          string   `json:"title"`
	StartedAt      string   `json:"started_at"`
	ElapsedSeconds float64  `json:"elapsed_seconds"`
	CostUSD        *float64 `json:"cost_usd"` // spent so far by the task's finished attempts (today's ledger); null: none recorded
}

// TaskInfo is one finished task.
type TaskInfo struct {
	ID              string   `json:"id"`
	General         string   `json:"general"`
	Type            string   `json:"type"`
	Title           string   `json:"title"`
	Outcome         string   `json:"outcome"`
	ErrorReason     string   `json:"error_reason,omitempty"`
	DurationSeconds *float64 `json:"duration_seconds"`
	CostUSD         *float64 `json:"cost_usd"`
	Summary         string   `json:"summary"`
	CompletedAt     string   `json:"completed_at"`
}

// HealthInfo is the resource health the chamberlain measured.
type HealthInfo struct {
	Level         string      `json:"level"`
	Reason        string      `json:"reason"`
	Stale         bool        `json:"stale"`
	Missing       bool        `json:"missing"`
	AgeSeconds    float64     `json:"age_seconds"`
	CPUPercent    *float64    `json:"cpu_percent"`
	MemoryPercent *float64    `json:"memory_percent"`
	DiskPercent   *float64    `json:"disk_percent"`
	LoadAverage   *[3]float64 `json:"load_average"`
}

// TokensInfo is today's token use and its status.
type TokensInfo struct {
	Status            string   `json:"status"`
	DailyCostUSD      *float64 `json:"daily_cost_usd"`
	DailyInputTokens  *int64   `json:"daily_input_tokens"`
	DailyOutputTokens *int64   `json:"daily_output_tokens"`
}

// BudgetInfo is king.yaml's daily budget against today's spend in the
// king's ledger (SPEC §10.6, §10.7).
type BudgetInfo struct {
	DailyUSD      *float64 `json:"daily_usd"`
	DailyTokens   *int64   `json:"daily_tokens"`
	SpentTodayUSD float64  `json:"spent_today_usd"`
	TokensToday   int64    `json:"tokens_today"`
	Attempts      int      `json:"attempts_today"`
	Percent       *float64 `json:"percent"` // of the tighter daily limit; null without one
	Warning       bool     `json:"warning"`
	Exceeded      bool     `json:"exceeded"`
}

// SpendInfo is the state of today's spend ledger (pkg/spend).
type SpendInfo struct {
	Date string `json:"date"`
	// Damaged counts its records that cannot be read (0 when whole): the
	// day's figures are then a lower bound, and while a daily budget is set
	// the king starts no task until the ledger is repaired.
	Damaged int `json:"damaged"`
}

// WaitInfo is one held event or task, from the king's record (pkg/waits).
type WaitInfo struct {
	EventID string `json:"event_id,omitempty"`
	TaskID  string `json:"task_id,omitempty"`
	Reason  string `json:"reason"`
	Detail  string `json:"detail"`
	Since   string `json:"since,omitempty"`
	Until   string `json:"until,omitempty"`
}

// maxWaits bounds the waits a state document carries: a held backlog can
// be thousands of events, and the page polls the document every few
// seconds.
const maxWaits = 100

// PauseInfo is the operator's pause (SPEC §10.11).
type PauseInfo struct {
	State  string `json:"state"` // running | paused | unknown
	Since  string `json:"since,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// EnginePauseInfo is one engine held back by a usage limit (SPEC §10.8).
type EnginePauseInfo struct {
	Engine string `json:"engine"`
	Until  string `json:"until"`
	Reason string `json:"reason"`
	Active bool   `json:"active"`
}

func (s *Server) handleState(w http.ResponseWriter, r *http.Request) {
	st := s.Snapshot(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	enc.Encode(st)
}

// Snapshot reads the state of the kingdom now.
func (s *Server) Snapshot(ctx context.Context) *State {
	now := s.clk.Now()
	st := &State{
		GeneratedAt: doc.FormatTime(now),
		Roles:       []RoleInfo{},
		Soldiers:    []SoldierInfo{},
		RecentTasks: []TaskInfo{},
		EnginePause: []EnginePauseInfo{},
		Waits:       []WaitInfo{},
		Errors:      []string{},
	}
	k, err := operator.ReadKingdom(ctx, s.l, s.o.Tmux, now, s.sh.Queues)
	if err != nil {
		// Without tmux the rest still reads: sessions show as down.
		st.Errors = append(st.Errors, "tmux sessions: "+err.Error())
	}
	if k.StartPID > 0 {
		st.Start = StartInfo{Running: true, PID: k.StartPID}
	}
	for _, r := range k.Roles {
		ri := RoleInfo{Name: r.Name, SessionAlive: r.SessionAlive, LeaderPID: r.LeaderPID}
		if r.HeartbeatAge >= 0 {
			a := r.HeartbeatAge.Seconds()
			ri.HeartbeatAgeSeconds = &a
			ri.Up = r.Up(s.o.HeartbeatThreshold)
		}
		st.Roles = append(st.Roles, ri)
	}
	st.Queues = k.Queues
	date := spend.Date(now)
	day, err := spend.StoreDays(s.sh.KV).Load(ctx, date)
	if err != nil {
		st.Errors = append(st.Errors, err.Error())
	}
	for _, e := range k.Soldiers {
		si := SoldierInfo{ID: e.ID, TaskID: e.TaskID, General: e.General,
			StartedAt: doc.FormatTime(e.StartedAt), ElapsedSeconds: now.Sub(e.StartedAt).Seconds()}
		if t := s.readTask(layout.InProgress, e.TaskID); t != nil {
			si.Title = t.title()
		}
		si.CostUSD = day.TaskTotals(e.TaskID).Priced()
		st.Soldiers = append(st.Soldiers, si)
	}
	st.RecentTasks = s.recentTasks(s.o.RecentTasks, day)
	st.Health = healthInfo(k.Health)
	if k.HealthErr != nil {
		st.Errors = append(st.Errors, k.HealthErr.Error())
	}
	st.Tokens = TokensInfo{Status: k.Health.TokenStatus}
	if res := k.Health.Resources; res != nil && res.Tokens != nil {
		t := *res.Tokens
		st.Tokens.DailyCostUSD = &t.DailyCostUSD
		st.Tokens.DailyInputTokens = &t.DailyInputTokens
		st.Tokens.DailyOutputTokens = &t.DailyOutputTokens
	}
	tot := day.Summary().Totals
	bs := spend.Evaluate(date, tot, s.o.Budget)
	st.Budget = BudgetInfo{DailyUSD: bs.DailyUSD, DailyTokens: bs.DailyTokens, SpentTodayUSD: bs.CostUSD,
		TokensToday: bs.Tokens, Attempts: tot.Attempts, Warning: bs.Warning, Exceeded: bs.Exceeded}
	if spend.Limited(s.o.Budget) {
		p := bs.Ratio * 100
		st.Budget.Percent = &p
	}
	st.Spend = SpendInfo{Date: date, Damaged: tot.Damaged}
	// The king's record is in the store, wherever the leading king runs.
	rec, err := waits.Read(ctx, s.sh.KV)
	if err != nil {
		st.Errors = append(st.Errors, "waits: "+err.Error())
	}
	st.Waits, st.WaitsOmitted = waitInfos(rec)
	st.Pause = readPause(ctx, s.sh.KV)
	st.EnginePause = readEnginePause(ctx, s.sh.KV, now)
	if st.Parks, err = readParks(ctx, s.sh.KV); err != nil {
		st.Errors = append(st.Errors, err.Error())
	}
	var errs []string
	st.Cluster, errs = s.cluster(ctx)
	st.Errors = append(st.Errors, errs...)
	if s.o.Verdict != nil {
		st.Verdict = s.o.Verdict()
	}
	return st
}

func healthInfo(h health.Snapshot) HealthInfo {
	hi := HealthInfo{Level: h.Health, Reason: h.Reason, Stale: h.Stale, Missing: h.Missing, AgeSeconds: h.Age.Seconds()}
	if r := h.Resources; r != nil {
		sys := r.System
		hi.CPUPercent, hi.MemoryPercent, hi.DiskPercent = &sys.CPUPercent, &sys.MemoryPercent, &sys.DiskPercent
		hi.LoadAverage = &sys.LoadAverage
	}
	return hi
}

// taskFile is the part of a task file the dashboard shows. Cost fields are
// optional: older files have none.
type taskFile struct {
	ID            string         `json:"id"`
	TargetGeneral string         `json:"target_general"`
	Type          string         `json:"type"`
	Payload       map[string]any `json:"payload"`
	Status        string         `json:"status"`
}

// titleKeys are the payload fields that name a task, most specific first.
var titleKeys = []string{"subject_title", "title", "summary", "text", "ticket_key"}

// title is outside text: redacted (SPEC §10.14) before it is cut, so a cut
// secret cannot leak its head.
func (t *taskFile) title() string {
	for _, k := range titleKeys {
		if v, ok := t.Payload[k].(string); ok && strings.TrimSpace(v) != "" {
			return clip(redact.String(v), 200)
		}
	}
	return t.Type
}

// resultFile is the part of a final result the dashboard shows (SPEC §3.3,
// §10.6: cost_usd is optional).
type resultFile struct {
	Status          string   `json:"status"`
	Summary         string   `json:"summary"`
	Error           string   `json:"error"`
	ErrorReason     string   `json:"error_reason"`
	Question        string   `json:"question"`
	Reason          string   `json:"reason"`
	General         string   `json:"general"`
	DurationSeconds *float64 `json:"duration_seconds"`
	CompletedAt     string   `json:"completed_at"`
	CostUSD         *float64 `json:"cost_usd"`
}

const maxFile = 1 << 20

// readJSON decodes a file another role owns; nil when it is missing,
// too large or not JSON (the dashboard shows what it can).
func readJSON[T any](path string) *T {
	b, err := queue.ReadLimited(path, maxFile)
	if err != nil {
		return nil
	}
	var v T
	if json.Unmarshal(b, &v) != nil {
		return nil
	}
	return &v
}

func (s *Server) readTask(state, id string) *taskFile {
	if !ids.Valid(id) {
		return nil // sessions.json is data: an id becomes a path only once valid
	}
	return readJSON[taskFile](filepath.Join(s.l.QueueState(layout.QTasks, state), id+".json"))
}

func readResult(l layout.Layout, task string) *resultFile {
	if !ids.Valid(task) {
		return nil
	}
	return readJSON[resultFile](l.ResultFinal(task))
}

// recentTasks are the newest n tasks in tasks/completed/ (by the time they
// got there), each with its final result when it is still on disk.
func (s *Server) recentTasks(n int, day *spend.Day) []TaskInfo {
	dir := s.l.QueueState(layout.QTasks, layout.Completed)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return []TaskInfo{}
	}
	type cand struct {
		id string
		mt time.Time
	}
	cs := make([]cand, 0, len(ents))
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		cs = append(cs, cand{id, fi.ModTime()})
	}
	sort.Slice(cs, func(i, j int) bool {
		if !cs[i].mt.Equal(cs[j].mt) {
			return cs[i].mt.After(cs[j].mt)
		}
		return cs[i].id > cs[j].id
	})
	out := make([]TaskInfo, 0, min(n, len(cs)))
	for _, c := range cs[:min(n, len(cs))] {
		ti := TaskInfo{ID: c.id, CompletedAt: doc.FormatTime(c.mt)}
		t := s.readTask(layout.Completed, c.id)
		if t != nil {
			ti.General, ti.Type, ti.Title, ti.Outcome = t.TargetGeneral, t.Type, t.title(), t.Status
		}
		// The task's total over its attempts when today's ledger has them,
		// else the last attempt's own figure.
		ti.CostUSD = day.TaskTotals(c.id).Priced()
		if r := readResult(s.l, c.id); r != nil {
			ti.Outcome = r.Status
			ti.ErrorReason = r.ErrorReason
			ti.DurationSeconds = r.DurationSeconds
			if ti.CostUSD == nil && r.CostUSD != nil {
				ti.CostUSD = r.CostUSD
			}
			if r.CompletedAt != "" {
				ti.CompletedAt = r.CompletedAt
			}
			if ti.General == "" {
				ti.General = r.General
			}
			ti.Summary = clip(plainSummary(r), 500)
			ti.ErrorReason = redact.String(ti.ErrorReason)
		}
		out = append(out, ti)
	}
	return out
}

// plainSummary is the result's words, redacted (SPEC §10.14).
func plainSummary(r *resultFile) string {
	parts := []string{r.Summary}
	switch {
	case r.Question != "":
		parts = append(parts, "question: "+r.Question)
	case r.Error != "":
		parts = append(parts, "error: "+r.Error)
	case r.Reason != "":
		parts = append(parts, "reason: "+r.Reason)
	}
	var keep []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			keep = append(keep, p)
		}
	}
	return redact.String(strings.Join(keep, " — "))
}

// clip shortens s to at most n runes, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// readPause reports the operator's pause (SPEC §10.11) from the store
// (state/king/paused.json on one machine) through pkg/control, which owns
// its format. As there, an unreadable record counts as paused: a pause is
// never shown lifted by accident.
func readPause(ctx context.Context, k kv.KV) PauseInfo {
	p, err := control.ReadPause(ctx, k)
	switch {
	case p == nil:
		return PauseInfo{State: "running"}
	case err != nil:
		return PauseInfo{State: "paused", Detail: clip("(its record is unreadable, which counts as paused: "+err.Error()+")", 300)}
	}
	pi := PauseInfo{State: "paused"}
	if p.By != "" {
		pi.Detail = clip("by "+p.By, 200)
	}
	// since is a documented date-time: a malformed one is left out.
	if _, terr := time.Parse(time.RFC3339, p.Since); terr == nil {
		pi.Since = p.Since
	}
	return pi
}

// waitInfos is the king's record of held work as the state shows it: at
// most maxWaits entries, and how many were left out.
func waitInfos(rec waits.Record) ([]WaitInfo, int) {
	out := make([]WaitInfo, 0, min(len(rec.Waits), maxWaits))
	for _, w := range rec.Waits[:min(len(rec.Waits), maxWaits)] {
		wi := WaitInfo{Reason: clip(w.Reason, 100), Detail: clip(redact.String(w.Detail), 500)}
		// Ids are shown, never used as paths; a malformed one is dropped
		// rather than displayed as an id.
		if ids.Valid(w.EventID) {
			wi.EventID = w.EventID
		}
		if ids.Valid(w.TaskID) {
			wi.TaskID = w.TaskID
		}
		if !w.Since.IsZero() {
			wi.Since = doc.FormatTime(w.Since)
		}
		if w.Until != nil && !w.Until.IsZero() {
			wi.Until = doc.FormatTime(*w.Until)
		}
		out = append(out, wi)
	}
	return out, len(rec.Waits) - len(out)
}

// readEnginePause reads the engine pauses (SPEC §10.8; on one machine
// state/king/engine-pause.json) through pkg/enginepause; missing means no
// engine is paused.
func readEnginePause(ctx context.Context, k kv.KV, now time.Time) []EnginePauseInfo {
	out := []EnginePauseInfo{}
	f, _ := enginepause.Load(ctx, k)
	for _, eng := range f.Engines() {
		p := f[eng]
		_, active := f.Active(eng, now)
		out = append(out, EnginePauseInfo{Engine: eng, Until: p.Until, Reason: clip(redact.String(p.Reason), 300), Active: active})
	}
	return out
}
