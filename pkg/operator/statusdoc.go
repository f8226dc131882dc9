package operator

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// Exit codes of `start status`, the same as `chamberlain --once`'s (SPEC
// §10.12) so one monitoring rule reads both.
const (
	StatusOK       = 0 // every role up, health green
	StatusDegraded = 1 // a general down, health yellow/orange (or stale), start not running, paused, or a park
	StatusDown     = 2 // sentinel, king, envoy or chamberlain down, or health red
)

// Problem is one reason the status is not 0.
type Problem struct {
	Role   string `json:"role,omitempty"`
	Check  string `json:"check,omitempty"`
	Reason string `json:"reason"`
}

// Verdict is the exit code and the problems behind it.
type Verdict struct {
	Exit     int       `json:"exit"`
	Problems []Problem `json:"problems"`
}

// heartbeatThreshold is the chamberlain's: a role whose last sign of life
// is older is down. A config that does not load gives the default.
func heartbeatThreshold(l layout.Layout) time.Duration {
	if c, err := config.LoadChamberlain(l.ConfigFile(config.ChamberlainFile)); err == nil {
		return c.HeartbeatThreshold()
	}
	return config.DefaultChamberlain().HeartbeatThreshold()
}

// roleDown says why a role is down, or "" when it is up. Without tmux's
// answer (TmuxErr) its heartbeat alone says: a live role is never "down"
// for a socket this shell cannot reach.
func (s *Status) roleDown(r RoleStatus) string {
	threshold := s.Threshold
	if s.TmuxErr != nil {
		switch {
		case r.HeartbeatAge < 0:
			return "no heartbeat; tmux socket unreachable"
		case r.HeartbeatAge > threshold:
			return "heartbeat " + r.HeartbeatAge.Round(time.Second).String() + " old; tmux socket unreachable"
		}
		return ""
	}
	switch {
	case !r.SessionAlive:
		return "no tmux session"
	case r.HeartbeatAge < 0 && r.SinceSession > threshold:
		return "no heartbeat yet"
	case !r.Up(threshold) && r.HeartbeatAge >= 0:
		return "heartbeat " + r.HeartbeatAge.Round(time.Second).String() + " old"
	}
	return ""
}

// Verdict judges the status as chamberlain --once does: a core role down
// or red health is 2; a general down, yellow/orange/stale health, a pause,
// a park (a warning: the breaker at work) or no watchdog is 1.
func (s *Status) Verdict() Verdict {
	v := Verdict{Problems: []Problem{}}
	raise := func(code int, p Problem) {
		v.Exit = max(v.Exit, code)
		v.Problems = append(v.Problems, p)
	}
	if s.StartPID == 0 {
		raise(StatusDegraded, Problem{Role: layout.RoleStart, Reason: "not running: nothing relaunches a role that dies"})
	}
	for _, r := range s.Roles {
		why := s.roleDown(r)
		if why == "" || (r.SessionAlive && s.Cluster.leaderElsewhere(r.Name)) {
			// A standby beside another host's leader never ticks.
			continue
		}
		code := StatusDegraded
		if slices.Contains(layout.CoreRoles, r.Name) {
			code = StatusDown
		}
		raise(code, Problem{Role: r.Name, Reason: "down (" + why + ")"})
	}
	if s.TmuxErr != nil {
		raise(StatusDegraded, Problem{Check: "tmux", Reason: strings.TrimPrefix(s.TmuxErr.Error(), "tmux ")})
	}
	switch {
	case s.HealthErr != nil:
		raise(StatusDegraded, Problem{Check: "health", Reason: "unknown: " + s.HealthErr.Error()})
	case s.Health.Health == health.Red:
		raise(StatusDown, Problem{Check: "health", Reason: "red"})
	case s.Health.Stale:
		raise(StatusDegraded, Problem{Check: "health", Reason: "resources.json stale (treated as orange)"})
	case s.Health.Health == health.Yellow || s.Health.Health == health.Orange:
		raise(StatusDegraded, Problem{Check: "health", Reason: s.Health.Health})
	}
	if s.Paused != nil {
		raise(StatusDegraded, Problem{Check: "kingdom", Reason: "paused: no new task starts until `start resume`"})
	}
	s.Parks.problems(raise)
	s.Cluster.problems(raise)
	return v
}

// printVerdict writes the verdict's line.
func (v Verdict) print(w io.Writer) {
	word := map[int]string{StatusOK: "OK", StatusDegraded: "DEGRADED", StatusDown: "DOWN"}[v.Exit]
	if len(v.Problems) == 0 {
		fmt.Fprintf(w, "verdict: %s (every role up, health green)\n", word)
		return
	}
	fmt.Fprintf(w, "verdict: %s (exit %d)\n", word, v.Exit)
	for _, p := range v.Problems {
		name := p.Role
		if name == "" {
			name = p.Check
		}
		fmt.Fprintf(w, "  %s %s\n", name, p.Reason)
	}
}

// StatusDoc is `start status --json`: a stable document (fields are only
// ever added). Ages are seconds, null when unknown; times RFC 3339 UTC.
type StatusDoc struct {
	At       string              `json:"at"`
	Start    StartDoc            `json:"start"`
	Roles    []RoleDoc           `json:"roles"`
	Queues   map[string]QueueDoc `json:"queues"`
	Soldiers []SoldierDoc        `json:"soldiers"`
	Health   HealthDoc           `json:"health"`
	Pause    *PauseDoc           `json:"pause"`
	// EnginePauses are the engines held by a usage limit.
	EnginePauses []EnginePauseDoc `json:"engine_pauses"`
	Waits        []waits.Wait     `json:"waits"`
	// WaitsUpdatedAt is when the king last wrote its record (null: never).
	WaitsUpdatedAt *string `json:"waits_updated_at"`
	Discarded      int     `json:"events_discarded_today"`
	// Parks are the breaker's parks (SPEC §12.4) with their evidence.
	Parks []ParkDoc `json:"parks"`
	// Hosts and Leaders are store.kind postgres's (SPEC §11.7): every host
	// of the registry, and who leads each leader role. Always [] in the
	// files mode.
	Hosts   []HostDoc   `json:"hosts"`
	Leaders []LeaderDoc `json:"leaders"`
	Verdict Verdict     `json:"verdict"`
	Errors  []string    `json:"errors"`
}

// StartDoc is the watchdog.
type StartDoc struct {
	Running bool `json:"running"`
	PID     int  `json:"pid,omitempty"`
}

// RoleDoc is one role.
type RoleDoc struct {
	Name string `json:"name"`
	Up   bool   `json:"up"`
	// Session is the tmux session's name (the role's name); SessionAlive
	// says whether it runs.
	Session             string `json:"session"`
	SessionAlive        bool   `json:"session_alive"`
	SessionAgeSeconds   *int64 `json:"session_age_seconds"`
	HeartbeatAgeSeconds *int64 `json:"heartbeat_age_seconds"`
	LeaderPID           int    `json:"leader_pid,omitempty"`
	Down                string `json:"down,omitempty"` // why it is down
	// Standby names the host that leads this leader role while this
	// host's instance stands by (store.kind postgres).
	Standby string `json:"standby,omitempty"`
}

// QueueDoc is one queue: state → count.
type QueueDoc map[string]int

// SoldierDoc is one registered soldier.
type SoldierDoc struct {
	ID        string `json:"id"` // its tmux session
	TaskID    string `json:"task_id"`
	General   string `json:"general"`
	StartedAt string `json:"started_at"`
}

// HealthDoc is the chamberlain's resource health.
type HealthDoc struct {
	Health string `json:"health"` // green | yellow | orange | red | unknown
	Tokens string `json:"tokens"`
	Stale  bool   `json:"stale"`
	Error  string `json:"error,omitempty"`
}

// PauseDoc is the operator's pause.
type PauseDoc struct {
	Since string `json:"since"`
	By    string `json:"by"`
}

// EnginePauseDoc is one engine held by a usage limit.
type EnginePauseDoc struct {
	Engine string `json:"engine"`
	Until  string `json:"until"`
	Reason string `json:"reason"`
}

func secondsPtr(d time.Duration) *int64 {
	n := int64(d / time.Second)
	return &n
}

// Document is the status as `start status --json` prints it.
func (s *Status) Document(now time.Time) StatusDoc {
	d := StatusDoc{
		At: doc.FormatTime(now), Start: StartDoc{Running: s.StartPID > 0, PID: s.StartPID},
		Roles: []RoleDoc{}, Queues: map[string]QueueDoc{}, Soldiers: []SoldierDoc{},
		EnginePauses: []EnginePauseDoc{}, Waits: []waits.Wait{},
		Discarded: s.Discarded, Verdict: s.Verdict(), Errors: []string{},
	}
	d.Hosts, d.Leaders = s.Cluster.docs()
	if c := s.Cluster; c != nil && c.Err != nil {
		d.Errors = append(d.Errors, "cluster: "+c.Err.Error())
	}
	if s.TmuxErr != nil {
		d.Errors = append(d.Errors, s.TmuxErr.Error())
	}
	for _, r := range s.Roles {
		rd := RoleDoc{Name: r.Name, Up: r.Up(s.Threshold), Session: r.Name, SessionAlive: r.SessionAlive,
			LeaderPID: r.LeaderPID, Down: s.roleDown(r)}
		if s.TmuxErr != nil {
			rd.Up = rd.Down == ""
		}
		if r.SessionAlive && s.Cluster.leaderElsewhere(r.Name) {
			rd.Up, rd.Down, rd.Standby = true, "", s.Cluster.Leaders[r.Name].Holder
		}
		if r.SinceSession > 0 {
			rd.SessionAgeSeconds = secondsPtr(r.SinceSession)
		}
		if r.HeartbeatAge >= 0 {
			rd.HeartbeatAgeSeconds = secondsPtr(r.HeartbeatAge)
		}
		d.Roles = append(d.Roles, rd)
	}
	for kind, states := range s.Queues {
		d.Queues[kind] = QueueDoc(states)
	}
	for _, e := range s.Soldiers {
		d.Soldiers = append(d.Soldiers, SoldierDoc{ID: e.ID, TaskID: e.TaskID, General: e.General, StartedAt: doc.FormatTime(e.StartedAt)})
	}
	if s.HealthErr != nil {
		d.Health = HealthDoc{Health: "unknown", Tokens: "unknown", Error: s.HealthErr.Error()}
	} else {
		d.Health = HealthDoc{Health: s.Health.Health, Tokens: s.Health.TokenStatus, Stale: s.Health.Stale}
	}
	if s.Paused != nil {
		d.Pause = &PauseDoc{Since: s.Paused.Since, By: s.Paused.By}
	}
	if s.QueuesErr != nil {
		d.Errors = append(d.Errors, "queues: "+s.QueuesErr.Error())
	}
	var perr error
	if d.Parks, perr = s.Parks.docs(); perr != nil {
		d.Errors = append(d.Errors, perr.Error())
	}
	if m := s.Money; m != nil {
		for _, eng := range slices.Sorted(maps.Keys(m.Paused)) {
			d.EnginePauses = append(d.EnginePauses, EnginePauseDoc{Engine: eng, Until: doc.FormatTime(m.Paused[eng]), Reason: m.Reason[eng]})
		}
		for _, err := range m.Errs {
			d.Errors = append(d.Errors, err.Error())
		}
	}
	if w := s.Waiting; w != nil {
		if w.Err != nil {
			d.Errors = append(d.Errors, w.Err.Error())
		}
		if w.Record.Waits != nil {
			d.Waits = w.Record.Waits
		}
		if u := w.Record.UpdatedAt; !u.IsZero() {
			at := doc.FormatTime(u)
			d.WaitsUpdatedAt = &at
		}
	}
	return d
}
