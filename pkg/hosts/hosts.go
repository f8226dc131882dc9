// Package hosts decides what a host's silence means (SPEC §11.7 "Host
// loss"). The registry itself is the store's (store.Store.RenewHost,
// Hosts, ForgetHost); each host renews its row, and these pure functions
// read it:
//
//   - SelfFence: a host whose last successful Renew is self_fence_seconds
//     old stops claiming and kills its soldiers (it may be cut off from the
//     database while others still see it as gone).
//   - TakeoverDue: the king fails the tasks of a host silent for
//     takeover_seconds with the retryable HostLost. takeover exceeds
//     self_fence, so by then that host has killed its soldiers and a task
//     never runs on two hosts at once.
//
// Ages are measured by the database's clock (renewed_at and now() are both
// the server's), so hosts' clocks never need to agree.
//
//	err := st.RenewHost(ctx, hostID, version, startedAt) // every renew period
//	if err == nil { lastOK = time.Now() }
//	if hosts.SelfFence(lastOK, time.Now(), cfg.SelfFence()) { stop claiming, kill soldiers }
//	list, _ := st.Hosts(ctx, cfg.SelfFence())
//	for _, h := range list { if hosts.TakeoverDue(h, time.Now(), cfg.Takeover()) { fail its tasks HostLost } }
package hosts

import (
	"time"

	"github.com/kingdom-dev/kingdom/pkg/store"
)

// SelfFence reports whether a host must stop claiming and kill its
// soldiers: its last successful renewal (lastRenewOK, zero if none since
// it started) is selfFence old or older. A host that never renewed has no
// claim to work. Pass times from time.Now() of one process, whose
// monotonic readings make the difference immune to clock steps.
func SelfFence(lastRenewOK, now time.Time, selfFence time.Duration) bool {
	if lastRenewOK.IsZero() {
		return true
	}
	return now.Sub(lastRenewOK) >= selfFence
}

// TakeoverDue reports whether h has been silent for takeover: its age when
// listed plus the time since (by the reader's clock). A negative gap (now
// before ListedAt) counts as none.
func TakeoverDue(h store.Host, now time.Time, takeover time.Duration) bool {
	silent := h.Age
	if since := now.Sub(h.ListedAt); since > 0 {
		silent += since
	}
	return silent >= takeover
}
