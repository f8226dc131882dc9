// Package control is the operator's channel to the king (SPEC §10.11):
// `start pause|resume [--engine E]|task cancel` drop a request file into
// state/king/control/, the king acts on it in its next tick (it watches the
// directory) and answers in state/king/control/replies/<id>.json. The king
// owns the state the requests change: state/king/paused.json while paused and
// state/king/cancelled/<task>.json for every cancelled task. Other roles
// (generals, the chamberlain's dashboard) only read them, through this
// package.
//
//	id, err := control.Submit(l, control.Request{Action: control.ActionPause, By: "alice"}, time.Now())
//	reply, err := control.WaitReply(ctx, l, id, 10*time.Second)
package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// Actions of a Request.
const (
	ActionPause  = "pause"
	ActionResume = "resume"
	ActionCancel = "cancel"
)

// Request is state/king/control/<id>.json.
type Request struct {
	ID     string `json:"id"`
	Action string `json:"action"`            // pause | resume | cancel
	TaskID string `json:"task_id,omitempty"` // cancel only
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

// Validate checks a request read from disk.
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
	default:
		return fmt.Errorf("unknown action %q (pause, resume or cancel)", r.Action)
	}
	return nil
}

// engineRE is an engine's name as the config spells it.
var engineRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Submit writes a request (write-then-rename) and returns its id.
func Submit(l layout.Layout, r Request, now time.Time) (string, error) {
	if r.ID == "" {
		r.ID = fmt.Sprintf("ctl-%d-%s", now.UnixNano(), ids.Rand(4))
	}
	if err := ids.Check(r.ID); err != nil {
		return "", fmt.Errorf("control request id: %w", err)
	}
	if r.CreatedAt == "" {
		r.CreatedAt = schema.FormatTime(now)
	}
	if err := r.Validate(); err != nil {
		return "", err
	}
	if err := layout.EnsureDir(l.KingControlDir()); err != nil {
		return "", err
	}
	if err := atomicfile.WriteJSON(filepath.Join(l.KingControlDir(), r.ID+".json"), r); err != nil {
		return "", fmt.Errorf("submit control request: %w", err)
	}
	return r.ID, nil
}

// WaitReply polls for the king's reply to request id until timeout, and
// removes the reply it read. ErrNoReply: the king did not answer in time
// (the request stays queued; the king acts on it when it runs).
func WaitReply(ctx context.Context, l layout.Layout, id string, timeout time.Duration) (*Reply, error) {
	path := filepath.Join(l.KingControlReplies(), id+".json")
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			var r Reply
			if err := json.Unmarshal(b, &r); err != nil {
				return nil, fmt.Errorf("reply %s: %w", path, err)
			}
			os.Remove(path)
			return &r, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
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

// ReadPause returns the pause state, or nil when the kingdom is not paused.
// An unreadable file counts as paused (since unknown): a pause must never be
// lifted by accident.
func ReadPause(l layout.Layout) (*Pause, error) {
	b, err := os.ReadFile(l.KingPaused())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return &Pause{}, err
	}
	var p Pause
	if err := json.Unmarshal(b, &p); err != nil {
		return &Pause{}, fmt.Errorf("decode %s: %w", l.KingPaused(), err)
	}
	return &p, nil
}

// Paused reports whether the kingdom is paused.
func Paused(l layout.Layout) bool {
	p, _ := ReadPause(l)
	return p != nil
}

// ReadCancelled returns the cancel record of a task, or nil.
func ReadCancelled(l layout.Layout, task string) *Cancelled {
	if !ids.Valid(task) {
		return nil
	}
	b, err := os.ReadFile(l.KingCancelled(task))
	if err != nil {
		return nil
	}
	var c Cancelled
	if json.Unmarshal(b, &c) != nil {
		return nil
	}
	return &c
}

// Requests lists the queued request files, oldest first (names sort by
// their unix-nano stamp).
func Requests(l layout.Layout) ([]string, error) {
	ents, err := os.ReadDir(l.KingControlDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") {
			out = append(out, filepath.Join(l.KingControlDir(), n))
		}
	}
	return out, nil
}
