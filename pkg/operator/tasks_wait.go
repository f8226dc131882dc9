package operator

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// TaskWait is why a pending task does not start yet.
type TaskWait struct {
	Reason string `json:"reason"` // a pkg/waits reason
	Detail string `json:"detail,omitempty"`
	Until  string `json:"until,omitempty"` // RFC 3339 UTC, when known
	// Text is the one line `start tasks` prints after "waiting: ".
	Text string `json:"text"`
}

// taskHolds is what `start tasks` reads once to explain its rows: the
// king's waits record, the engine pauses, each general's engine and the
// registered soldiers.
type taskHolds struct {
	l       layout.Layout
	byID    map[string]waits.Wait
	pauses  enginepause.File
	engines map[string]string // general → engine
	dflt    string            // runtime.engine
	soldier map[string]string // task → soldier session
}

func readTaskHolds(ctx context.Context, sh *Shared, now time.Time) *taskHolds {
	l := sh.Layout
	h := &taskHolds{l: l, engines: map[string]string{}, soldier: map[string]string{}}
	rec, _ := waits.Read(ctx, sh.KV)
	h.byID = rec.ByID()
	h.pauses, _ = enginepause.Load(ctx, sh.KV)
	if sys, err := config.LoadSystem(l.ConfigFile(config.SystemFile)); err == nil {
		h.dflt = sys.Runtime.Engine
		ms, _ := config.LoadManifests(l.GeneralsConfigDir())
		for _, m := range ms {
			h.engines[m.Name] = sys.EngineFor(m)
		}
	}
	if es, err := sessions.New(l).Read(); err == nil {
		for _, e := range es {
			h.soldier[e.TaskID] = e.ID
		}
	}
	return h
}

// session is the soldier session running task: sessions.json, else the
// soldier-id file the general writes before spawning.
func (h *taskHolds) session(task string) string {
	if s := h.soldier[task]; s != "" {
		return s
	}
	b, err := os.ReadFile(h.l.ResultSoldierID(task))
	if err != nil {
		return ""
	}
	if s := strings.TrimSpace(string(b)); ids.Valid(s) {
		return s
	}
	return ""
}

func (h *taskHolds) engineOf(general string) string {
	if e := h.engines[general]; e != "" {
		return e
	}
	return h.dflt
}

// wait explains a pending task: its engine's usage-limit pause first (the
// one hold with a known end), then the king's record, then a retry's
// not_before; nil when nothing holds it.
func (h *taskHolds) wait(t doc.Task, now time.Time) *TaskWait {
	rec, recorded := h.byID[t.ID]
	nb, nbErr := doc.ParseTime(t.NotBefore)
	future := nbErr == nil && nb.After(now)
	if eng := h.engineOf(t.TargetGeneral); eng != "" {
		if until, ok := h.pauses.Active(eng, now); ok && (future || (recorded && rec.Reason == waits.EnginePause)) {
			return &TaskWait{Reason: waits.EnginePause, Detail: h.pauses[eng].Reason, Until: doc.FormatTime(until),
				Text: fmt.Sprintf("%s usage limit until %s", eng, clockTime(until, now))}
		}
	}
	if recorded {
		w := &TaskWait{Reason: rec.Reason, Detail: rec.Detail, Text: rec.Reason}
		if rec.Detail != "" {
			w.Text = rec.Detail
		}
		if rec.Until != nil {
			w.Until = doc.FormatTime(*rec.Until)
			w.Text += " until " + clockTime(*rec.Until, now)
		}
		return w
	}
	if future {
		return &TaskWait{Reason: waits.Backoff, Until: doc.FormatTime(nb), Text: "retry backoff until " + clockTime(nb, now)}
	}
	return nil
}

// gapNote explains task ids that are not dense. The king issues ids one by
// one from state/king/task-seq and never reuses one, so a listed day with
// missing numbers means tasks outside the listing (finished before the
// window, or removed by retention), or ids an earlier king reserved in
// blocks of 64 and never used after a restart: never a lost task.
func gapNote(rows []TaskRow) string {
	byDay := map[string]map[int]bool{}
	for _, r := range rows {
		day, n, ok := taskSeqOf(r.ID)
		if !ok {
			continue
		}
		if byDay[day] == nil {
			byDay[day] = map[int]bool{}
		}
		byDay[day][n] = true
	}
	var parts []string
	days := make([]string, 0, len(byDay))
	for d := range byDay {
		days = append(days, d)
	}
	sort.Strings(days)
	for _, d := range days {
		top := 0
		for n := range byDay[d] {
			top = max(top, n)
		}
		missing := top - len(byDay[d])
		if missing > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d of 1–%d not listed", d, missing, top))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "note: task ids are not dense (" + strings.Join(parts, "; ") + "). An id is never reused; a number not listed " +
		"is a task finished before the listing's window (`--all` shows it) or removed by retention, or an id an earlier " +
		"king reserved in a block of 64 and left unused when it restarted. No task is lost that way."
}

// taskSeqOf splits task-YYYYMMDD-NNN.
func taskSeqOf(id string) (string, int, bool) {
	rest, ok := strings.CutPrefix(id, "task-")
	if !ok {
		return "", 0, false
	}
	day, num, ok := strings.Cut(rest, "-")
	if !ok || len(day) != 8 {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 {
		return "", 0, false
	}
	return day, n, true
}
