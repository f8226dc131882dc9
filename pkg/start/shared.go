package start

import (
	"context"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/status"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/open"
)

// Shared is the state every host of a kingdom shares, as the operator
// commands (start tasks, events, status, pause) read and write it: the
// queues and the small state (pauses, cancel records, engine pauses,
// control requests, final results, the king's waits record). In file mode
// they are the files under the base dir; with store.kind postgres they are
// the shared database, so a command run on any host sees what every host
// does. Everything else (heartbeats, tmux sessions, soldiers, the spend
// ledger) stays this host's.
type Shared struct {
	Layout layout.Layout
	// Queues by kind (layout.QEvents, QTasks, QMessages).
	Queues map[string]*queue.Queue
	KV     kv.KV
	// Store is the opened database with store.kind postgres, nil in file
	// mode: listings read documents with their claims through it.
	Store store.Store
}

// sharedTimeout bounds opening the database.
const sharedTimeout = 10 * time.Second

// OpenShared returns the shared state of the installation at l. It loads
// system.yaml and, with store.kind postgres, the secrets the roles see
// (for the DSN) and connects as this host; a system.yaml that does not
// load is start doctor's finding and reads as file mode. File mode opens
// nothing and creates no file. Close releases the database.
func OpenShared(ctx context.Context, l layout.Layout) (*Shared, error) {
	sys, err := config.LoadSystem(l.ConfigFile(config.SystemFile))
	if err != nil || sys.Store.Kind != config.StorePostgres {
		return FilesShared(l), nil
	}
	LoadSecrets(l)
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	st, err := open.Store(ctx, sys.Store, l)
	if err != nil {
		return nil, err
	}
	return StoreShared(l, st), nil
}

// FilesShared is the shared state of file mode: the files under l.
func FilesShared(l layout.Layout) *Shared {
	s := &Shared{Layout: l, KV: kv.Files(l), Queues: map[string]*queue.Queue{}}
	for _, kind := range status.QueueKinds {
		s.Queues[kind] = queue.New(l, kind, nil)
	}
	return s
}

// StoreShared is the shared state kept in st. The queues claim nothing
// (an operator's command is no host's worker), so they name no host.
func StoreShared(l layout.Layout, st store.Store) *Shared {
	s := &Shared{Layout: l, KV: kv.OnStore(st), Store: st, Queues: map[string]*queue.Queue{}}
	for _, kind := range status.QueueKinds {
		s.Queues[kind] = queue.OnStore(st, l, kind, nil, "")
	}
	return s
}

// Close releases the database (nothing in file mode).
func (s *Shared) Close() {
	if s != nil && s.Store != nil {
		s.Store.Close()
	}
}

// docs reads the documents of one state for a listing. In file mode a
// document that cannot be read is skipped; a listing for the operator
// never moves a malformed file to rejected/ (that is the consumer's step),
// so it reads ids and files, not Queue.List. The store's List carries each
// document's claim (who runs it).
func (s *Shared) docs(ctx context.Context, kind, state string) ([]store.Doc, error) {
	if s.Store != nil {
		return s.Store.List(ctx, kind, state)
	}
	q := s.Queues[kind]
	idl, err := q.IDs(state)
	if err != nil {
		return nil, err
	}
	out := make([]store.Doc, 0, len(idl))
	for _, id := range idl {
		b, err := q.Read(state, id)
		if err != nil {
			continue
		}
		out = append(out, store.Doc{Queue: kind, State: state, ID: id, Data: b})
	}
	return out, nil
}

// LoadSecrets puts the secrets the roles will see into this process's
// environment (this shell's, then what the running start was given, then
// kingdom.env) and says where each came from; a file that does not load
// is the doctor's finding, not a reason to refuse.
func LoadSecrets(l layout.Layout) map[string]string {
	redact.SetExtraNames(config.SecretEnvNames(l.ConfigDir()))
	secrets, _ := config.ApplySecrets(l.StartSecretsFile(), l.EnvFile(), redact.IsSecretName)
	return secrets
}
