package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/ids"
)

// Store kinds (system.yaml store.kind).
const (
	StoreFiles    = "files"
	StorePostgres = "postgres"
)

// HostIDEnv names the variable that overrides store.host_id.
const HostIDEnv = "KINGDOM_HOST_ID"

// DefaultDSNEnv is store.dsn_env's default.
const DefaultDSNEnv = "KINGDOM_PG_DSN"

// Store is system.yaml store (SPEC §11.6): where the roles' shared state
// lives. kind files is the single-machine default (the files under
// $BASE_DIR); kind postgres shares one database among every host.
type Store struct {
	Kind string `yaml:"kind" check:"oneof=files|postgres"`
	// DSNEnv names the variable holding the PostgreSQL DSN (from
	// kingdom.env or the environment). The DSN is a secret: it may carry a
	// password.
	DSNEnv string `yaml:"dsn_env" check:"nonempty"`
	// HostID names this host in claims, leaders and the hosts registry;
	// empty means the hostname. KINGDOM_HOST_ID wins over it.
	HostID string `yaml:"host_id"`
	// SelfFenceSeconds: a host that could not renew its lease for this long
	// stops claiming and kills its soldiers.
	SelfFenceSeconds int `yaml:"self_fence_seconds" check:"min=10,max=86400"`
	// TakeoverSeconds: the king fails the tasks of a host whose lease
	// expired this long ago (HostLost, retryable). It must exceed
	// SelfFenceSeconds, so the lost host has killed its soldiers before
	// their tasks run again elsewhere.
	TakeoverSeconds int `yaml:"takeover_seconds" check:"min=10,max=604800"`
	// CallTimeoutSeconds bounds every store call a role makes (SPEC
	// §12.1): a database that does not answer is an error, never a hang.
	CallTimeoutSeconds int `yaml:"call_timeout_seconds" check:"min=1,max=600"`
	// ConnectTimeoutSeconds bounds connecting to PostgreSQL when the DSN
	// names no connect_timeout of its own.
	ConnectTimeoutSeconds int `yaml:"connect_timeout_seconds" check:"min=1,max=600"`
	// LeaderStallSeconds: a leader whose tick has not finished for this
	// long gives up its lease so that another host leads.
	LeaderStallSeconds int `yaml:"leader_stall_seconds" check:"min=10,max=86400"`
	// AppName is the application_name of the process's connections
	// (kingdom-<role>@<host>), set by the role at start, never by a file.
	AppName string `yaml:"-"`
	// ReadOnly opens the store only to read it (an operator's command in a
	// tree another user owns); set by the command, never by a file.
	ReadOnly bool `yaml:"-"`
	// HostIDFile is where start recorded the host id it resolved
	// (HostIDRecord), read by ResolveHostID after KINGDOM_HOST_ID: the
	// roles and the operator commands set it, start itself does not.
	HostIDFile string `yaml:"-"`
}

// HostIDRecord is the file under the state dir where start records the
// host id it resolved (state/start/host-id).
func HostIDRecord(stateDir string) string { return filepath.Join(stateDir, "start", "host-id") }

// DefaultStore returns the store section's defaults.
func DefaultStore() Store {
	return Store{Kind: StoreFiles, DSNEnv: DefaultDSNEnv, SelfFenceSeconds: 300, TakeoverSeconds: 600,
		CallTimeoutSeconds: 10, ConnectTimeoutSeconds: 10, LeaderStallSeconds: 120}
}

// validate adds the store section's cross-key problems to p (the per-key
// ranges are check tags).
func (s Store) validate(p *problems) {
	if s.DSNEnv != "" && !envNameRE.MatchString(s.DSNEnv) {
		p.add("store.dsn_env", "expected an environment variable name, got %q", s.DSNEnv)
	}
	if s.HostID != "" && !ids.Valid(s.HostID) {
		// The host id becomes part of row keys and paths.
		p.add("store.host_id", "expected a safe id (letters, digits, . _ : @ -; starting with a letter or digit; no ..), got %q", s.HostID)
	}
	if s.TakeoverSeconds <= s.SelfFenceSeconds {
		p.add("store.takeover_seconds", "expected more than store.self_fence_seconds (%d), so a lost host has stopped its soldiers before their tasks run elsewhere, got %d",
			s.SelfFenceSeconds, s.TakeoverSeconds)
	}
}

// ResolveHostID returns this host's id: KINGDOM_HOST_ID if set, else the
// id start recorded (HostIDFile, when set and present), else
// store.host_id, else the hostname. It is the one resolution of every
// role, start and operator command. The answer is a safe id or an error
// naming where the bad value came from.
func (s Store) ResolveHostID() (string, error) {
	id, from := os.Getenv(HostIDEnv), HostIDEnv
	if id == "" && s.HostIDFile != "" {
		if b, err := os.ReadFile(s.HostIDFile); err == nil {
			id, from = strings.TrimSpace(string(b)), s.HostIDFile+" (recorded by start)"
		}
	}
	if id == "" {
		id, from = s.HostID, "system.yaml store.host_id"
	}
	if id == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("host id: read the hostname: %w (set store.host_id or %s)", err, HostIDEnv)
		}
		id, from = h, "the hostname"
	}
	if err := ids.Check(id); err != nil {
		return "", fmt.Errorf("host id from %s: %w", from, err)
	}
	return id, nil
}

// SelfFence is store.self_fence_seconds.
func (s Store) SelfFence() time.Duration { return seconds(s.SelfFenceSeconds) }

// CallTimeout is store.call_timeout_seconds.
func (s Store) CallTimeout() time.Duration { return seconds(s.CallTimeoutSeconds) }

// ConnectTimeout is store.connect_timeout_seconds.
func (s Store) ConnectTimeout() time.Duration { return seconds(s.ConnectTimeoutSeconds) }

// LeaderStall is store.leader_stall_seconds.
func (s Store) LeaderStall() time.Duration { return seconds(s.LeaderStallSeconds) }

// Takeover is store.takeover_seconds.
func (s Store) Takeover() time.Duration { return seconds(s.TakeoverSeconds) }
