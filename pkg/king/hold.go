package king

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/waits"
)

// A build that fills the disk must not take the kingdom down: while the
// base dir's filesystem has less free space than chamberlain.yaml
// thresholds.disk_min_free_gb, no new task is admitted (running soldiers
// finish), with one alert when the hold starts and an
// event when it lifts. The king measures the free space itself each tick
// (statfs), so the hold does not wait for the chamberlain's next report.

// diskHold is the king's memory of the hold.
type diskHold struct {
	minFreeGB float64
	freeBytes func(path string) (uint64, error)
	held      bool
}

// statfsFree returns the bytes available to an unprivileged user on the
// filesystem holding path.
func statfsFree(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// applyDiskHold holds admission while free space is below the threshold.
func (k *King) applyDiskHold(adm *admission) {
	h := &k.disk
	if h.minFreeGB <= 0 || h.freeBytes == nil {
		return
	}
	free, err := h.freeBytes(k.l.Base)
	if err != nil {
		k.log.Warn("free disk space unknown", "err", err)
		return
	}
	gb := float64(free) / (1 << 30)
	if gb >= h.minFreeGB {
		if h.held {
			h.held = false
			k.log.Info(fmt.Sprintf("disk space back (%.1f GB free): admitting tasks again", gb))
			k.em.Emit("system.disk_ok", map[string]any{"free_gb": gb, "min_free_gb": h.minFreeGB})
		}
		return
	}
	reason := fmt.Sprintf("disk low: %.1f GB free under %s, below thresholds.disk_min_free_gb %g", gb, k.l.Base, h.minFreeGB)
	if adm.paused == nil {
		adm.paused = &hold{reason: waits.Health, level: "disk", detail: reason}
	}
	if h.held {
		return
	}
	h.held = true
	k.log.Error(reason+": no new task is admitted until space frees", "cat", "ALERT")
	k.em.Emit("system.disk_low", map[string]any{"free_gb": gb, "min_free_gb": h.minFreeGB})
	m := &doc.Message{
		ID: fmt.Sprintf("msg-king-disk-low-%d", k.now().Unix()), Type: doc.MessageNotification,
		Urgency: doc.UrgencyHigh, Content: "[urgent] " + reason + ": no new task is admitted until space frees; running soldiers finish.",
		Context: map[string]any{"kind": "disk_low", "free_gb": gb, "min_free_gb": h.minFreeGB},
	}
	if _, err := k.putMessage(m); err != nil {
		k.log.Warn("disk alert not queued", "err", err)
	}
}
