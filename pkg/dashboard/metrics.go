package dashboard

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/tidwall/gjson"

	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/operator"
	"github.com/kingdom-dev/kingdom/pkg/parks"
	"github.com/kingdom-dev/kingdom/pkg/spend"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// metrics is /metrics. Gauges (queue depths, soldiers, health, roles,
// engine pauses, parks) are read from disk at each scrape; counters (tasks by
// outcome, durations, cost, tokens, alerts, engine pauses, internal events)
// move as the store's event log grows, counted from its start (on one
// machine: the current events.log) when the server starts. The registry is the server's own, so
// tests and several servers never share state.
type metrics struct {
	s   *Server
	reg *prometheus.Registry

	mu       sync.Mutex   // serializes follow's reads (tests call sync)
	cur      store.Cursor // the store's event log, from its start
	tasks    *prometheus.CounterVec
	duration prometheus.Histogram
	cost     prometheus.Counter
	tokens   *prometheus.CounterVec
	alerts   prometheus.Counter
	pauses   *prometheus.CounterVec
	events   *prometheus.CounterVec
}

const ns = "kingdom"

var (
	descQueue     = prometheus.NewDesc(ns+"_queue_depth", "Files in each queue state.", []string{"queue", "state"}, nil)
	descSoldiers  = prometheus.NewDesc(ns+"_soldiers_running", "Soldiers registered in sessions.json.", nil, nil)
	descHealth    = prometheus.NewDesc(ns+"_health_level", "Resource health: 0 green, 1 yellow, 2 orange, 3 red (stale or unreadable counts as orange).", nil, nil)
	descRoleUp    = prometheus.NewDesc(ns+"_role_up", "1 when the role's tmux session is alive and its heartbeat is fresh.", []string{"role"}, nil)
	descRoleAge   = prometheus.NewDesc(ns+"_role_heartbeat_age_seconds", "Seconds since the role's last heartbeat (absent when it never beat).", []string{"role"}, nil)
	descPaused    = prometheus.NewDesc(ns+"_engine_paused", "1 while an engine is paused by a usage limit.", []string{"engine"}, nil)
	descCostToday = prometheus.NewDesc(ns+"_spend_today_usd", "Today's spend in the king's cost ledger (host-local day).", nil, nil)
	descBudget    = prometheus.NewDesc(ns+"_budget_used_ratio", "Today's spend over the tighter daily budget of king.yaml (absent without one).", nil, nil)
	descVerdict   = prometheus.NewDesc(ns+"_verdict", "The chamberlain's latest verdict: chamberlain --once's exit code (0 all well, 1 degraded, 2 down, 3 cannot evaluate).", nil, nil)
	descHostUp    = prometheus.NewDesc(ns+"_host_up", "1 while the host renews its lease within store.self_fence_seconds (one machine: always 1).", []string{"host"}, nil)
	descHostAge   = prometheus.NewDesc(ns+"_host_renewal_age_seconds", "Seconds since the host last renewed its lease (the store's clock).", []string{"host"}, nil)
	descLeader    = prometheus.NewDesc(ns+"_leader_epoch", "The epoch of each leader role, labelled with the host that leads it.", []string{"role", "host"}, nil)
	descParks     = prometheus.NewDesc(ns+"_parks", "Parks of the breaker (SPEC §12.4) by kind: general, item.", []string{"kind"}, nil)
	descPark      = prometheus.NewDesc(ns+"_park_info", "1 for each park of the breaker; its fingerprint is a general's (general|status|reason class).", []string{"kind", "name", "fingerprint"}, nil)
	descDamaged   = prometheus.NewDesc(ns+"_spend_ledger_damaged_lines", "Records of today's spend ledger that cannot be read (0 when whole); while a daily budget is set no task starts until it is repaired.", nil, nil)
)

func newMetrics(s *Server) *metrics {
	m := &metrics{
		s:   s,
		reg: prometheus.NewRegistry(),
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "tasks_total",
			Help: "Finished tasks by outcome (success, skipped, failed, needs_human)."}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "task_duration_seconds",
			Help:    "Duration of finished tasks.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}}),
		cost: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "cost_usd_total",
			Help: "Cost of finished tasks in USD (SPEC §10.6)."}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "tokens_total",
			Help: "Tokens used by finished tasks, by kind."}, []string{"kind"}),
		alerts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "alerts_sent_total",
			Help: "Chamberlain alerts delivered by the envoy."}),
		pauses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "engine_pauses_total",
			Help: "Usage-limit pauses of an engine (system.rate_limited)."}, []string{"engine"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "internal_events_total",
			Help: "Internal events by category (event, task, soldier, system, recovery, message)."}, []string{"category"}),
	}
	for _, o := range []string{"success", "skipped", "failed", "needs_human"} {
		m.tasks.WithLabelValues(o) // every outcome is present from the first scrape
	}
	m.reg.MustRegister(m.tasks, m.duration, m.cost, m.tokens, m.alerts, m.pauses, m.events, gauges{m})
	return m
}

// handler counts what was appended up to now, then serves the scrape, so a
// scrape never lags behind the log it reflects.
func (m *metrics) handler() http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.sync(r.Context())
		h.ServeHTTP(w, r)
	})
}

// follow counts events as they are appended, until ctx ends.
func (m *metrics) follow(ctx context.Context) {
	for {
		wake := m.s.notify.wait()
		m.sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
	}
}

// sync counts every line appended since the last call.
func (m *metrics) sync(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := readStore(ctx, m.s.o.Store, &m.cur, func(line []byte, _ store.Cursor) error {
		m.count(line)
		return nil
	})
	if err != nil {
		m.s.log.Warn("dashboard metrics: read events log", "err", err)
	}
}

func (m *metrics) count(line []byte) {
	ev := gjson.ParseBytes(line)
	typ := ev.Get("type").String()
	if typ == "" {
		return
	}
	cat, _, _ := strings.Cut(typ, ".")
	m.events.WithLabelValues(cat).Inc()
	data := ev.Get("data")
	switch typ {
	case "task.completed", "task.failed", "task.needs_human":
		outcome := strings.TrimPrefix(typ, "task.")
		switch {
		case typ == "task.completed" && data.Get("status").String() == "skipped":
			outcome = "skipped"
		case typ == "task.completed":
			outcome = "success"
		}
		m.tasks.WithLabelValues(outcome).Inc()
		m.taskFigures(data)
	case "message.sent":
		// Chamberlain alerts are msg-chamberlain-<kind>-…; the daily
		// report is not an alert.
		id := data.Get("msg_id").String()
		if strings.HasPrefix(id, "msg-chamberlain-") && !strings.HasPrefix(id, "msg-chamberlain-report-") {
			m.alerts.Inc()
		}
	case "system.rate_limited":
		eng := data.Get("engine").String()
		if eng == "" {
			eng = "unknown"
		}
		m.pauses.WithLabelValues(eng).Inc()
	}
}

// taskFigures adds a finished task's duration, cost and tokens from its
// task.* event, which carries them (SPEC §10.6): no file is read per
// event. A null cost is an unpriced task: nothing to add.
func (m *metrics) taskFigures(data gjson.Result) {
	if d := data.Get("duration_seconds"); d.Type == gjson.Number {
		m.duration.Observe(d.Float())
	}
	if c := data.Get("cost_usd"); c.Type == gjson.Number {
		m.cost.Add(max(c.Float(), 0))
	}
	u := data.Get("usage")
	for kind, key := range map[string]string{"input": "input_tokens", "output": "output_tokens",
		"cache_read": "cache_read_input_tokens", "cache_creation": "cache_creation_input_tokens"} {
		if v := u.Get(key).Int(); v > 0 {
			m.tokens.WithLabelValues(kind).Add(float64(v))
		}
	}
}

// gauges reads the current state at scrape time.
type gauges struct{ m *metrics }

func (g gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueue, descSoldiers, descHealth, descRoleUp, descRoleAge, descPaused, descCostToday, descBudget, descDamaged, descHostUp, descHostAge, descLeader, descVerdict, descParks, descPark} {
		ch <- d
	}
}

// one is a 0/1 gauge's value.
func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var healthLevels = map[string]float64{health.Green: 0, health.Yellow: 1, health.Orange: 2, health.Red: 3}

func (g gauges) Collect(ch chan<- prometheus.Metric) {
	s := g.m.s
	now := s.clk.Now()
	// Collect has no caller's context (prometheus): the server's bounds it.
	ctx, cancel := context.WithTimeout(s.baseCtx(), 10*time.Second)
	defer cancel()
	k, _ := operator.ReadKingdom(ctx, s.l, s.o.Tmux, now, s.sh.Queues)
	for _, kind := range operator.QueueKinds {
		for _, st := range layout.QueueStates[kind] {
			ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(k.Queues[kind][st]), kind, st)
		}
	}
	ch <- prometheus.MustNewConstMetric(descSoldiers, prometheus.GaugeValue, float64(k.ActiveSoldiers))
	if lv, ok := healthLevels[k.Health.Health]; ok {
		ch <- prometheus.MustNewConstMetric(descHealth, prometheus.GaugeValue, lv)
	}
	for _, r := range k.Roles {
		ch <- prometheus.MustNewConstMetric(descRoleUp, prometheus.GaugeValue, one(r.Up(s.o.HeartbeatThreshold)), r.Name)
		if r.HeartbeatAge >= 0 {
			ch <- prometheus.MustNewConstMetric(descRoleAge, prometheus.GaugeValue, r.HeartbeatAge.Seconds(), r.Name)
		}
	}
	if s.o.Verdict != nil {
		if v := s.o.Verdict(); v != nil {
			ch <- prometheus.MustNewConstMetric(descVerdict, prometheus.GaugeValue, float64(v.Exit))
		}
	}
	for _, p := range readEnginePause(ctx, s.sh.KV, now) {
		ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, one(p.Active), p.Engine)
	}
	if ps, err := parks.List(ctx, s.sh.KV); err == nil {
		n := map[string]int{parks.General: 0, parks.Item: 0}
		for _, p := range ps {
			n[p.Kind]++
			ch <- prometheus.MustNewConstMetric(descPark, prometheus.GaugeValue, 1, p.Kind, p.Name, p.Evidence.Fingerprint)
		}
		for kind, c := range n {
			ch <- prometheus.MustNewConstMetric(descParks, prometheus.GaugeValue, float64(c), kind)
		}
	}
	if c, _ := s.cluster(ctx); c != nil {
		for _, h := range c.Hosts {
			ch <- prometheus.MustNewConstMetric(descHostUp, prometheus.GaugeValue, one(h.Alive), h.ID)
			ch <- prometheus.MustNewConstMetric(descHostAge, prometheus.GaugeValue, h.RenewalAgeSeconds, h.ID)
		}
		for _, l := range c.Leaders {
			ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, float64(l.Epoch), l.Role, l.Host)
		}
	}
	date := spend.Date(now)
	day, err := spend.StoreDays(s.sh.KV).Load(ctx, date)
	tot := day.Summary().Totals
	ch <- prometheus.MustNewConstMetric(descDamaged, prometheus.GaugeValue, float64(tot.Damaged))
	// Damaged lines leave what parses, a lower bound the gauge above
	// qualifies; a ledger that cannot be read at all has no figure.
	if err == nil || errors.Is(err, spend.ErrDamaged) {
		ch <- prometheus.MustNewConstMetric(descCostToday, prometheus.GaugeValue, tot.CostUSD)
		if spend.Limited(s.o.Budget) {
			ch <- prometheus.MustNewConstMetric(descBudget, prometheus.GaugeValue, spend.Evaluate(date, tot, s.o.Budget).Ratio)
		}
	}
}
