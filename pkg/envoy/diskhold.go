package envoy

import (
	"context"
	"errors"
	"fmt"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Never post what cannot be recorded. A message's record is written before
// its post (deliveries.go): a record that cannot be written (a full disk,
// a store that refuses) holds every send, so nothing reaches Slack that
// the envoy could not remember having sent, and the operator gets one
// alert per hold (posted without a record: it is the alert that says
// records fail). Each tick tries the next record again; the first that is
// written lifts the hold. A message posted whose delivery could not be
// recorded all the same is kept in memory and recorded on recovery instead
// of being posted again.

// errDiskHeld means sends are held because the state cannot be written.
var errDiskHeld = errors.New("state not writable (disk full?), sends held")

// holdForDisk holds sends after a failed record and alerts once. A record
// refused because this envoy was deposed (or its tick ended) holds
// nothing: cause is returned as is.
func (e *Envoy) holdForDisk(ctx context.Context, cause error) error {
	if errors.Is(cause, store.ErrFenced) || ctx.Err() != nil {
		return cause
	}
	e.mu.Lock()
	e.disk.held = true
	alert := !e.disk.alerted
	e.disk.alerted = true
	e.mu.Unlock()
	e.log.Error("cannot record outbound messages: sends held", "err", redact(cause))
	if alert {
		e.em.Emit("system.envoy_sends_held", map[string]any{"error": redact(cause)})
		ch := e.config().DefaultChannel()
		if ch == "" && e.Console() {
			ch = ConsoleChannel
		}
		if ch != "" {
			var t slackText
			t.markup("🚨 *URGENT* [envoy] cannot record its deliveries (disk full under " + e.l.Base + "? store unreachable?): outbound messages are held until it can. ").data(redact(cause))
			if _, _, err := e.poster.Post(ctx, post{Channel: ch, Text: t.String(), MsgID: "envoy-disk-alert", Type: doc.MessageNotification}); err != nil {
				e.log.Warn("disk alert not posted", "err", redact(err))
			}
		}
	}
	return fmt.Errorf("%w: %v", errDiskHeld, cause)
}

// recordWritten lifts a hold: a record was written.
func (e *Envoy) recordWritten() {
	e.mu.Lock()
	held := e.disk.held
	e.disk.held, e.disk.alerted = false, false
	e.mu.Unlock()
	if held {
		e.log.Info("state writable again: sends resume")
		e.em.Emit("system.envoy_sends_resumed", map[string]any{})
	}
}

// unrecordedDelivery returns a delivery posted but not yet recorded.
func (e *Envoy) unrecordedDelivery(id string) (Delivery, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.disk.unrecorded[id]
	return d, ok
}

func (e *Envoy) setUnrecorded(id string, d *Delivery) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if d == nil {
		delete(e.disk.unrecorded, id)
		return
	}
	if e.disk.unrecorded == nil {
		e.disk.unrecorded = map[string]Delivery{}
	}
	e.disk.unrecorded[id] = *d
}

// diskState is the envoy's hold on a full disk (guarded by Envoy.mu).
type diskState struct {
	held, alerted bool
	unrecorded    map[string]Delivery
}
