package king

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/parks"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// The king's brakes (SPEC §12.4, king.yaml breaker); the no-progress and
// burn kills are the generals'.
//
//   - Per item: every dispatched attempt of one source item (repo + PR or
//     issue number, a Jira key, a Slack thread; itemKey) is counted in the
//     store (kv.NSBreaker), retries and re-triggers included. An event of an
//     item that already had max_attempts_per_item attempts within
//     item_window_hours is not dispatched: the item is parked until its
//     window lets an attempt in again, and its events end in
//     events/completed/ with `discarded: "parked: …"` (terminal, seen by
//     `start events`; a later event after the park is judged afresh).
//   - Correlated failures: every failed attempt of a general is counted
//     by its fingerprint (general, status, error_reason class: never text,
//     paths, ids or times) over the last hour; failure_threshold alike park
//     the general. Its events then wait in pending/ (waits reason
//     "parked"); after park_minutes the next one is dispatched as the one
//     canary (never retried); its success lifts the park, its failure parks
//     again for park_minutes.
//
// Parks are records of kv.NSParks (pkg/parks), written fenced by the
// king's lease, so they outlive restarts and failovers. Each alerts once
// (one ❌, a deterministic message id; the record notes it was queued).
// Only a passing canary, an item's window or `start unpark` lifts one; an
// unpark forgets the counts behind the park too, so it does not park again
// at the next event.

// breaker is the king's view of the parks, read at the start of each tick
// and kept in step with every write.
type breaker struct {
	parks map[string]*parks.Park // by parks.Key
	// claimed: parked generals whose canary this tick admitted (its task id
	// is recorded at dispatch).
	claimed map[string]bool
	pruned  time.Time
}

// window is a kv.NSBreaker record: a general's recent failures or an
// item's attempts.
type window struct {
	Attempts []parks.Attempt `json:"attempts"`
}

// maxWindow bounds a window record.
const maxWindow = 200

// failureWindow is how far back a general's failures are counted.
const failureWindow = time.Hour

// loadParks reads the parks for this tick.
func (k *King) loadParks() error {
	ps, err := parks.List(k.ctx(), k.kv)
	if err != nil {
		return err // the parks last read still hold
	}
	m := make(map[string]*parks.Park, len(ps))
	for i := range ps {
		m[parks.Key(ps[i].Kind, ps[i].Name)] = &ps[i]
	}
	k.brk.parks, k.brk.claimed = m, map[string]bool{}
	return nil
}

func (k *King) savePark(p *parks.Park) error {
	key := parks.Key(p.Kind, p.Name)
	if err := kv.PutJSON(k.ctx(), k.kv, kv.NSParks, key, p); err != nil {
		return fmt.Errorf("record park %s: %w", key, err)
	}
	k.brk.parks[key] = p
	return nil
}

// openPark records a new park, then queues its one alert.
func (k *King) openPark(p *parks.Park) error {
	if err := k.savePark(p); err != nil {
		return err
	}
	k.em.Emit("breaker.parked", map[string]any{"kind": p.Kind, "name": p.Name, "reason": p.Reason,
		"count": p.Evidence.Count, "fingerprint": p.Evidence.Fingerprint, "until": doc.FormatTime(p.Until)})
	k.log.Error("parked "+p.Kind+" "+p.Name+": "+p.Reason, "cat", "ALERT", "until", doc.FormatTime(p.Until))
	return k.alertPark(p)
}

// alertPark queues the park's one ❌ (put-once under its id) and notes it.
func (k *King) alertPark(p *parks.Park) error {
	if _, err := k.putMessage(k.parkMessage(p)); err != nil {
		return err
	}
	p.Alerted = true
	return k.savePark(p)
}

// parkMessageID is deterministic: a repeat after a crash is put-once.
func parkMessageID(p *parks.Park) string {
	return fmt.Sprintf("msg-park-%s-%s-%d", p.Kind, strings.ReplaceAll(p.Name, ":", "-"), p.Since.Unix())
}

func (k *King) parkMessage(p *parks.Park) *doc.Message {
	m := &doc.Message{ID: parkMessageID(p), Type: doc.MessageNotification, Urgency: doc.UrgencyHigh,
		// "park" names the record: the envoy's Unpark button lifts it.
		Context: map[string]any{"kind": "park", "park": parks.Key(p.Kind, p.Name), "park_kind": p.Kind, "name": p.Name, "count": p.Evidence.Count,
			"until": doc.FormatTime(p.Until), "reason": p.Reason}}
	if p.Kind == parks.General {
		var last []string
		for _, a := range p.Evidence.Last {
			last = append(last, a.TaskID+" "+firstNonEmpty(a.ErrorReason, a.Status)+": "+redact.Clip(a.Error, 120))
		}
		m.Content = fmt.Sprintf("❌ %s parked: %s. No task is dispatched to it and its retries wait; one canary task runs after %s and its success lifts the park. `start unpark %s` lifts it now. Last failures: %s",
			p.Name, p.Reason, k.clockTime(p.Until), p.Name, strings.Join(last, "; "))
		return m
	}
	m.Content = fmt.Sprintf("❌ item %s parked: %s; its new events are not dispatched until %s. `start unpark item %s` lifts it now.",
		p.Name, p.Reason, k.clockTime(p.Until), p.Name)
	if parts := strings.Split(p.Name, ":"); len(parts) == 3 && parts[0] == "slack" {
		m.Channel, m.ThreadTS = parts[1], strPtr(parts[2])
	}
	return m
}

// liftPark ends a park and forgets the counts behind it.
func (k *King) liftPark(p *parks.Park, why, by string) error {
	key := parks.Key(p.Kind, p.Name)
	if err := k.kv.Delete(k.ctx(), kv.NSParks, key); err != nil {
		return fmt.Errorf("lift park %s: %w", key, err)
	}
	delete(k.brk.parks, key)
	if err := k.kv.Delete(k.ctx(), kv.NSBreaker, key); err != nil {
		k.log.Warn("forget the counts of a lifted park", "park", key, "err", err)
	}
	k.em.Emit("breaker.unparked", map[string]any{"kind": p.Kind, "name": p.Name, "why": why, "by": by})
	k.log.Info("unparked "+p.Kind+" "+p.Name+": "+why, "by", by)
	return nil
}

// processParks is the tick's park step, after the results: the alerts a
// crash left unqueued, the canaries' verdicts and the items whose window
// ended; once an hour the stale counters go.
func (k *King) processParks() error {
	var errs []error
	now := k.now()
	for _, key := range slices.Sorted(maps.Keys(k.brk.parks)) {
		p := k.brk.parks[key]
		if !p.Alerted {
			if err := k.alertPark(p); err != nil {
				errs = append(errs, err)
			}
		}
		switch {
		case p.Kind == parks.General && p.Canary != "":
			errs = append(errs, k.judgeCanary(p))
		case p.Kind == parks.Item && !now.Before(p.Until):
			errs = append(errs, k.liftPark(p, "its window ended", "breaker"))
		}
	}
	if now.Sub(k.brk.pruned) >= time.Hour {
		k.brk.pruned = now
		k.pruneWindows(now)
	}
	return errors.Join(errs...)
}

// judgeCanary lifts or renews a general's park by its canary's outcome.
func (k *King) judgeCanary(p *parks.Park) error {
	st, ok := k.tasks.Find(p.Canary)
	var t doc.Task
	switch {
	case !ok:
		// Its dispatch never committed: the next event is the canary.
		p.Canary = ""
		return k.savePark(p)
	case st == layout.Completed:
		if err := k.tasks.ReadJSON(st, p.Canary, &t); err != nil {
			return nil // moved meanwhile
		}
		if t.Status != doc.ResultFailed {
			return k.liftPark(p, "canary "+p.Canary+" ended "+t.Status, "canary")
		}
	case st != layout.Rejected:
		return nil // still running
	}
	a := parks.Attempt{TaskID: p.Canary, At: k.now().UTC(), Status: doc.ResultFailed}
	var res doc.Result
	if kv.GetJSON(k.ctx(), k.kv, kv.NSResults, p.Canary, &res) == nil {
		a.ErrorReason, a.Error = res.ErrorReason, redact.Clip(firstNonEmpty(res.Error, res.Summary), 300)
	}
	if uncounted[a.ErrorReason] {
		// Cancelled, or its host lost: it proved nothing; the next event
		// probes.
		p.Canary = ""
		return k.savePark(p)
	}
	p.Evidence.Last = lastAttempts(append(p.Evidence.Last, a))
	p.CanariesFailed++
	p.Canary = ""
	p.Until = k.now().Add(k.cfg.ParkDuration())
	k.em.Emit("breaker.reparked", map[string]any{"kind": p.Kind, "name": p.Name, "canary": a.TaskID,
		"error_reason": a.ErrorReason, "until": doc.FormatTime(p.Until), "canaries_failed": p.CanariesFailed})
	k.log.Warn("canary failed: "+p.Name+" stays parked", "canary", a.TaskID, "until", doc.FormatTime(p.Until))
	return k.savePark(p)
}

// parkHold is why a task for general waits on its park, or nil; due is
// true when the park lets its canary through now.
func (k *King) parkHold(general string) (h *hold, due bool) {
	p := k.brk.parks[parks.Key(parks.General, general)]
	if p == nil {
		return nil, false
	}
	lift := "`start unpark " + general + "` lifts it"
	if p.Canary != "" || k.brk.claimed[general] {
		return &hold{reason: parks.WaitReason, level: "canary",
			detail: fmt.Sprintf("%s parked since %s (%s); its canary %s runs, its success lifts the park (%s)",
				general, k.clockTime(p.Since), p.Reason, firstNonEmpty(p.Canary, "task"), lift)}, false
	}
	if k.now().Before(p.Until) {
		return &hold{reason: parks.WaitReason, level: "parked", until: p.Until,
			detail: fmt.Sprintf("%s parked since %s (%s); one canary task runs after %s (%s now)",
				general, k.clockTime(p.Since), p.Reason, k.clockTime(p.Until), lift)}, false
	}
	return nil, true
}

// parkedFor holds an event already admitted (a petition's) while general
// is parked: it stays where it is and is judged again next tick. The
// park's due canary passes.
func (k *King) parkedFor(ev *doc.Event, general string) bool {
	h, due := k.parkHold(general)
	if h != nil {
		k.waiting(ev.ID, "", h)
		return true
	}
	if due {
		k.brk.claimed[general] = true
	}
	return false
}

// recordCanaries notes, before the dispatch commits, which of the tasks
// about to be written is its parked general's canary (a dispatch that
// never commits leaves a canary no task has, which judgeCanary clears).
func (k *King) recordCanaries(rs []routed, taskIDs []string) error {
	for i, r := range rs {
		p := k.brk.parks[parks.Key(parks.General, r.general)]
		if p == nil || p.Canary != "" || !k.brk.claimed[r.general] {
			continue
		}
		p.Canary = taskIDs[i]
		if err := k.savePark(p); err != nil {
			return err
		}
		delete(k.brk.claimed, r.general)
		k.em.Emit("breaker.canary", map[string]any{"general": r.general, "task_id": p.Canary, "event_id": r.ev.ID})
		k.log.Info("canary dispatched to parked "+r.general, "task", p.Canary)
	}
	return nil
}

// isCanary: t probes its parked general (a canary is never retried).
func (k *King) isCanary(t *doc.Task) bool {
	p := k.brk.parks[parks.Key(parks.General, t.TargetGeneral)]
	return p != nil && p.Canary == t.ID
}

// Failure reasons that say nothing about the general: an operator's
// cancel, a lost host or session, money.
var uncounted = map[string]bool{doc.ReasonCancelled: true, doc.ReasonHostLost: true,
	doc.ReasonSessionLost: true, doc.ReasonUsageLimited: true, doc.ReasonBudgetExceeded: true}

// reasonClasses are the error_reasons a fingerprint names as they are;
// any other is "other", so a reason of free text never splits a count.
var reasonClasses = map[string]bool{doc.ReasonAgentFailed: true, doc.ReasonEngineError: true,
	doc.ReasonEngineMissing: true, doc.ReasonEngineRefused: true, doc.ReasonSoldierDied: true,
	doc.ReasonTimeout: true, doc.ReasonInvalidResult: true, doc.ReasonPromptTooLarge: true,
	doc.ReasonNoResult: true, doc.ReasonStalled: true, doc.ReasonRunaway: true}

// fingerprint is a failure's (general, status, error_reason class); ok
// is false for a failure the breaker does not count.
func fingerprint(general, status, reason string) (fp string, ok bool) {
	if uncounted[reason] {
		return "", false
	}
	class := reason
	switch {
	case reason == "":
		class = "none"
	case !reasonClasses[reason]:
		class = "other"
	}
	return general + "|" + status + "|" + class, true
}

// orphanedBeforeSoldier: the general died between claiming the attempt
// and spawning its soldier, and its restart wrote SoldierDied for it. No
// agent ran and nothing was spent: the crash was Kingdom's, not the
// general's engine's, so the breaker does not count it (a crash loop of
// the role itself is the chamberlain's to see, not a reason to park).
func orphanedBeforeSoldier(res *doc.Result) bool {
	return res.ErrorReason == doc.ReasonSoldierDied && res.SoldierID == ""
}

// noteFailure counts a failed attempt of t's general and parks the general
// when failure_threshold of the last hour's failures share its fingerprint.
func (k *King) noteFailure(t *doc.Task, res *doc.Result) {
	n := k.cfg.Breaker.FailureThreshold
	if n <= 0 || !failedOutcome(res.Status) {
		return
	}
	if orphanedBeforeSoldier(res) {
		return
	}
	fp, ok := fingerprint(t.TargetGeneral, res.Status, res.ErrorReason)
	if !ok {
		return
	}
	now := k.now().UTC()
	a := parks.Attempt{TaskID: t.ID, Attempt: t.RetryCount, At: now, Status: res.Status, ErrorReason: res.ErrorReason,
		Error: redact.Clip(firstNonEmpty(res.Error, res.Summary), 300), Fingerprint: fp}
	key := parks.Key(parks.General, t.TargetGeneral)
	w, err := k.addToWindow(key, a, now.Add(-failureWindow))
	if err != nil {
		k.log.Warn("failure not counted by the breaker", "task", t.ID, "err", err)
		return
	}
	if k.brk.parks[key] != nil {
		return // parked already: its canary decides
	}
	var same []parks.Attempt
	for _, x := range w.Attempts {
		if x.Fingerprint == fp {
			same = append(same, x)
		}
	}
	if len(same) < n {
		return
	}
	_, class, _ := strings.Cut(strings.TrimPrefix(fp, t.TargetGeneral+"|"), "|")
	p := &parks.Park{Kind: parks.General, Name: t.TargetGeneral, Since: now, Until: now.Add(k.cfg.ParkDuration()),
		Reason: fmt.Sprintf("%d failures alike (%s, %s) within an hour reached breaker.failure_threshold %d",
			len(same), res.Status, class, n),
		Evidence: parks.Evidence{Count: len(same), Fingerprint: fp, Last: lastAttempts(same)}}
	if err := k.openPark(p); err != nil {
		k.log.Warn("park not recorded", "general", t.TargetGeneral, "err", err)
	}
}

// addToWindow adds a (once per task attempt) to the window record key,
// dropping what is older than since, and returns the window.
func (k *King) addToWindow(key string, a parks.Attempt, since time.Time) (window, error) {
	var w window
	err := k.kv.Update(k.ctx(), kv.NSBreaker, key, func(old []byte) ([]byte, error) {
		w = window{}
		if old != nil && json.Unmarshal(old, &w) != nil {
			w = window{} // unreadable: start afresh
		}
		w.Attempts = keepSince(w.Attempts, since)
		for _, x := range w.Attempts {
			if x.TaskID == a.TaskID && x.Attempt == a.Attempt {
				return kv.EncodeJSON(w) // counted already (a repeated step)
			}
		}
		w.Attempts = append(w.Attempts, a)
		if len(w.Attempts) > maxWindow {
			w.Attempts = w.Attempts[len(w.Attempts)-maxWindow:]
		}
		return kv.EncodeJSON(w)
	})
	return w, err
}

// readWindow is the window record key, from since on.
func (k *King) readWindow(key string, since time.Time) ([]parks.Attempt, error) {
	var w window
	if err := kv.GetJSON(k.ctx(), k.kv, kv.NSBreaker, key, &w); err != nil && !errors.Is(err, kv.ErrNotFound) {
		return nil, err
	}
	return keepSince(w.Attempts, since), nil
}

func keepSince(as []parks.Attempt, since time.Time) []parks.Attempt {
	out := as[:0:0]
	for _, a := range as {
		if a.At.After(since) {
			out = append(out, a)
		}
	}
	return out
}

// lastAttempts keeps a park's evidence short: the last five.
func lastAttempts(as []parks.Attempt) []parks.Attempt {
	if len(as) > 5 {
		as = as[len(as)-5:]
	}
	return slices.Clone(as)
}

// pruneWindows removes the counters with nothing left in their window.
func (k *King) pruneWindows(now time.Time) {
	m, err := k.kv.List(k.ctx(), kv.NSBreaker)
	if err != nil {
		return
	}
	for key, b := range m {
		var w window
		since := now.Add(-k.cfg.ItemWindow())
		if strings.HasPrefix(key, parks.General+":") {
			since = now.Add(-failureWindow)
		}
		if json.Unmarshal(b, &w) == nil && len(keepSince(w.Attempts, since)) > 0 {
			continue
		}
		if _, parked := k.brk.parks[key]; !parked {
			k.kv.Delete(k.ctx(), kv.NSBreaker, key)
		}
	}
}

// itemKey is the source item of an event or task: gh:<owner>:<repo>:<n>
// for a GitHub PR or issue, jira:<KEY>, slack:<channel>:<thread ts>; ""
// when it has none (a schedule, an inbox file, a repository-wide
// notification). source "" (a task) infers the kind from the payload.
func itemKey(source string, repo *string, p map[string]any) string {
	str := func(k string) string {
		switch v := p[k].(type) {
		case string:
			return v
		case float64:
			return fmt.Sprint(int64(v))
		}
		return ""
	}
	var key string
	switch {
	case (source == "" || source == doc.SourceJira) && str("ticket_key") != "":
		key = "jira:" + str("ticket_key")
	case (source == "" || source == doc.SourceGitHub) && (str("pr_number") != "" || str("issue_number") != ""):
		owner, name, ok := strings.Cut(doc.Deref(repo), "/")
		if !ok {
			return ""
		}
		key = "gh:" + owner + ":" + name + ":" + firstNonEmpty(str("pr_number"), str("issue_number"))
	case (source == "" || source == doc.SourceSlack) && str("channel") != "" && str("schedule") == "":
		ts := firstNonEmpty(str("thread_ts"), str("ts"))
		if ts == "" {
			return ""
		}
		key = "slack:" + str("channel") + ":" + ts
	default:
		return ""
	}
	if _, err := parks.Target(parks.Key(parks.Item, key)); err != nil || strings.Count(key, ":") > 3 {
		return "" // not a safe id: not capped rather than misfiled
	}
	return key
}

// itemGate takes out of rs the events whose item is parked, or that its
// attempt cap parks now; those end completed as parked. Schedule runs
// (from "") have no item.
func (k *King) itemGate(rs []routed, from string) ([]routed, error) {
	max := k.cfg.Breaker.MaxAttemptsPerItem
	if from == "" {
		return rs, nil
	}
	now := k.now().UTC()
	out := rs[:0:0]
	batch := map[string]int{}
	var errs []error
	for _, r := range rs {
		item := itemKey(r.ev.Source, r.ev.Repo, r.ev.Payload)
		if item == "" {
			out = append(out, r)
			continue
		}
		p := k.brk.parks[parks.Key(parks.Item, item)]
		if p != nil && !now.Before(p.Until) {
			if err := k.liftPark(p, "its window ended", "breaker"); err != nil {
				errs = append(errs, err)
				continue
			}
			p = nil
		}
		if p == nil && max > 0 {
			as, err := k.readWindow(parks.Key(parks.Item, item), now.Add(-k.cfg.ItemWindow()))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for range batch[item] {
				as = append(as, parks.Attempt{At: now})
			}
			if len(as) >= max {
				slices.SortFunc(as, func(a, b parks.Attempt) int { return a.At.Compare(b.At) })
				p = &parks.Park{Kind: parks.Item, Name: item, Since: now, Until: as[len(as)-max].At.Add(k.cfg.ItemWindow()),
					Reason: fmt.Sprintf("%d attempts within %d h reached breaker.max_attempts_per_item %d",
						len(as), k.cfg.Breaker.ItemWindowHours, max),
					Evidence: parks.Evidence{Count: len(as), Last: lastAttempts(as)}}
				if err := k.openPark(p); err != nil {
					errs = append(errs, err)
					continue
				}
			}
		}
		if p != nil {
			if err := k.completeEvent(from, r.ev.ID, "parked: item "+item+": "+p.Reason+" (`start unpark item "+item+"` lifts it)"); err != nil {
				errs = append(errs, err)
				continue
			}
			k.em.Emit("event.parked", map[string]any{"event_id": r.ev.ID, "event_type": r.ev.Type, "item": item})
			k.log.Info("event of a parked item not dispatched", "event", r.ev.ID, "item", item)
			continue
		}
		batch[item]++
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// countAttempt counts a dispatched attempt (a new task or a retry) of
// task's source item.
func (k *King) countAttempt(source string, t *doc.Task) {
	item := itemKey(source, t.Repo, t.Payload)
	if item == "" || k.cfg.Breaker.MaxAttemptsPerItem <= 0 {
		return
	}
	now := k.now().UTC()
	a := parks.Attempt{TaskID: t.ID, Attempt: t.RetryCount, At: now}
	if _, err := k.addToWindow(parks.Key(parks.Item, item), a, now.Add(-k.cfg.ItemWindow())); err != nil {
		k.log.Warn("attempt not counted by the breaker", "task", t.ID, "item", item, "err", err)
	}
}

// unpark is the operator's `start unpark <general|item>`.
func (k *King) unpark(target, by string) (string, error) {
	key, err := parks.Target(target)
	if err != nil {
		return "", err
	}
	var p parks.Park
	if err := kv.GetJSON(k.ctx(), k.kv, kv.NSParks, key, &p); err != nil {
		if errors.Is(err, kv.ErrNotFound) {
			return "", fmt.Errorf("%s is not parked", strings.TrimPrefix(strings.TrimPrefix(key, parks.General+":"), parks.Item+":"))
		}
		return "", err
	}
	if err := k.liftPark(&p, "unparked by "+by, by); err != nil {
		return "", err
	}
	return fmt.Sprintf("unparked %s %s (parked since %s: %s)", p.Kind, p.Name, doc.FormatTime(p.Since), p.Reason), nil
}
