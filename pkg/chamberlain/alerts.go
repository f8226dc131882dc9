package chamberlain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// Alert kinds (the <kind> of msg-chamberlain-<kind>-<key>-<unix>).
const (
	KindHealth    = "health"
	KindDisk      = "disk"
	KindRole      = "role"
	KindFailures  = "failures"
	KindTimeouts  = "timeouts"
	KindStale     = "stale"
	KindWatcher   = "watcher"
	KindResults   = "results"
	KindReport    = "report"
	KindRecovered = "recovered"
)

// alertKey is the alert-state key of a condition.
func alertKey(kind, key string) string { return kind + ":" + key }

// messageID builds msg-chamberlain-<kind>-<key>-<unix>; a key that would make
// an invalid id is replaced by a short hash of itself.
func messageID(kind, key string, at time.Time) string {
	id := fmt.Sprintf("msg-chamberlain-%s-%s-%d", kind, key, at.Unix())
	if ids.Valid(id) {
		return id
	}
	sum := sha256.Sum256([]byte(key))
	return fmt.Sprintf("msg-chamberlain-%s-%s-%d", kind, hex.EncodeToString(sum[:6]), at.Unix())
}

// condition is one alertable state evaluated this tick.
type condition struct {
	Kind, Key string
	Urgency   string
	Content   string // what is wrong, human-readable
}

// RecoverAfter is how long a condition must stay clear before the
// recovered note goes out, so a value hovering at a threshold (or a role
// relaunched into the same failure) does not produce alert/recovered pairs.
const RecoverAfter = 2 * time.Minute

// alerter applies the no-storm rule: a message on entering a bad state, a
// repeat at most every `repeat` while it lasts, a recovered note once it has
// stayed clear for RecoverAfter; a relapse within `repeat` of the last
// message stays quiet until the repeat is due. State lives in AlertState so
// it survives restarts.
type alerter struct {
	st     *AlertState
	repeat time.Duration
	send   func(kind, key, urgency, content string, at time.Time) error
}

// evaluate reconciles the conditions of the given kinds: conds holds those
// currently bad; every other alert of those kinds is clear.
func (a *alerter) evaluate(now time.Time, kinds []string, conds []condition) error {
	var errs []string
	seen := map[string]bool{}
	for _, c := range conds {
		k := alertKey(c.Kind, c.Key)
		seen[k] = true
		act := a.st.Active[k]
		if act != nil {
			act.ClearedAt = nil
			if act.Recovered {
				// A relapse: a new episode, announced once the repeat
				// window since the last message has passed.
				act.Recovered = false
				act.Since = now
			}
		}
		switch {
		case act == nil:
			if err := a.send(c.Kind, c.Key, c.Urgency, c.Content, now); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			a.st.Active[k] = &ActiveAlert{Kind: c.Kind, Key: c.Key, Since: now, LastSent: now, Sent: 1, Content: c.Content}
		case now.Sub(act.LastSent) >= a.repeat:
			content := c.Content
			if act.Sent > 0 && now.Sub(act.Since) > 0 {
				content = fmt.Sprintf("%s (still ongoing, for %s)", c.Content, now.Sub(act.Since).Round(time.Minute))
			}
			if err := a.send(c.Kind, c.Key, c.Urgency, content, now); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			act.LastSent = now
			act.Sent++
			act.Content = c.Content
		}
	}
	for k, act := range a.st.Active {
		if seen[k] || !slices.Contains(kinds, act.Kind) {
			continue
		}
		switch {
		case act.Recovered:
			if now.Sub(act.LastSent) >= a.repeat {
				delete(a.st.Active, k)
			}
		case act.ClearedAt == nil:
			t := now
			act.ClearedAt = &t
		case now.Sub(*act.ClearedAt) >= RecoverAfter:
			content := fmt.Sprintf("Recovered: %s (lasted %s)", act.Content, act.ClearedAt.Sub(act.Since).Round(time.Second))
			if err := a.send(KindRecovered, act.Kind+"-"+act.Key, doc.UrgencyNormal, content, now); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			act.Recovered = true
			act.LastSent = now
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("queue alerts: %s", strings.Join(errs, "; "))
	}
	return nil
}

// putMessage queues a chamberlain message (notification or report) in
// queue/messages/pending after validating it against the message schema.
func (r *Role) putMessage(ctx context.Context, typ, kind, key, urgency, content string, ctxData map[string]any, at time.Time) error {
	id := messageID(kind, key, at)
	m := doc.Message{
		ID:        id,
		Type:      typ,
		TaskID:    nil,
		Urgency:   urgency,
		Content:   content,
		Context:   ctxData,
		SourceRef: nil,
		CreatedAt: doc.FormatTime(at),
		Status:    doc.MessagePending,
	}
	// Checked against the message schema, so the envoy never rejects what
	// the chamberlain queues.
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode message %s: %w", m.ID, err)
	}
	if err := schema.Validate(doc.KindMessage, b); err != nil {
		return fmt.Errorf("message %s: %w", m.ID, err)
	}
	b = append(b, '\n')
	// A cluster alert commits only while this host still leads the
	// cluster duties.
	ctx, cancel := context.WithTimeout(ctx, eventlog.StoreTimeout)
	defer cancel()
	err = queue.Group(ctx, func(g *queue.GroupTx) error {
		if r.lease != nil && clusterAlert(kind, key) {
			g.Fence(r.lease)
		}
		return g.PutOnce(r.messages, layout.Pending, id, b)
	}, r.messages)
	if err != nil {
		if errors.Is(err, queue.ErrExists) {
			return nil // already queued (a repeat within the same second, or after a crash)
		}
		return fmt.Errorf("queue alert %s: %w", id, err)
	}
	r.log.Warn(content, "cat", "ALERT", "msg", id)
	return nil
}
