package operator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// ReadHosts is `start hosts`: the store's hosts registry, this host
// marked (the host id the roles use).
func ReadHosts(ctx context.Context, sh *Shared) (*Cluster, error) {
	c := ReadCluster(ctx, sh.Store, sh.Config)
	return c, c.Err
}

// PrintHosts writes the registry: each host's last renewal, whether it is
// alive, lost (past store.takeover_seconds) and its version.
func PrintHosts(w io.Writer, c *Cluster) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tRENEWED\tSTATE\tVERSION\tSTARTED")
	for _, h := range c.Hosts {
		id, state := h.ID, "alive"
		if id == c.HostID {
			id += " (this host)"
		}
		switch {
		case h.Alive:
		case c.lost(h):
			state = "lost (`start hosts forget " + h.ID + "` retires it)"
		default:
			state = "silent"
		}
		fmt.Fprintf(tw, "%s\t%s ago\t%s\t%s\t%s\n", id, h.Age.Round(time.Second), state, dash(h.Version), h.StartedAt.Format(time.RFC3339))
	}
	tw.Flush()
}

// ErrHostAlive: a host that renews its lease cannot be forgotten (it
// would register again at its next renewal).
var ErrHostAlive = errors.New("host is alive")

// ForgetHost is `start hosts forget <id>`: it removes a retired host from
// the registry, so a lost host stops being a problem of the verdict. It
// refuses a host that is not in the registry or still alive; the files
// store refuses always (its one host is this machine).
func ForgetHost(ctx context.Context, sh *Shared, id string) error {
	c, err := ReadHosts(ctx, sh)
	if err != nil {
		return err
	}
	for _, h := range c.Hosts {
		if h.ID != id {
			continue
		}
		if h.Alive && id == c.HostID {
			return fmt.Errorf("forget host %s: %w: it is this host (a host is forgotten from another one, once it has stopped)", id, ErrHostAlive)
		}
		if h.Alive {
			return fmt.Errorf("forget host %s: %w (renewed %s ago): stop its kingdom first; a host is forgotten only once it has stopped renewing",
				id, ErrHostAlive, h.Age.Round(time.Second))
		}
		return sh.Store.ForgetHost(ctx, id)
	}
	// The files store says why it forgets nothing (its one host is this
	// machine); a database has no row to delete.
	if err := sh.Store.ForgetHost(ctx, id); err != nil {
		return err
	}
	return fmt.Errorf("forget host %s: no such host in the registry (see `start hosts`)", id)
}
