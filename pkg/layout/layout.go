// Package layout knows every path under $BASE_DIR (SPEC §2). Callers build one
// Layout from the resolved base directory and pass it around; no other code
// joins path fragments under the base dir by hand.
package layout

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// DefaultBase is the installation directory used when neither the flag nor
// KINGDOM_BASE_DIR names one.
const DefaultBase = "/opt/kingdom"

// EnvBase is the environment variable naming the base directory.
const EnvBase = "KINGDOM_BASE_DIR"

// EnvTaskID names the task a soldier's engine works on; with EnvBase it
// marks every process the engine started, however detached.
const EnvTaskID = "KINGDOM_TASK_ID"

// ResolveBase applies the precedence --base-dir flag > KINGDOM_BASE_DIR >
// /opt/kingdom and returns an absolute path.
func ResolveBase(flag string) string {
	b := flag
	if b == "" {
		b = os.Getenv(EnvBase)
	}
	if b == "" {
		b = DefaultBase
	}
	if abs, err := filepath.Abs(b); err == nil {
		b = abs
	}
	return b
}

// Layout is the runtime tree rooted at Base.
type Layout struct {
	Base string
}

// New returns the layout rooted at base.
func New(base string) Layout { return Layout{Base: base} }

func (l Layout) p(parts ...string) string {
	return filepath.Join(append([]string{l.Base}, parts...)...)
}

// Queue kinds and their state directories.
const (
	QEvents   = "events"
	QTasks    = "tasks"
	QMessages = "messages"
)

// Queue state names.
const (
	Pending     = "pending"
	Dispatched  = "dispatched"
	Petitioning = "petitioning"
	Completed   = "completed"
	Rejected    = "rejected"
	InProgress  = "in_progress"
	Sent        = "sent"
	Failed      = "failed"
)

// QueueStates lists the state directories of each queue kind.
var QueueStates = map[string][]string{
	QEvents:   {Pending, Dispatched, Petitioning, Completed, Rejected},
	QTasks:    {Pending, InProgress, Completed, Rejected},
	QMessages: {Pending, Sent, Failed, Rejected},
}

// Core roles (generals are named by their manifests).
const (
	RoleStart       = "start"
	RoleSentinel    = "sentinel"
	RoleKing        = "king"
	RoleEnvoy       = "envoy"
	RoleChamberlain = "chamberlain"
)

// CoreRoles are the always-on roles besides the generals.
var CoreRoles = []string{RoleSentinel, RoleKing, RoleEnvoy, RoleChamberlain}

// TmuxSocketFile records the tmux socket start launched the roles on, so
// every other binary finds the same server without KINGDOM_TMUX_SOCKET.
func (l Layout) TmuxSocketFile() string { return l.p("state", "start", "tmux-socket") }

// Config paths.
func (l Layout) ConfigDir() string             { return l.p("config") }
func (l Layout) ConfigFile(name string) string { return l.p("config", name) }
func (l Layout) GeneralsConfigDir() string     { return l.p("config", "generals") }
func (l Layout) GeneralManifest(name string) string {
	return l.p("config", "generals", name+".yaml")
}
func (l Layout) TemplatesDir() string { return l.p("config", "generals", "templates") }
func (l Layout) Template(name string) string {
	return l.p("config", "generals", "templates", name+".md")
}
func (l Layout) WorkspaceClaudeMD() string { return l.p("config", "workspace-claude.md") }
func (l Layout) EnvFile() string           { return l.p("config", "kingdom.env") }

// StartSecretsFile holds the secrets of start's own environment for its
// roles (0600): secrets never travel through the tmux server's environment.
func (l Layout) StartSecretsFile() string { return l.p("state", "start-secrets.env") }

// GeneralPackages is the dir of installable general packages (source).
func (l Layout) GeneralPackages() string { return l.p("generals") }

// Bin is $BASE_DIR/bin, the fallback location of role binaries.
func (l Layout) Bin() string { return l.p("bin") }

// Inbox paths.
func (l Layout) Inbox() string         { return l.p("inbox") }
func (l Layout) InboxRejected() string { return l.p("inbox", "rejected") }

// QueueDir is queue/<kind>; QueueState is queue/<kind>/<state>.
func (l Layout) QueueDir(kind string) string          { return l.p("queue", kind) }
func (l Layout) QueueState(kind, state string) string { return l.p("queue", kind, state) }

// State paths.
func (l Layout) StateDir() string                { return l.p("state") }
func (l Layout) RoleStateDir(role string) string { return l.p("state", role) }

func (l Layout) Heartbeat(role string) string  { return l.p("state", role, "heartbeat") }
func (l Layout) LeaderLock(role string) string { return l.p("state", role, "leader.lock") }

// StoreUnreachable exists while role's ticks cannot reach the store: the
// runner writes {since, error} at the first failure and removes it at the
// first tick that succeeds (SPEC §12.2), so the verdict names the cause.
func (l Layout) StoreUnreachable(role string) string {
	return l.p("state", role, "store-unreachable.json")
}

// HostLease is touched by start after each successful renewal of this
// host in the hosts registry (store.kind postgres): its mtime is the last
// renewal, by which generals self-fence (hosts.SelfFence).
func (l Layout) HostLease() string { return l.p("state", "start", "host-lease") }

// LastExit holds a role's last fatal error, for start (app.LastExit).
func (l Layout) LastExit(role string) string { return l.p("state", role, "last-exit") }
func (l Layout) Resources() string           { return l.p("state", "resources.json") }
func (l Layout) SessionsJSON() string        { return l.p("state", "sessions.json") }
func (l Layout) SessionsLock() string        { return l.p("state", "sessions.lock") }

// Results paths (state/results).
func (l Layout) ResultsDir() string             { return l.p("state", "results") }
func (l Layout) ResultFinal(task string) string { return l.p("state", "results", task+".json") }
func (l Layout) ResultRaw(task string) string   { return l.p("state", "results", task+"-raw.json") }
func (l Layout) ResultStaging(task string) string {
	return l.p("state", "results", task+"-result.json")
}
func (l Layout) ResultSoldierID(task string) string {
	return l.p("state", "results", task+"-soldier-id")
}
func (l Layout) ResultSessionID(task string) string {
	return l.p("state", "results", task+"-session-id")
}
func (l Layout) ResultCheckpoint(task string) string {
	return l.p("state", "results", task+"-checkpoint.json")
}

// ResultSpent is what the current attempt's engine reported spending so
// far, kept by the soldier while it runs: a killed attempt's raw result is
// written by whoever killed it, and takes its usage from here.
func (l Layout) ResultSpent(task string) string {
	return l.p("state", "results", task+"-usage.json")
}

// AttemptFiles are the files one attempt of task leaves beside its final
// result; the next attempt starts without them (SPEC §9.1).
func (l Layout) AttemptFiles(task string) []string {
	return []string{l.ResultRaw(task), l.ResultStaging(task), l.ResultHeartbeat(task), l.ResultSoldierID(task), l.ResultSpent(task)}
}

func (l Layout) ResultHeartbeat(task string) string {
	return l.p("state", "results", task+"-heartbeat")
}

// ResultOutputSchema is the result schema handed to codex (--output-schema)
// for one attempt; ResultLastMessage is where codex writes its last message
// (-o). The soldier removes both after reading them.
func (l Layout) ResultOutputSchema(task string) string {
	return l.p("state", "results", task+"-output-schema.json")
}
func (l Layout) ResultLastMessage(task string) string {
	return l.p("state", "results", task+"-last-message.txt")
}

// Prompts.
func (l Layout) PromptsDir() string        { return l.p("state", "prompts") }
func (l Layout) Prompt(task string) string { return l.p("state", "prompts", task+".md") }

// King state.
func (l Layout) KingTaskSeq() string        { return l.p("state", "king", "task-seq") }
func (l Layout) KingMsgSeq() string         { return l.p("state", "king", "msg-seq") }
func (l Layout) KingScheduleSent() string   { return l.p("state", "king", "schedule-sent.json") }
func (l Layout) PetitionResultsDir() string { return l.p("state", "king", "petition-results") }
func (l Layout) PetitionResult(id string) string {
	return l.p("state", "king", "petition-results", id+".json")
}
func (l Layout) PetitionPromptsDir() string { return l.p("state", "king", "petition-prompts") }

// Operator control (SPEC §10.11, pkg/control): requests the king acts on,
// its replies, the pause state and the record of cancelled tasks.
func (l Layout) KingControlDir() string     { return l.p("state", "king", "control") }
func (l Layout) KingControlReplies() string { return l.p("state", "king", "control", "replies") }
func (l Layout) KingPaused() string         { return l.p("state", "king", "paused.json") }
func (l Layout) KingCancelledDir() string   { return l.p("state", "king", "cancelled") }
func (l Layout) KingCancelled(task string) string {
	return l.p("state", "king", "cancelled", task+".json")
}

// Sentinel state.
func (l Layout) SentinelGitHubState() string { return l.p("state", "sentinel", "github-state.json") }
func (l Layout) SentinelJiraState() string   { return l.p("state", "sentinel", "jira-state.json") }
func (l Layout) SeenDir() string             { return l.p("state", "sentinel", "seen") }

// Envoy state.
func (l Layout) EnvoyThreadMappings() string { return l.p("state", "envoy", "thread-mappings.json") }
func (l Layout) EnvoyAwaiting() string       { return l.p("state", "envoy", "awaiting-responses.json") }
func (l Layout) EnvoyConversations() string {
	return l.p("state", "envoy", "conversation-threads.json")
}
func (l Layout) EnvoyConsoleInbox() string { return l.p("state", "envoy", "console-inbox") }

// Chamberlain state.
func (l Layout) ChamberlainDir() string    { return l.p("state", "chamberlain") }
func (l Layout) ChamberlainCursor() string { return l.p("state", "chamberlain", "events-cursor.json") }
func (l Layout) ChamberlainAnomalyState() string {
	return l.p("state", "chamberlain", "anomaly-state.json")
}
func (l Layout) ChamberlainAlertState() string {
	return l.p("state", "chamberlain", "alert-state.json")
}

// DashboardSocket is the dashboard's unix socket (chamberlain.yaml
// http.listen: unix), alone in a 0700 directory.
func (l Layout) DashboardSocket() string { return l.p("run", "dashboard.sock") }

// Memory.
func (l Layout) MemoryDir() string                { return l.p("memory") }
func (l Layout) MemoryShared() string             { return l.p("memory", "shared") }
func (l Layout) MemoryGeneral(name string) string { return l.p("memory", "generals", name) }

// Logs.
func (l Layout) LogsDir() string         { return l.p("logs") }
func (l Layout) SystemLog() string       { return l.p("logs", "system.log") }
func (l Layout) EventsLog() string       { return l.p("logs", "events.log") }
func (l Layout) TasksLog() string        { return l.p("logs", "tasks.log") }
func (l Layout) MetricsLog() string      { return l.p("logs", "metrics.log") }
func (l Layout) RotateLock() string      { return l.p("logs", ".rotate.lock") }
func (l Layout) EnvoyConsoleLog() string { return l.p("logs", "envoy-console.log") }
func (l Layout) SessionLogsDir() string  { return l.p("logs", "sessions") }
func (l Layout) AnalysisDir() string     { return l.p("logs", "analysis") }
func (l Layout) StatsJSON() string       { return l.p("logs", "analysis", "stats.json") }
func (l Layout) SessionLog(soldier string) string {
	return l.p("logs", "sessions", soldier+".json")
}
func (l Layout) SessionErr(soldier string) string {
	return l.p("logs", "sessions", soldier+".err")
}

// EventsLogDay is the daily split of events.log, date as YYYYMMDD.
func (l Layout) EventsLogDay(yyyymmdd string) string {
	return l.p("logs", "events-"+yyyymmdd+".log")
}

// DailyReport is logs/analysis/daily-YYYYMMDD.json.
func (l Layout) DailyReport(yyyymmdd string) string {
	return l.p("logs", "analysis", "daily-"+yyyymmdd+".json")
}

// Workspace (SPEC §9.9).
func (l Layout) WorkspaceDir() string             { return l.p("workspace") }
func (l Layout) WorkspaceGeneral(g string) string { return l.p("workspace", g) }
func (l Layout) RepoClone(g, ownerRepo string) string {
	return l.p("workspace", g, "repos", RepoDirName(ownerRepo))
}
func (l Layout) TaskDir(g, task string) string { return l.p("workspace", g, "tasks", task) }

// OldLayoutDirs are glob patterns of directories earlier versions kept
// under the base dir and this one neither writes nor reads: the spare-inode
// pools (state/<role>/spare, state/<role>/spare-fresh, a placement's
// state/<role>/.try-spare-*) and a general's kept task dirs
// (workspace/<general>/spare). Only directories match: a seen marker or a
// result file of the same name is not one of them.
func (l Layout) OldLayoutDirs() []string {
	return []string{
		l.p("state", "*", "spare*"),
		l.p("state", "*", ".try-spare*"),
		l.p("workspace", "*", "spare"),
	}
}

// OldLayoutFiles are files earlier versions kept: sessions.json's swap
// sibling.
func (l Layout) OldLayoutFiles() []string {
	return []string{l.p("state", ".sessions.json.swap")}
}

// RepoDirName turns "owner/repo" into "owner__repo".
func RepoDirName(ownerRepo string) string {
	out := make([]byte, 0, len(ownerRepo)+1)
	for i := 0; i < len(ownerRepo); i++ {
		if ownerRepo[i] == '/' {
			out = append(out, '_', '_')
			continue
		}
		out = append(out, ownerRepo[i])
	}
	return string(out)
}

// Dirs returns every directory of the tree that Ensure creates.
func (l Layout) Dirs() []string {
	d := []string{
		l.ConfigDir(), l.GeneralsConfigDir(), l.TemplatesDir(), l.GeneralPackages(),
		l.Inbox(), l.InboxRejected(),
		l.StateDir(), l.ResultsDir(), l.PromptsDir(),
		l.PetitionResultsDir(), l.PetitionPromptsDir(), l.SeenDir(), l.EnvoyConsoleInbox(), l.ChamberlainDir(),
		// The king writes here too: listed so its start-up sweep removes a
		// killed king's temps (the chaos test found one in spend/).
		l.SpendDir(), l.KingControlDir(), l.KingControlReplies(), l.KingCancelledDir(),
		l.MemoryShared(), l.p("memory", "generals"),
		l.LogsDir(), l.SessionLogsDir(), l.AnalysisDir(),
		l.WorkspaceDir(),
	}
	for _, role := range []string{RoleStart, RoleSentinel, RoleKing, RoleEnvoy, RoleChamberlain} {
		d = append(d, l.RoleStateDir(role))
	}
	for kind, states := range QueueStates {
		for _, s := range states {
			d = append(d, l.QueueState(kind, s))
		}
	}
	return d
}

// TempDirs returns every directory a dot-temp may be left in: Dirs and
// each directory under state/ and memory/, which the store, the leases
// and the generals make as they are needed (state/store/kv/<ns>,
// spend/<date>, state/<general>, state/sentinel-pollers,
// state/host-<id>, memory/generals/<general>).
func (l Layout) TempDirs() []string {
	seen := map[string]bool{}
	var out []string
	add := func(d string) {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, d := range l.Dirs() {
		add(d)
	}
	for _, root := range []string{l.StateDir(), l.MemoryDir()} {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				add(p)
			}
			return nil
		})
	}
	return out
}

// Ensure creates the whole tree idempotently with 0700 directories. It
// tightens the mode of directories that already exist with looser modes.
func (l Layout) Ensure() error {
	for _, d := range l.Dirs() {
		if err := EnsureDir(d); err != nil {
			return err
		}
	}
	return nil
}

// EnsureDir creates dir (and parents) with mode 0700.
func EnsureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create dir %s: %w", dir, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("stat dir %s: %w", dir, err)
	}
	if st.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("chmod dir %s: %w", dir, err)
		}
	}
	return nil
}
