package envoy

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// Never post what cannot be recorded. Before a tick posts anything, room
// for the delivery record of every pending message is reserved in the
// journal (fallocate; where the filesystem has none, an intent file
// state/envoy/sending.json is written instead, as a probe); a reservation
// that fails (a full disk) holds every send, so nothing reaches Slack that
// the envoy could not remember having sent, and the same message is not
// posted again every tick. While held, each tick probes the disk with a
// write of sending.json and resumes once it succeeds. A message posted whose
// delivery could not be recorded all the same is kept in memory and
// recorded on recovery instead of being posted again. The operator gets one
// alert per hold (posted without a record: it is the alert that says
// records fail).

// errDiskHeld means sends are held because the state cannot be written.
var errDiskHeld = errors.New("state not writable (disk full?), sends held")

func sendingPath(l layout.Layout) string {
	return filepath.Join(l.RoleStateDir(layout.RoleEnvoy), "sending.json")
}

// reserveRecords makes room for the delivery records of n messages.
func (e *Envoy) reserveRecords(n int) error {
	err := e.st.reserve(n)
	if errors.Is(err, errors.ErrUnsupported) {
		b := fmt.Appendf(nil, "{\"pending\": %d, \"at\": %q}\n", n, schema.FormatTime(e.clock.Now()))
		return atomicfile.WriteFile(sendingPath(e.l), b, 0o600)
	}
	return err
}

// diskHeld reports whether sends are held; while held it probes the disk
// and lifts the hold when the intent file can be written again.
func (e *Envoy) diskHeld() bool {
	e.mu.Lock()
	held := e.disk.held
	e.mu.Unlock()
	if !held {
		return false
	}
	b := fmt.Appendf(nil, "{\"probe\": %q}\n", schema.FormatTime(e.clock.Now()))
	if err := atomicfile.WriteFile(sendingPath(e.l), b, 0o600); err != nil {
		return true
	}
	e.mu.Lock()
	e.disk.held, e.disk.alerted = false, false
	e.mu.Unlock()
	e.log.Info("state writable again: sends resume")
	e.em.Emit("system.envoy_sends_resumed", map[string]any{})
	return false
}

// holdForDisk holds sends after a failed state write and alerts once.
func (e *Envoy) holdForDisk(ctx context.Context, cause error) error {
	e.mu.Lock()
	e.disk.held = true
	alert := !e.disk.alerted
	e.disk.alerted = true
	e.mu.Unlock()
	e.log.Error("cannot record outbound messages: sends held", "err", redact(cause))
	if alert {
		e.em.Emit("system.envoy_sends_held", map[string]any{"error": redact(cause)})
		ch := e.config().DefaultChannel()
		if ch == "" && e.console {
			ch = ConsoleChannel
		}
		if ch != "" {
			var t slackText
			t.markup("🚨 *URGENT* [envoy] cannot write its state under " + e.l.Base + " (disk full?): outbound messages are held until it can. ").data(redact(cause))
			if _, _, err := e.poster.Post(ctx, post{Channel: ch, Text: t.String(), MsgID: "envoy-disk-alert", Type: schema.MessageNotification}); err != nil {
				e.log.Warn("disk alert not posted", "err", redact(err))
			}
		}
	}
	return fmt.Errorf("%w: %v", errDiskHeld, cause)
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
