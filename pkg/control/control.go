// Package control is the operator's channel to the king (SPEC §10.11):
// `start pause|resume [--engine E]|task cancel|unpark` drop a request file into
// state/king/control/, the king acts on it in its next tick (it watches the
// directory) and answers in state/king/control/replies/<id>.json. The king
// owns the state the requests change: state/king/paused.json while paused and
// state/king/cancelled/<task>.json for every cancelled task. Other roles
// (generals, the chamberlain's dashboard) only read them, through this
// package.
//
// Every read and write goes through the store's key-value (kv.OnStore;
// namespaces kv.NSControl, NSReplies, NSPauses, NSCancelled), which the
// files store keeps in the paths above.
//
//	s := kv.OnStore(st)
//	id, err := control.Submit(ctx, s, control.Request{Action: control.ActionPause, By: "alice"}, time.Now())
//	reply, err := control.WaitReply(ctx, s, id, 10*time.Second)
package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/parks"
)

// Actions of a Request.
const (
	ActionPause  = "pause"
	ActionResume = "resume"
	ActionCancel = "cancel"
	// ActionCancelEvent withdraws an event not yet dispatched (pending or
	// petitioning) into rejected, with a reason naming who cancelled it.
	ActionCancelEvent = "cancel_event"
	// ActionUnpark lifts a breaker's park (SPEC §12.4): a general's or a
	// source item's (pkg/parks), named by the request's "target".
	ActionUnpark = "unpark"
)

// Request is state/king/control/<id>.json.
type Request struct {
	ID      string `json:"id"`
	Action  string `json:"action"`             // pause | resume | cancel | cancel_event | unpark
	TaskID  string `json:"task_id,omitempty"`  // cancel only
	EventID string `json:"event_id,omitempty"` // cancel_event only
	// Target names the park an unpark lifts, as parks.Target reads it:
	// "general:gen-pr", "item:gh:acme:web:12", "gen-pr", an item key or
	// "acme/web#12". Unpark only.
	Target string `json:"target,omitempty"`
	// Engine narrows a resume to one engine's usage-limit pause (SPEC
	// §10.8); a resume without it lifts the operator's pause and every
	// engine pause.
	Engine    string `json:"engine,omitempty"`
	By        string `json:"by"` // who asked (user@host)
	CreatedAt string `json:"created_at"`
}

// Reply is state/king/control/replies/<id>.json: what the king did.
type Reply struct {
	ID      string `json:"id"`
	Action  string `json:"action"`
	TaskID  string `json:"task_id,omitempty"`
	EventID string `json:"event_id,omitempty"`
	OK      bool   `json:"ok"`
	Message string `json:"message"`
	At      string `json:"at"`
}

// Pause is state/king/paused.json: present while the kingdom is paused. No
// new task is admitted (events stay pending, schedules are held) and
// generals start no soldier; running soldiers finish.
type Pause struct {
	Since string `json:"since"` // RFC 3339 UTC
	By    string `json:"by"`
}

// Cancelled is state/king/cancelled/<task>.json: a task the operator
// cancelled. The king writes it before it acts, so a failure of that attempt
// is reported as Cancelled (never retried) whatever killed it.
type Cancelled struct {
	TaskID     string `json:"task_id"`
	RetryCount int    `json:"retry_count"`
	Was        string `json:"was"` // pending | in_progress
	SoldierID  string `json:"soldier_id,omitempty"`
	By         string `json:"by"`
	At         string `json:"at"`
}

// Validate checks a request as read back.
func (r *Request) Validate() error {
	if r.Engine != "" && (r.Action != ActionResume || !engineRE.MatchString(r.Engine)) {
		return fmt.Errorf("%s: engine %q: only resume takes an engine name (claude, codex, …)", r.Action, r.Engine)
	}
	switch r.Action {
	case ActionPause, ActionResume:
	case ActionCancel:
		if err := ids.Check(r.TaskID); err != nil {
			return fmt.Errorf("cancel: task_id: %w", err)
		}
	case ActionCancelEvent:
		if err := ids.Check(r.EventID); err != nil {
			return fmt.Errorf("cancel_event: event_id: %w", err)
		}
	case ActionUnpark:
		if strings.TrimSpace(r.Target) == "" {
			return errors.New("unpark: target: name the park (a general, or item <key>)")
		}
		key, err := parks.Target(r.Target)
		if err != nil {
			return fmt.Errorf("unpark: target: %w", err)
		}
		if _, name, _ := strings.Cut(key, ":"); name == "" {
			return fmt.Errorf("unpark: target %q names no general or item", r.Target)
		}
	default:
		return fmt.Errorf("unknown action %q (pause, resume, cancel, cancel_event or unpark)", r.Action)
	}
	if r.Target != "" && r.Action != ActionUnpark {
		return fmt.Errorf("%s: target %q: only unpark takes a target", r.Action, r.Target)
	}
	return nil
}

// engineRE is an engine's name as the config spells it.
var engineRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Submit queues a request and returns its id.
func Submit(ctx context.Context, s kv.KV, r Request, now time.Time) (string, error) {
	if r.ID == "" {
		r.ID = fmt.Sprintf("ctl-%d-%s", now.UnixNano(), ids.Rand(4))
	}
	if err := ids.Check(r.ID); err != nil {
		return "", fmt.Errorf("control request id: %w", err)
	}
	if r.CreatedAt == "" {
		r.CreatedAt = doc.FormatTime(now)
	}
	if err := r.Validate(); err != nil {
		return "", err
	}
	if err := kv.PutJSON(ctx, s, kv.NSControl, r.ID, r); err != nil {
		return "", fmt.Errorf("submit control request: %w", err)
	}
	return r.ID, nil
}

// WaitReply polls for the king's reply to request id until timeout, and
// removes the reply it read. ErrNoReply: the king did not answer in time
// (the request stays queued; the king acts on it when it runs).
func WaitReply(ctx context.Context, s kv.KV, id string, timeout time.Duration) (*Reply, error) {
	deadline := time.Now().Add(timeout)
	for {
		b, err := s.Get(ctx, kv.NSReplies, id)
		if err == nil {
			var r Reply
			if err := json.Unmarshal(b, &r); err != nil {
				return nil, fmt.Errorf("reply %s: %w", id, err)
			}
			s.Delete(ctx, kv.NSReplies, id)
			return &r, nil
		}
		if !errors.Is(err, kv.ErrNotFound) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, ErrNoReply
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ErrNoReply means the king did not answer a request in time.
var ErrNoReply = errors.New("no answer from the king (is it running? see `start status`); the request stays queued")

// Queued is one request as filed: the key it is filed under (its id, if it
// is well formed) and its bytes, which the king validates.
type Queued struct {
	Key  string
	Data []byte
}

// Requests lists the queued requests, oldest first (ids sort by their
// unix-nano stamp).
func Requests(ctx context.Context, s kv.KV) ([]Queued, error) {
	m, err := s.List(ctx, kv.NSControl)
	if err != nil {
		return nil, err
	}
	out := make([]Queued, 0, len(m))
	for k, b := range m {
		out = append(out, Queued{Key: k, Data: b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Answer files the king's reply to the request filed under key, then
// removes the request: a crash between the two acts on it again, which is
// harmless (package king). A reply whose id is not safe is not filed.
func Answer(ctx context.Context, s kv.KV, key string, rep Reply) error {
	if ids.Valid(rep.ID) {
		if err := kv.PutJSON(ctx, s, kv.NSReplies, rep.ID, rep); err != nil {
			return fmt.Errorf("reply to control request %s: %w", rep.ID, err)
		}
	}
	return s.Delete(ctx, kv.NSControl, key)
}

// PruneReplies removes the replies answered before cutoff (nobody waited
// for them) and any that do not decode.
func PruneReplies(ctx context.Context, s kv.KV, cutoff time.Time) error {
	m, err := s.List(ctx, kv.NSReplies)
	if err != nil {
		return err
	}
	var errs []error
	for id, b := range m {
		var r Reply
		if json.Unmarshal(b, &r) == nil {
			if at, err := doc.ParseTime(r.At); err == nil && !at.Before(cutoff) {
				continue
			}
		}
		if err := s.Delete(ctx, kv.NSReplies, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ReadPause returns the pause state, or nil when the kingdom is not paused.
// An unreadable value counts as paused (since unknown): a pause must never
// be lifted by accident.
func ReadPause(ctx context.Context, s kv.KV) (*Pause, error) {
	var p Pause
	err := kv.GetJSON(ctx, s, kv.NSPauses, kv.KeyKingdom, &p)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return &Pause{}, err
	}
	return &p, nil
}

// Paused reports whether the kingdom is paused.
func Paused(ctx context.Context, s kv.KV) bool {
	p, _ := ReadPause(ctx, s)
	return p != nil
}

// WritePause records the kingdom's pause (the king's alone).
func WritePause(ctx context.Context, s kv.KV, p Pause) error {
	if err := kv.PutJSON(ctx, s, kv.NSPauses, kv.KeyKingdom, p); err != nil {
		return fmt.Errorf("write pause state: %w", err)
	}
	return nil
}

// LiftPause removes the kingdom's pause and reports whether there was one.
func LiftPause(ctx context.Context, s kv.KV) (bool, error) {
	var was bool
	err := s.Update(ctx, kv.NSPauses, kv.KeyKingdom, func(old []byte) ([]byte, error) {
		was = old != nil
		return nil, nil
	})
	if err != nil {
		return false, fmt.Errorf("remove pause state: %w", err)
	}
	return was, nil
}

// ReadCancelled returns the cancel record of a task, or nil.
func ReadCancelled(ctx context.Context, s kv.KV, task string) *Cancelled {
	if !ids.Valid(task) {
		return nil
	}
	var c Cancelled
	if kv.GetJSON(ctx, s, kv.NSCancelled, task, &c) != nil {
		return nil
	}
	return &c
}

// WriteCancelled records (or rewrites) the cancel record of rec.TaskID.
func WriteCancelled(ctx context.Context, s kv.KV, rec Cancelled) error {
	if err := ids.Check(rec.TaskID); err != nil {
		return fmt.Errorf("cancel record: %w", err)
	}
	if err := kv.PutJSON(ctx, s, kv.NSCancelled, rec.TaskID, rec); err != nil {
		return fmt.Errorf("write cancel record of %s: %w", rec.TaskID, err)
	}
	return nil
}

// DropCancelled removes the cancel record of a task (none is no error).
func DropCancelled(ctx context.Context, s kv.KV, task string) error {
	return s.Delete(ctx, kv.NSCancelled, task)
}

// CancelledTasks returns every readable cancel record by task id.
func CancelledTasks(ctx context.Context, s kv.KV) (map[string]*Cancelled, error) {
	m, err := s.List(ctx, kv.NSCancelled)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*Cancelled, len(m))
	for task, b := range m {
		var c Cancelled
		if json.Unmarshal(b, &c) == nil {
			out[task] = &c
		}
	}
	return out, nil
}
