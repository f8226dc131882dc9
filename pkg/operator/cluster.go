package operator

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// Cluster is what `start status` shows of the store's hosts registry and
// leaders: every host (on one machine, this one) and who leads each leader
// role.
type Cluster struct {
	HostID    string // this host
	SelfFence time.Duration
	// Takeover is store.takeover_seconds: another host silent this long
	// is lost (the king has failed its tasks HostLost) until forgotten.
	Takeover time.Duration
	Hosts    []store.Host
	Leaders  map[string]store.LeaderInfo
	Err      error // the store could not be read
}

// ReadCluster reads the hosts and leaders of the shared store st, whose
// system.yaml section is cfg (this host's id, the self-fence and takeover
// windows): `start status`, `start hosts` and the chamberlain's dashboard
// read the cluster here.
func ReadCluster(ctx context.Context, st store.Store, cfg config.Store) *Cluster {
	c := &Cluster{SelfFence: cfg.SelfFence(), Takeover: cfg.Takeover()}
	c.HostID, c.Err = cfg.ResolveHostID()
	if c.Err != nil {
		return c
	}
	c.Hosts, c.Err = st.Hosts(ctx, c.SelfFence)
	if c.Err == nil {
		c.Leaders, c.Err = st.Leaders(ctx)
	}
	return c
}

// leaderElsewhere reports whether role is a leader role that a live
// session on another host holds: this host's instance stands by, so its
// missing heartbeat is no fault. A holder the store does not name is this
// machine (store.LeaderInfo).
func (c *Cluster) leaderElsewhere(role string) bool {
	if c == nil || c.Err != nil || !app.IsLeaderRole(role) {
		return false
	}
	li, ok := c.Leaders[role]
	return ok && li.Held && li.Holder != "" && li.Holder != c.HostID
}

// problems are the cluster's reasons for a verdict: the database cannot
// be read or no host leads a leader role (down), this host's lease is
// stale (degraded: its generals have fenced themselves).
func (c *Cluster) problems(raise func(int, Problem)) {
	if c == nil {
		return
	}
	if c.Err != nil {
		raise(StatusDown, Problem{Check: "store", Reason: "store unreadable: " + c.Err.Error()})
		return
	}
	self := false
	for _, h := range c.Hosts {
		if h.ID == c.HostID {
			self = h.Alive
		}
	}
	if !self {
		raise(StatusDegraded, Problem{Check: "host", Reason: c.HostID + ": no renewal within store.self_fence_seconds: its generals stop claiming (is start running and the database reachable?)"})
	}
	for _, h := range c.Hosts {
		if h.ID != c.HostID && c.lost(h) {
			raise(StatusDegraded, Problem{Check: "host", Reason: fmt.Sprintf("%s: lost (no renewal for %s, past store.takeover_seconds): bring it back, or retire it with `start hosts forget %s`",
				h.ID, h.Age.Round(time.Second), h.ID)})
		}
	}
	for _, r := range app.LeaderRoles {
		if !c.Leaders[r].Held {
			raise(StatusDown, Problem{Role: r, Reason: "no host leads it"})
		}
	}
}

// lost: h has not renewed for longer than store.takeover_seconds.
func (c *Cluster) lost(h store.Host) bool { return !h.Alive && c.Takeover > 0 && h.Age > c.Takeover }

func (c *Cluster) print(w io.Writer) {
	if c == nil {
		return
	}
	if c.Err != nil {
		fmt.Fprintf(w, "cluster: unknown (%v)\n\n", c.Err)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tRENEWED\tALIVE\tVERSION")
	for _, h := range c.Hosts {
		id := h.ID
		if id == c.HostID {
			id += " (this host)"
		}
		fmt.Fprintf(tw, "%s\t%s ago\t%s\t%s\n", id, h.Age.Round(time.Second), yesNo(h.Alive), h.Version)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEADER\tHOST\tEPOCH\tHELD")
	for _, r := range app.LeaderRoles {
		li, ok := c.Leaders[r]
		if !ok {
			fmt.Fprintf(tw, "%s\t-\t-\tno\n", r)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", r, dash(li.Holder), li.Epoch, yesNo(li.Held))
	}
	tw.Flush()
	fmt.Fprintln(w)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// HostDoc is one host of the registry.
type HostDoc struct {
	ID string `json:"id"`
	// This marks the host that ran `start status`.
	This              bool   `json:"this"`
	RenewedAgeSeconds int64  `json:"renewed_age_seconds"`
	Alive             bool   `json:"alive"`
	Version           string `json:"version"`
	StartedAt         string `json:"started_at"`
}

// LeaderDoc is one leader role: who took it last, and whether it is held.
type LeaderDoc struct {
	Role  string  `json:"role"`
	Host  string  `json:"host"`
	Epoch int64   `json:"epoch"`
	Held  bool    `json:"held"`
	Since *string `json:"since"`
}

func (c *Cluster) docs() ([]HostDoc, []LeaderDoc) {
	hs, ls := []HostDoc{}, []LeaderDoc{}
	if c == nil || c.Err != nil {
		return hs, ls
	}
	for _, h := range c.Hosts {
		hs = append(hs, HostDoc{ID: h.ID, This: h.ID == c.HostID, RenewedAgeSeconds: int64(h.Age / time.Second),
			Alive: h.Alive, Version: h.Version, StartedAt: doc.FormatTime(h.StartedAt)})
	}
	for _, r := range slices.Sorted(slices.Values(app.LeaderRoles)) {
		li, ok := c.Leaders[r]
		d := LeaderDoc{Role: r, Host: li.Holder, Epoch: li.Epoch, Held: li.Held}
		if ok && !li.Since.IsZero() {
			at := doc.FormatTime(li.Since)
			d.Since = &at
		}
		ls = append(ls, d)
	}
	return hs, ls
}
