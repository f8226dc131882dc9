package doc

import "encoding/json"

// Priorities of events and tasks.
const (
	PriorityHigh   = "high"
	PriorityNormal = "normal"
	PriorityLow    = "low"
)

// Event sources.
const (
	SourceGitHub   = "github"
	SourceJira     = "jira"
	SourceSlack    = "slack"
	SourceInbox    = "inbox"
	SourceSchedule = "schedule"
)

// Event statuses; each mirrors a queue/events/ directory.
const (
	EventPending     = "pending"
	EventDispatched  = "dispatched"
	EventPetitioning = "petitioning"
	EventCompleted   = "completed"
	EventRejected    = "rejected"
)

// Task statuses. A completed task may also carry its result's status
// (failed, needs_human, skipped), as in seed 003.
const (
	TaskPending    = "pending"
	TaskInProgress = "in_progress"
	TaskCompleted  = "completed"
	TaskRejected   = "rejected"
)

// TaskTypeResume is the type of a task that resumes a needs_human task.
const TaskTypeResume = "resume"

// TaskRetrying marks a task the king rewrote inside in_progress/ for a retry
// and has not re-queued yet (SPEC §9.1). Only the king writes it; a general
// must leave such a task alone.
const TaskRetrying = "retrying"

// Message statuses; each mirrors a queue/messages/ directory.
const (
	MessagePending  = "pending"
	MessageSent     = "sent"
	MessageFailed   = "failed"
	MessageRejected = "rejected"
)

// Message types.
const (
	MessageThreadStart       = "thread_start"
	MessageThreadUpdate      = "thread_update"
	MessageThreadReply       = "thread_reply"
	MessageHumanInputRequest = "human_input_request"
	MessageNotification      = "notification"
	MessageReport            = "report"
)

// Message urgencies.
const (
	UrgencyNormal = "normal"
	UrgencyHigh   = "high"
	UrgencyUrgent = "urgent"
)

// Completion markers of a message's Final field (SPEC §9.10).
const (
	FinalDone    = "done"
	FinalFailed  = "failed"
	FinalSkipped = "skipped"
)

// Result statuses.
const (
	ResultSuccess    = "success"
	ResultFailed     = "failed"
	ResultKilled     = "killed"
	ResultNeedsHuman = "needs_human"
	ResultSkipped    = "skipped"
)

// Failure reasons of failed and killed results (SPEC §9.6).
const (
	ReasonAgentFailed    = "AgentFailed"
	ReasonEngineError    = "EngineError"
	ReasonEngineMissing  = "EngineMissing"
	ReasonSoldierDied    = "SoldierDied"
	ReasonTimeout        = "Timeout"
	ReasonInvalidResult  = "InvalidResult"
	ReasonPromptTooLarge = "PromptTooLarge"
	// ReasonNoResult: the engine ended its run normally without a result
	// (SPEC §10.2). Terminal: the agent may already have had side effects.
	ReasonNoResult = "NoResult"
	// ReasonEngineRefused: the engine refused its configuration (bypass
	// mode as root, an unknown flag, no credentials; SPEC §10.4).
	ReasonEngineRefused = "EngineRefused"
	// ReasonSessionLost: a resume whose session is gone (SPEC §10.5).
	ReasonSessionLost = "SessionLost"
	// ReasonBudgetExceeded: the task's budget was reached (SPEC §10.7).
	ReasonBudgetExceeded = "BudgetExceeded"
	// ReasonUsageLimited: the engine hit a usage or rate limit; the task
	// is re-queued without counting an attempt (SPEC §10.8).
	ReasonUsageLimited = "UsageLimited"
	// ReasonCancelled: an operator cancelled the task (SPEC §10.11).
	ReasonCancelled = "Cancelled"
	// ReasonHostLost: the host running the attempt stopped renewing its
	// lease for takeover_seconds; the task runs again elsewhere as a new
	// attempt (PostgreSQL mode, SPEC §11.7). Retryable.
	ReasonHostLost = "HostLost"
	// ReasonStalled: the breaker killed an attempt that made no progress
	// (no engine event, no worktree change) for no_progress_minutes
	// (SPEC §12.4). Retried, once: the king fails a second Stalled.
	ReasonStalled = "Stalled"
	// ReasonRunaway: the breaker killed an attempt whose cost or tokens
	// since its last progress passed burn_usd / burn_tokens (SPEC §12.4).
	// Terminal.
	ReasonRunaway = "Runaway"
)

// DefaultTerminal reports whether a failure with this reason fails the task
// at once rather than being retried (SPEC §9.6). An agent's own failure is
// terminal because its side effects (a posted review) must not repeat; only
// EngineError, SoldierDied, HostLost and Stalled (once, by the king) are
// retryable. Unknown reasons are terminal: retrying what we do not
// understand risks repeating side effects.
func DefaultTerminal(reason string) bool {
	switch reason {
	case ReasonEngineError, ReasonSoldierDied, ReasonHostLost, ReasonStalled:
		return false
	}
	return true
}

// Event is queue/events/<state>/<id>.json.
type Event struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Source   string         `json:"source"`
	Repo     *string        `json:"repo"`
	Payload  map[string]any `json:"payload"`
	Priority string         `json:"priority"`
	// CreatedAt is RFC 3339 UTC (FormatTime).
	CreatedAt string `json:"created_at"`
	Status    string `json:"status"`
	// TaskID is set when the king dispatches the event (SPEC §9.2).
	TaskID string `json:"task_id,omitempty"`
}

// MarshalJSON writes a nil Payload as {}.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event
	p := plain(e)
	if p.Payload == nil {
		p.Payload = map[string]any{}
	}
	return json.Marshal(p)
}

// Thread is a Slack thread: the channel and the parent message's ts.
type Thread struct {
	Channel  string `json:"channel"`
	ThreadTS string `json:"thread_ts"`
}

// Task is queue/tasks/<state>/<id>.json.
type Task struct {
	ID            string         `json:"id"`
	EventID       string         `json:"event_id"`
	TargetGeneral string         `json:"target_general"`
	Type          string         `json:"type"`
	Repo          *string        `json:"repo"`
	Payload       map[string]any `json:"payload"`
	Priority      string         `json:"priority"`
	CreatedAt     string         `json:"created_at"`
	Status        string         `json:"status"`
	// RetryCount is the attempt number, 0 for the first (SPEC §9.1).
	RetryCount int `json:"retry_count"`
	// NotBefore (RFC 3339) holds a retried task back until then.
	NotBefore string `json:"not_before,omitempty"`
	// UsageLimits counts the times the king re-queued the task for a usage
	// limit (no attempt counted, SPEC §10.8); past a cap it fails for good.
	UsageLimits int `json:"usage_limits,omitempty"`
	// SessionID, OriginalTaskID, Workdir and Thread are set on resume tasks
	// (SPEC §4.4, §9.8).
	SessionID      string  `json:"session_id,omitempty"`
	OriginalTaskID string  `json:"original_task_id,omitempty"`
	Workdir        string  `json:"workdir,omitempty"`
	Thread         *Thread `json:"thread,omitempty"`
	// Host, when set, is the only host that may run the task: a resume or
	// a conversation follow-up runs where the asking attempt ran, beside
	// its workspace and the engine's stored session (PostgreSQL mode,
	// SPEC §11.7). Empty: any host.
	Host string `json:"host,omitempty"`
}

// MarshalJSON writes a nil Payload as {}.
func (t Task) MarshalJSON() ([]byte, error) {
	type plain Task
	p := plain(t)
	if p.Payload == nil {
		p.Payload = map[string]any{}
	}
	return json.Marshal(p)
}

// SourceRef points at the Slack message that caused the work.
type SourceRef struct {
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// ReplyContext is what a human's thread reply needs to resume a task.
type ReplyContext struct {
	General   string  `json:"general"`
	SessionID string  `json:"session_id"`
	Repo      *string `json:"repo"`
	TaskID    string  `json:"task_id"`
	Channel   string  `json:"channel,omitempty"`
	ThreadTS  string  `json:"thread_ts,omitempty"`
	// Workdir is the kept working directory a conversation's follow-up
	// resumes in (the general checks it is one of its task dirs).
	Workdir string `json:"workdir,omitempty"`
}

// TrackConversation asks the envoy to treat replies in the thread as a
// conversation for TTLSeconds.
type TrackConversation struct {
	ReplyContext ReplyContext `json:"reply_context"`
	TTLSeconds   int          `json:"ttl_seconds"`
	// UserID is the Slack user whose follow-ups continue the conversation
	// ("" = anyone allowed).
	UserID string `json:"user_id,omitempty"`
}

// Message is queue/messages/<state>/<id>.json (SPEC §3.3, §9.10).
type Message struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	// TaskID is nil for system messages; proclamation-<task-id> for
	// proclamations.
	TaskID *string `json:"task_id"`
	// Channel empty means the envoy's default channel.
	Channel   string         `json:"channel,omitempty"`
	Urgency   string         `json:"urgency"`
	Content   string         `json:"content"`
	Context   map[string]any `json:"context"`
	SourceRef *SourceRef     `json:"source_ref"`
	CreatedAt string         `json:"created_at"`
	Status    string         `json:"status"`
	// ThreadTS posts into this thread.
	ThreadTS          *string            `json:"thread_ts,omitempty"`
	ReplyContext      *ReplyContext      `json:"reply_context,omitempty"`
	TrackConversation *TrackConversation `json:"track_conversation,omitempty"`
	// Final is one of FinalDone, FinalFailed, FinalSkipped, or nil.
	Final *string `json:"final,omitempty"`
}

// MarshalJSON writes a nil Context as {}.
func (m Message) MarshalJSON() ([]byte, error) {
	type plain Message
	p := plain(m)
	if p.Context == nil {
		p.Context = map[string]any{}
	}
	return json.Marshal(p)
}

// Proclamation is an extra announcement a result asks for, posted as a new
// message in Channel (seed 003).
type Proclamation struct {
	Channel string `json:"channel"`
	Message string `json:"message"`
}

// RawOrigin is the raw result's property where soldier-spawn records
// where an agent's result came from ("agent result <staging file>",
// "agent structured output"). The schema allows extra properties and the
// Go type drops it: it serves only the general's message when the result
// fails its schema (soldier-spawn does not validate, see the package doc).
const RawOrigin = "origin"

// RawFallback is the raw result's property holding the agent's staging
// result when its structured output was published instead: SPEC §10.1's
// precedence is structured output > a *valid* staging file, and only the
// general validates, so it takes the fallback when the structured output
// fails the schema and the fallback passes.
const RawFallback = "fallback"

// RawResult is state/results/<task>-raw.json: one soldier attempt's outcome.
type RawResult struct {
	TaskID  string `json:"task_id"`
	Status  string `json:"status"`
	Summary string `json:"summary"`
	// Error is required when Status is failed or killed.
	Error       string `json:"error,omitempty"`
	ErrorReason string `json:"error_reason,omitempty"`
	// Terminal, when set, overrides DefaultTerminal(ErrorReason).
	Terminal *bool `json:"terminal,omitempty"`
	// Question is required when Status is needs_human.
	Question string `json:"question,omitempty"`
	// Reason is required when Status is skipped.
	Reason        string         `json:"reason,omitempty"`
	MemoryUpdates []string       `json:"memory_updates,omitempty"`
	NotifyChannel string         `json:"notify_channel,omitempty"`
	Proclamation  *Proclamation  `json:"proclamation,omitempty"`
	Metrics       map[string]any `json:"metrics,omitempty"`
	// ResetsAt (RFC 3339) is when a UsageLimited engine accepts work again
	// (SPEC §10.8).
	ResetsAt string `json:"resets_at,omitempty"`
	// RetryCount is the attempt, when the writer knows it. Result has its
	// own, required RetryCount that hides this one.
	RetryCount int    `json:"retry_count,omitempty"`
	SessionID  string `json:"session_id,omitempty"`
	// TrackConversation asks to keep the conversation: the completion is
	// posted as a conversation thread whose follow-ups resume the session
	// (SPEC §9.10).
	TrackConversation bool `json:"track_conversation,omitempty"`
	// Usage and CostUSD are the attempt's token usage and cost (SPEC
	// §10.6), for failed attempts too; CostUSD is nil when unpriced.
	Usage   *Usage   `json:"usage,omitempty"`
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// Outputs are the side effects the agent asks Kingdom to carry out
	// after its soldier exits, in this order (SPEC §12.3): the agent
	// holds no write token.
	Outputs []Output `json:"outputs,omitempty"`
}

// Output kinds (SPEC §12.3).
const (
	OutputGitHubReview      = "github.review"
	OutputGitHubComment     = "github.comment"
	OutputGitHubPush        = "github.push"
	OutputGitHubPullRequest = "github.pull_request"
	OutputJiraComment       = "jira.comment"
)

// OutputKinds are every output kind, in the order they are documented.
var OutputKinds = []string{OutputGitHubReview, OutputGitHubComment, OutputGitHubPush, OutputGitHubPullRequest, OutputJiraComment}

// Output is one side effect an agent asks for. Kind says which fields
// count: github.review {event, body, comments}, github.comment {body},
// github.push {branch_suffix, message}, github.pull_request {title,
// body}, jira.comment {body}; the others are ignored.
type Output struct {
	Kind         string          `json:"kind"`
	Event        string          `json:"event,omitempty"` // COMMENT or REQUEST_CHANGES
	Body         string          `json:"body,omitempty"`
	Comments     []ReviewComment `json:"comments,omitempty"`
	BranchSuffix string          `json:"branch_suffix,omitempty"`
	Message      string          `json:"message,omitempty"`
	Title        string          `json:"title,omitempty"`
}

// ReviewComment is one line comment of a github.review output.
type ReviewComment struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Body string `json:"body"`
}

// Output outcome states. An outcome is recorded pending (asked),
// started (its call is under way) and ends done, refused or failed.
const (
	OutcomePending = "pending"
	OutcomeStarted = "started"
	OutcomeDone    = "done"
	OutcomeRefused = "refused"
	OutcomeFailed  = "failed"
)

// OutputOutcome is what became of one output: done with its link,
// refused with the reason, or failed with the error.
type OutputOutcome struct {
	Index  int    `json:"index"`
	Kind   string `json:"kind"`
	State  string `json:"state"`
	Link   string `json:"link,omitempty"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Usage is the token usage of one engine run (SPEC §10.6).
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// Add returns u + v; a nil operand counts as zero.
func (u *Usage) Add(v *Usage) *Usage {
	var out Usage
	for _, x := range []*Usage{u, v} {
		if x != nil {
			out.InputTokens += x.InputTokens
			out.OutputTokens += x.OutputTokens
			out.CacheReadInputTokens += x.CacheReadInputTokens
			out.CacheCreationInputTokens += x.CacheCreationInputTokens
		}
	}
	return &out
}

// IsTerminal reports whether a failure must not be retried: the result's
// explicit Terminal if set, else DefaultTerminal(ErrorReason).
func (r *RawResult) IsTerminal() bool {
	if r.Terminal != nil {
		return *r.Terminal
	}
	return DefaultTerminal(r.ErrorReason)
}

// Result is state/results/<task>.json: the raw result completed by the
// general. Its RetryCount (always written) hides RawResult.RetryCount.
type Result struct {
	RawResult
	General         string  `json:"general"`
	DurationSeconds float64 `json:"duration_seconds"`
	CompletedAt     string  `json:"completed_at"`
	RetryCount      int     `json:"retry_count"`
	CheckpointPath  string  `json:"checkpoint_path,omitempty"`
	// Workdir is kept for a tracked conversation's follow-up.
	Workdir   string `json:"workdir,omitempty"`
	SoldierID string `json:"soldier_id,omitempty"`
	// Host is the host that ran the attempt (PostgreSQL mode; empty in
	// file mode): a resume of its question runs there (SPEC §11.7).
	Host string `json:"host,omitempty"`
	// OutputOutcomes say what became of each of RawResult.Outputs, in
	// their order (SPEC §12.3): the task's thread and task.completed
	// list them.
	OutputOutcomes []OutputOutcome `json:"output_outcomes,omitempty"`
}

// InboxEvent is inbox/*.json as other tools drop it (SPEC §9.20).
type InboxEvent struct {
	ID       string         `json:"id,omitempty"`
	Type     string         `json:"type"`
	Repo     *string        `json:"repo,omitempty"`
	Payload  map[string]any `json:"payload,omitempty"`
	Priority string         `json:"priority,omitempty"`
}

// Checkpoint is state/results/<task>-checkpoint.json, left by a needs_human
// task for its resume (SPEC §9.8).
type Checkpoint struct {
	TaskID    string  `json:"task_id"`
	SessionID string  `json:"session_id"`
	Workdir   string  `json:"workdir"`
	Thread    *Thread `json:"thread"`
	Question  string  `json:"question"`
	General   string  `json:"general"`
	Repo      *string `json:"repo"`
	// Host asked the question (PostgreSQL mode; empty in file mode): the
	// resume runs there, beside the workdir and the engine's session.
	Host string `json:"host,omitempty"`
}

// PetitionResult is the classifier's answer: exactly one of General and
// DirectResponse is set.
type PetitionResult struct {
	General        string `json:"general,omitempty"`
	DirectResponse string `json:"direct_response,omitempty"`
}

// StringPtr returns a pointer to s, or nil when s is empty: the usual way to
// fill a nullable string field such as Repo.
func StringPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Deref returns *p, or "" when p is nil.
func Deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
