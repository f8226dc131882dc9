// Package operator is the operator's commands of `start` (SPEC §12.1):
// status, tasks, events, hosts (and hosts forget), pause, resume, cancel,
// restart and doctor. They read the installation's state in one place,
// Shared: the store system.yaml names (OpenShared, as the host id start
// recorded), with this host's heartbeats, tmux sessions and soldiers beside
// it (kingdom.go), and the cluster (ReadCluster): the chamberlain's
// dashboard reads both there too. The launcher and watchdog is pkg/start.
//
//	sh, err := operator.OpenShared(ctx, l)
//	defer sh.Close()
//	rows, err := operator.ListTasks(ctx, sh, time.Now(), operator.RecentWindow)
//	st, err := operator.ReadStatus(ctx, l, tmuxClient, time.Now()) // st.Verdict().Exit
package operator

import (
	"context"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/open"
)

// Shared is the state every host of a kingdom shares, as the operator
// commands (start tasks, events, status, pause) read and write it through
// the installation's store: the queues and the small state (pauses, cancel
// records, engine pauses, control requests, final results, the king's
// waits record, the spend ledger), the hosts registry and the leaders. A
// command run on any host sees what every host does. Everything else
// (heartbeats, tmux sessions, soldiers) stays this host's.
type Shared struct {
	Layout layout.Layout
	// Config is system.yaml's store section (the host id, the self-fence
	// window).
	Config config.Store
	// Queues by kind (layout.QEvents, QTasks, QMessages).
	Queues map[string]*queue.Queue
	KV     kv.KV
	Store  store.Store
}

// sharedTimeout bounds opening the store.
const sharedTimeout = 10 * time.Second

// OpenShared opens the store of the installation at l (system.yaml store)
// with the secrets the roles see (for a DSN), as this host. A system.yaml
// that does not load is an error: no command guesses where the state
// lives. Close releases the store.
func OpenShared(ctx context.Context, l layout.Layout) (*Shared, error) {
	sys, err := config.LoadSystem(l.ConfigFile(config.SystemFile))
	if err != nil {
		return nil, err
	}
	LoadSecrets(l)
	// The host id the roles use: the one start recorded (KINGDOM_HOST_ID
	// still wins), not this shell's hostname.
	sys.Store.HostIDFile = config.HostIDRecord(l.StateDir())
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	sys.Store.ReadOnly = app.ForeignOwner(l.Base) != ""
	st, err := open.Store(ctx, sys.Store, l)
	if err != nil {
		return nil, err
	}
	sh := StoreShared(l, st)
	sh.Config = sys.Store
	return sh, nil
}

// StoreShared is the shared state kept in st. The queues claim nothing
// (an operator's command is no host's worker), so they name no host.
func StoreShared(l layout.Layout, st store.Store) *Shared {
	s := &Shared{Layout: l, Config: config.DefaultStore(), KV: kv.OnStore(st), Store: st, Queues: map[string]*queue.Queue{}}
	for _, kind := range QueueKinds {
		s.Queues[kind] = queue.OnStore(st, l, kind, nil, "")
	}
	return s
}

// Close releases the store.
func (s *Shared) Close() { s.Store.Close() }

// LoadSecrets puts the secrets the roles will see into this process's
// environment (this shell's, then what the running start was given, then
// kingdom.env) and says where each came from; a file that does not load
// is the doctor's finding, not a reason to refuse.
func LoadSecrets(l layout.Layout) map[string]string {
	redact.SetExtraNames(config.SecretEnvNames(l.ConfigDir()))
	secrets, _ := config.ApplySecrets(l.StartSecretsFile(), l.EnvFile(), redact.IsSecretName)
	return secrets
}
