package report

import (
	"maps"
	"slices"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// Stats is logs/analysis/stats.json: seed 000's totals plus per-general
// counts and average durations.
type Stats struct {
	UpdatedAt string                   `json:"updated_at"`
	Totals    StatsTotals              `json:"totals"`
	Generals  map[string]*GeneralStats `json:"generals"`
	Events    int64                    `json:"events_consumed"`
	// CorruptLines stays in stats.json for its readers; the store's event
	// reader skips a torn line without a count.
	CorruptLines int64 `json:"corrupt_lines"`
	// Daily is each host-local day's spend from the king's cost ledger,
	// overall and per general and engine (SPEC §10.6), the last statsDays.
	Daily map[string]spend.Summary `json:"daily,omitempty"`
}

// StatsTotals are seed 000's counters.
type StatsTotals struct {
	TaskCompleted  int64 `json:"task_completed"`
	TaskFailed     int64 `json:"task_failed"`
	SoldierSpawned int64 `json:"soldier_spawned"`
	SoldierTimeout int64 `json:"soldier_timeout"`
}

// GeneralStats counts one general's task outcomes.
type GeneralStats struct {
	Completed          int64   `json:"completed"`
	Failed             int64   `json:"failed"`
	NeedsHuman         int64   `json:"needs_human"`
	DurationCount      int64   `json:"duration_count"`
	DurationSumSeconds float64 `json:"duration_sum_seconds"`
	AvgDurationSeconds float64 `json:"avg_duration_seconds"`
}

// statsDays is how many days of spend stats.json keeps.
const statsDays = 31

// Init fills what a freshly decoded (or zero) Stats lacks.
func (s *Stats) Init() {
	if s.Generals == nil {
		s.Generals = map[string]*GeneralStats{}
	}
}

func (s *Stats) general(name string) *GeneralStats {
	g := s.Generals[name]
	if g == nil {
		g = &GeneralStats{}
		s.Generals[name] = g
	}
	return g
}

// RecordDay copies one day's spend summary into Daily, keeping the last
// statsDays days.
func (s *Stats) RecordDay(sum spend.Summary) {
	if s.Daily == nil {
		s.Daily = map[string]spend.Summary{}
	}
	s.Daily[sum.Date] = sum
	if len(s.Daily) > statsDays {
		days := slices.Sorted(maps.Keys(s.Daily))
		for _, d := range days[:len(days)-statsDays] {
			delete(s.Daily, d)
		}
	}
}

// EventData is the union of the data fields the accounts (and the
// chamberlain's detectors) read from an internal event.
type EventData struct {
	EventID         string
	General         string
	TargetGeneral   string
	DurationSeconds *float64
}

// Decode extracts ev's EventData when its type is one whose data is read;
// other events count by type alone.
func Decode(ev eventlog.Event) EventData {
	switch ev.Type {
	case "task.completed", "task.failed", "task.needs_human", "event.detected", "event.dispatched", "event.discarded":
		if len(ev.Data) > 0 {
			return decodeData(ev.Data)
		}
	}
	return EventData{}
}

// decodeData reads the fields in one pass over the data's members (a
// chamberlain consuming a large events.log from zero decodes every line).
// A field of another type is left empty, as json.Unmarshal would leave it
// unusable; a data shape we do not know counts by type only.
func decodeData(raw []byte) EventData {
	var d EventData
	// raw is only read here: parse it in place and copy out the strings
	// that are kept.
	r := gjson.Parse(unsafe.String(unsafe.SliceData(raw), len(raw)))
	if !r.IsObject() {
		return d
	}
	r.ForEach(func(k, v gjson.Result) bool {
		var str *string
		switch k.Str {
		case "event_id":
			str = &d.EventID
		case "general":
			str = &d.General
		case "target_general":
			str = &d.TargetGeneral
		case "duration_seconds":
			if v.Type == gjson.Number {
				f := v.Num
				d.DurationSeconds = &f
			} else {
				d.DurationSeconds = nil
			}
		}
		if str != nil && v.Type == gjson.String {
			*str = strings.Clone(v.Str)
		}
		return true
	})
	return d
}

// GeneralOf names the general an outcome event is about: its actor (the
// king emits task.* with actor = the general, SPEC §9.7), else the data.
func GeneralOf(ev eventlog.Event, d EventData) string {
	if strings.HasPrefix(ev.Actor, "gen-") {
		return ev.Actor
	}
	if d.General != "" {
		return d.General
	}
	if d.TargetGeneral != "" {
		return d.TargetGeneral
	}
	return ev.Actor
}

// Apply counts one internal event (with its decoded data) into the totals
// and the report's accumulation. It must not log or emit: the chamberlain
// also runs it under the exclusive rotation lock.
func Apply(st *Stats, acc *Acc, ev eventlog.Event, d EventData) {
	st.Events++
	switch ev.Type {
	case "task.created":
		acc.Created++
	case "task.completed":
		st.Totals.TaskCompleted++
		acc.Completed++
		name := GeneralOf(ev, d)
		g := st.general(name)
		g.Completed++
		if d.DurationSeconds != nil && *d.DurationSeconds >= 0 {
			g.DurationCount++
			g.DurationSumSeconds += *d.DurationSeconds
			g.AvgDurationSeconds = round1(g.DurationSumSeconds / float64(g.DurationCount))
			acc.DurSum[name] += *d.DurationSeconds
			acc.DurCount[name]++
		}
	case "task.failed":
		st.Totals.TaskFailed++
		acc.Failed++
		st.general(GeneralOf(ev, d)).Failed++
	case "task.needs_human":
		acc.NeedsHuman++
		st.general(GeneralOf(ev, d)).NeedsHuman++
	case "soldier.spawned":
		st.Totals.SoldierSpawned++
		acc.Spawned++
	case "soldier.timeout":
		st.Totals.SoldierTimeout++
		acc.Timeout++
	}
}
