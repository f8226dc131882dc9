package schema

import (
	"time"

	docpkg "github.com/kingdom-dev/kingdom/pkg/doc"
)

// The document types, constants and helpers live in pkg/doc, which links
// no validator (soldier-spawn imports it; it starts once per task). They
// are re-exported here under the same names, so a reader of another
// role's file needs only this package: schema.DecodeTask returns a
// *schema.Task, which is a *doc.Task.

// Document types (aliases: the same types as pkg/doc's).
type (
	Checkpoint        = docpkg.Checkpoint
	Event             = docpkg.Event
	InboxEvent        = docpkg.InboxEvent
	Kind              = docpkg.Kind
	Message           = docpkg.Message
	Output            = docpkg.Output
	OutputOutcome     = docpkg.OutputOutcome
	ReviewComment     = docpkg.ReviewComment
	PetitionResult    = docpkg.PetitionResult
	Proclamation      = docpkg.Proclamation
	RawResult         = docpkg.RawResult
	ReplyContext      = docpkg.ReplyContext
	Result            = docpkg.Result
	SourceRef         = docpkg.SourceRef
	Task              = docpkg.Task
	Thread            = docpkg.Thread
	TrackConversation = docpkg.TrackConversation
	Usage             = docpkg.Usage
)

// Constants of the document types.
const (
	EventCompleted           = docpkg.EventCompleted
	EventDispatched          = docpkg.EventDispatched
	EventPending             = docpkg.EventPending
	EventPetitioning         = docpkg.EventPetitioning
	EventRejected            = docpkg.EventRejected
	FinalDone                = docpkg.FinalDone
	FinalFailed              = docpkg.FinalFailed
	FinalSkipped             = docpkg.FinalSkipped
	KindCheck                = docpkg.KindCheck
	KindCheckpoint           = docpkg.KindCheckpoint
	KindEvent                = docpkg.KindEvent
	KindInboxEvent           = docpkg.KindInboxEvent
	KindInternalEvent        = docpkg.KindInternalEvent
	KindMessage              = docpkg.KindMessage
	KindPetitionResult       = docpkg.KindPetitionResult
	KindRawResult            = docpkg.KindRawResult
	KindResources            = docpkg.KindResources
	KindResult               = docpkg.KindResult
	KindSessions             = docpkg.KindSessions
	KindState                = docpkg.KindState
	KindTask                 = docpkg.KindTask
	MessageFailed            = docpkg.MessageFailed
	MessageHumanInputRequest = docpkg.MessageHumanInputRequest
	MessageNotification      = docpkg.MessageNotification
	MessagePending           = docpkg.MessagePending
	MessageRejected          = docpkg.MessageRejected
	MessageReport            = docpkg.MessageReport
	MessageSent              = docpkg.MessageSent
	MessageThreadReply       = docpkg.MessageThreadReply
	MessageThreadStart       = docpkg.MessageThreadStart
	MessageThreadUpdate      = docpkg.MessageThreadUpdate
	OutcomeDone              = docpkg.OutcomeDone
	OutcomeFailed            = docpkg.OutcomeFailed
	OutcomePending           = docpkg.OutcomePending
	OutcomeRefused           = docpkg.OutcomeRefused
	OutcomeStarted           = docpkg.OutcomeStarted
	OutputGitHubComment      = docpkg.OutputGitHubComment
	OutputGitHubPullRequest  = docpkg.OutputGitHubPullRequest
	OutputGitHubPush         = docpkg.OutputGitHubPush
	OutputGitHubReview       = docpkg.OutputGitHubReview
	OutputJiraComment        = docpkg.OutputJiraComment
	PriorityHigh             = docpkg.PriorityHigh
	PriorityLow              = docpkg.PriorityLow
	PriorityNormal           = docpkg.PriorityNormal
	RawOrigin                = docpkg.RawOrigin
	RawFallback              = docpkg.RawFallback
	ReasonAgentFailed        = docpkg.ReasonAgentFailed
	ReasonBudgetExceeded     = docpkg.ReasonBudgetExceeded
	ReasonCancelled          = docpkg.ReasonCancelled
	ReasonEngineError        = docpkg.ReasonEngineError
	ReasonEngineMissing      = docpkg.ReasonEngineMissing
	ReasonEngineRefused      = docpkg.ReasonEngineRefused
	ReasonInvalidResult      = docpkg.ReasonInvalidResult
	ReasonNoResult           = docpkg.ReasonNoResult
	ReasonPromptTooLarge     = docpkg.ReasonPromptTooLarge
	ReasonRunaway            = docpkg.ReasonRunaway
	ReasonSessionLost        = docpkg.ReasonSessionLost
	ReasonHostLost           = docpkg.ReasonHostLost
	ReasonSoldierDied        = docpkg.ReasonSoldierDied
	ReasonStalled            = docpkg.ReasonStalled
	ReasonTimeout            = docpkg.ReasonTimeout
	ReasonUsageLimited       = docpkg.ReasonUsageLimited
	ResultFailed             = docpkg.ResultFailed
	ResultKilled             = docpkg.ResultKilled
	ResultNeedsHuman         = docpkg.ResultNeedsHuman
	ResultSkipped            = docpkg.ResultSkipped
	ResultSuccess            = docpkg.ResultSuccess
	SourceGitHub             = docpkg.SourceGitHub
	SourceInbox              = docpkg.SourceInbox
	SourceJira               = docpkg.SourceJira
	SourceSchedule           = docpkg.SourceSchedule
	SourceSlack              = docpkg.SourceSlack
	TaskCompleted            = docpkg.TaskCompleted
	TaskInProgress           = docpkg.TaskInProgress
	TaskPending              = docpkg.TaskPending
	TaskRejected             = docpkg.TaskRejected
	TaskRetrying             = docpkg.TaskRetrying
	TaskTypeResume           = docpkg.TaskTypeResume
	TimeLayout               = docpkg.TimeLayout
	UrgencyHigh              = docpkg.UrgencyHigh
	UrgencyNormal            = docpkg.UrgencyNormal
	UrgencyUrgent            = docpkg.UrgencyUrgent
)

// ErrInvalid and ErrNotJSON are pkg/doc's: errors.Is matches either
// package's name for them.
var (
	ErrInvalid = docpkg.ErrInvalid
	ErrNotJSON = docpkg.ErrNotJSON
)

// OutputKinds are every output kind (doc.OutputKinds).
var OutputKinds = docpkg.OutputKinds

// Kinds lists every document kind.
func Kinds() []Kind { return docpkg.Kinds() }

// FormatTime renders t as a Kingdom timestamp (doc.FormatTime).
func FormatTime(t time.Time) string { return docpkg.FormatTime(t) }

// ParseTime reads an RFC 3339 timestamp in UTC (doc.ParseTime).
func ParseTime(s string) (time.Time, error) { return docpkg.ParseTime(s) }

// StringPtr returns a pointer to s, or nil when s is empty (doc.StringPtr).
func StringPtr(s string) *string { return docpkg.StringPtr(s) }

// Deref returns *p, or "" when p is nil (doc.Deref).
func Deref(p *string) string { return docpkg.Deref(p) }
