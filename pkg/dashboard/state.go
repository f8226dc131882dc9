package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/status"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
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
	Pause       PauseInfo                 `json:"pause"`
	EnginePause []EnginePauseInfo         `json:"engine_pause"`
	Errors      []string                  `json:"errors"`
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
	CostUSD        *float64 `json:"cost_usd"` // spent so far by the task's earlier attempts; null: unknown
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

// BudgetInfo is the daily budget against today's spend.
type BudgetInfo struct {
	DailyUSD      *float64 `json:"daily_usd"`
	SpentTodayUSD *float64 `json:"spent_today_usd"`
	Percent       *float64 `json:"percent"`
}

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
	st, err := s.Snapshot(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	enc.Encode(st)
}

// Snapshot reads the state of the kingdom now.
func (s *Server) Snapshot(ctx context.Context) (*State, error) {
	now := s.clk.Now()
	st := &State{
		GeneratedAt: schema.FormatTime(now),
		Roles:       []RoleInfo{},
		Soldiers:    []SoldierInfo{},
		RecentTasks: []TaskInfo{},
		EnginePause: []EnginePauseInfo{},
		Errors:      []string{},
	}
	var k *status.Kingdom
	var err error
	if s.o.Tmux != nil {
		k, err = status.Read(ctx, s.l, s.o.Tmux, now)
	} else {
		err = errors.New("no tmux client")
	}
	if err != nil {
		// Without tmux the rest still reads: sessions show as down.
		st.Errors = append(st.Errors, "tmux sessions: "+err.Error())
		k, _ = status.Read(ctx, s.l, noSessions{}, now)
	}
	if k.StartPID > 0 {
		st.Start = StartInfo{Running: true, PID: k.StartPID}
	}
	for _, r := range k.Roles {
		ri := RoleInfo{Name: r.Name, SessionAlive: r.SessionAlive, LeaderPID: r.LeaderPID}
		if r.HeartbeatAge >= 0 {
			a := r.HeartbeatAge.Seconds()
			ri.HeartbeatAgeSeconds = &a
			ri.Up = r.SessionAlive && r.HeartbeatAge <= s.o.HeartbeatThreshold
		}
		st.Roles = append(st.Roles, ri)
	}
	st.Queues = k.Queues
	for _, e := range k.Soldiers {
		si := SoldierInfo{ID: e.ID, TaskID: e.TaskID, General: e.General,
			StartedAt: schema.FormatTime(e.StartedAt), ElapsedSeconds: now.Sub(e.StartedAt).Seconds()}
		if t := s.readTask(layout.InProgress, e.TaskID); t != nil {
			si.Title = t.title()
			si.CostUSD = t.CostUSD
		}
		st.Soldiers = append(st.Soldiers, si)
	}
	st.RecentTasks = s.recentTasks(s.o.RecentTasks)
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
	st.Budget = BudgetInfo{DailyUSD: s.o.DailyBudgetUSD, SpentTodayUSD: st.Tokens.DailyCostUSD}
	if b, sp := st.Budget.DailyUSD, st.Budget.SpentTodayUSD; b != nil && sp != nil && *b > 0 {
		p := *sp / *b * 100
		st.Budget.Percent = &p
	}
	st.Pause = readPause(s.l)
	st.EnginePause = readEnginePause(s.l, now)
	return st, nil
}

type noSessions struct{}

func (noSessions) List(context.Context) ([]tmux.Session, error) { return nil, nil }

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
	CostUSD       *float64       `json:"cost_usd"`
}

// titleKeys are the payload fields that name a task, most specific first.
var titleKeys = []string{"subject_title", "title", "summary", "text", "ticket_key"}

func (t *taskFile) title() string {
	for _, k := range titleKeys {
		if v, ok := t.Payload[k].(string); ok && strings.TrimSpace(v) != "" {
			return clip(v, 200)
		}
	}
	return t.Type
}

// resultFile is the part of a final result the dashboard shows (SPEC §3.3,
// §10.6: cost_usd and usage are optional).
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
	Usage           *usage   `json:"usage"`
}

type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

const maxFile = 1 << 20

func (s *Server) readTask(state, id string) *taskFile {
	if !ids.Valid(id) {
		return nil // sessions.json is data: an id becomes a path only once valid
	}
	b, err := queue.ReadLimited(filepath.Join(s.l.QueueState(layout.QTasks, state), id+".json"), maxFile)
	if err != nil {
		return nil
	}
	var t taskFile
	if json.Unmarshal(b, &t) != nil {
		return nil
	}
	return &t
}

func readResult(l layout.Layout, task string) *resultFile {
	if !ids.Valid(task) {
		return nil
	}
	b, err := queue.ReadLimited(l.ResultFinal(task), maxFile)
	if err != nil {
		return nil
	}
	var r resultFile
	if json.Unmarshal(b, &r) != nil {
		return nil
	}
	return &r
}

// recentTasks are the newest n tasks in tasks/completed/ (by the time they
// got there), each with its final result when it is still on disk.
func (s *Server) recentTasks(n int) []TaskInfo {
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
		ti := TaskInfo{ID: c.id, CompletedAt: schemaTime(c.mt)}
		t := s.readTask(layout.Completed, c.id)
		if t != nil {
			ti.General, ti.Type, ti.Title, ti.Outcome = t.TargetGeneral, t.Type, t.title(), t.Status
			ti.CostUSD = t.CostUSD
		}
		if r := readResult(s.l, c.id); r != nil {
			ti.Outcome = r.Status
			ti.ErrorReason = r.ErrorReason
			ti.DurationSeconds = r.DurationSeconds
			if r.CostUSD != nil {
				ti.CostUSD = r.CostUSD
			}
			if r.CompletedAt != "" {
				ti.CompletedAt = r.CompletedAt
			}
			if ti.General == "" {
				ti.General = r.General
			}
			ti.Summary = clip(plainSummary(r), 500)
		}
		out = append(out, ti)
	}
	return out
}

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
	return strings.Join(keep, " — ")
}

func schemaTime(t time.Time) string { return schema.FormatTime(t) }

// clip shortens s to at most n runes, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// readPause reports the operator's pause (SPEC §10.11) from the king's
// control state. An installation that has no pause support yet reads as
// running when the control directory exists, else unknown.
func readPause(l layout.Layout) PauseInfo {
	paused := filepath.Join(l.StateDir(), "king", "paused")
	if fi, err := os.Stat(paused); err == nil {
		p := PauseInfo{State: "paused", Since: schemaTime(fi.ModTime())}
		if b, err := queue.ReadLimited(paused, 4096); err == nil {
			p.Detail = clip(strings.TrimSpace(string(b)), 200)
		}
		return p
	} else if !errors.Is(err, fs.ErrNotExist) {
		return PauseInfo{State: "unknown", Detail: err.Error()}
	}
	return PauseInfo{State: "unknown"}
}

// readEnginePause reads state/king/engine-pause.json {engine: {until,
// reason}} (SPEC §10.8); missing means no engine is paused.
func readEnginePause(l layout.Layout, now time.Time) []EnginePauseInfo {
	out := []EnginePauseInfo{}
	b, err := queue.ReadLimited(filepath.Join(l.StateDir(), "king", "engine-pause.json"), maxFile)
	if err != nil {
		return out
	}
	var m map[string]struct {
		Until  string `json:"until"`
		Reason string `json:"reason"`
	}
	if json.Unmarshal(b, &m) != nil {
		return out
	}
	for eng, p := range m {
		e := EnginePauseInfo{Engine: eng, Until: p.Until, Reason: clip(p.Reason, 300)}
		if t, err := time.Parse(time.RFC3339, p.Until); err == nil {
			e.Active = t.After(now)
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Engine < out[j].Engine })
	return out
}
