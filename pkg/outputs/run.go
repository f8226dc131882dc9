package outputs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// NS is the key-value namespace of the output records.
const NS = "outputs"

// Key is the record key of output index of a task's attempt.
func Key(task string, attempt, index int) string {
	return task + "-" + strconv.Itoa(attempt) + "-" + strconv.Itoa(index)
}

// Marker is what a posted body carries so a look-up finds it.
func Marker(key string) string { return "<!-- kingdom:" + key + " -->" }

// Record is one output's record in the store.
type Record struct {
	Kind   string `json:"kind"`
	State  string `json:"state"` // pending, started, done, refused, failed
	Link   string `json:"link,omitempty"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	// Branch is a push's branch (a pull request's head).
	Branch string `json:"branch,omitempty"`
	At     string `json:"at"`
}

func (r Record) final() bool {
	return r.State == doc.OutcomeDone || r.State == doc.OutcomeRefused || r.State == doc.OutcomeFailed
}

// Pusher commits and pushes the task's worktree (the general's: it owns
// the worktree and runs git).
type Pusher interface {
	// Push commits the worktree's changes with message (key in a
	// trailer) and pushes them, never forced, to branch. refused says why
	// it may not (a protected path, a patch over the cap, nothing to
	// push); link is where the branch can be seen.
	Push(ctx context.Context, branch, message, key string) (link, refused string, err error)
	// Pushed reports the link of branch when the remote already has this
	// worktree's commit on it (a push whose end was not recorded).
	Pushed(ctx context.Context, branch string) (link string, err error)
}

// Runner carries out one attempt's outputs.
type Runner struct {
	Store    store.Store
	Services Services
	Policy   config.ManifestOutputs
	Target   Target
	Pusher   Pusher // nil refuses github.push
	// Held reports whether the attempt still holds its claim
	// (store.ErrFenced when not); it is asked after each output's started
	// record is written and before its call.
	Held func(ctx context.Context) error
	// CallTimeout bounds each store call (default 10 s).
	CallTimeout time.Duration
	Now         func() time.Time
}

// ErrFenced wraps store.ErrFenced: the claim went; nothing more runs.
var ErrFenced = store.ErrFenced

// Run carries out outs of task's attempt in order and returns each one's
// outcome. An error is the store's (or a lost claim, errors.Is
// store.ErrFenced): the outcomes so far are returned with it, and a later
// Run of the same attempt goes on from the records.
func (r *Runner) Run(ctx context.Context, task string, attempt int, outs []doc.Output) ([]doc.OutputOutcome, error) {
	if len(outs) == 0 {
		return nil, nil
	}
	recs, err := r.recordPending(ctx, task, attempt, outs)
	if err != nil {
		return nil, err
	}
	var res []doc.OutputOutcome
	branch := "" // the branch a done push went to, for a pull request
	for i, o := range outs {
		key := Key(task, attempt, i)
		rec, err := r.one(ctx, key, task, attempt, i, outs, recs[i], branch)
		if err != nil {
			return res, err
		}
		if o.Kind == doc.OutputGitHubPush && rec.State == doc.OutcomeDone {
			branch = rec.Branch
		}
		res = append(res, doc.OutputOutcome{Index: i, Kind: o.Kind, State: rec.State, Link: rec.Link, Reason: rec.Reason, Error: rec.Error})
	}
	return res, nil
}

// recordPending writes a pending record for every output that has none,
// in one transaction, and returns every record.
func (r *Runner) recordPending(ctx context.Context, task string, attempt int, outs []doc.Output) ([]Record, error) {
	recs := make([]Record, len(outs))
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	err := r.Store.Update(cctx, func(tx store.Tx) error {
		for i, o := range outs {
			key := Key(task, attempt, i)
			b, err := tx.ValueForUpdate(NS, key)
			switch {
			case err == nil:
				if err := json.Unmarshal(b, &recs[i]); err == nil && recs[i].Kind == o.Kind {
					continue
				}
				recs[i] = Record{} // not this output's: written anew
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
			recs[i] = Record{Kind: o.Kind, State: doc.OutcomePending, At: r.now()}
			if err := setRecord(tx, key, recs[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record outputs of %s: %w", task, err)
	}
	return recs, nil
}

func (r *Runner) one(ctx context.Context, key, task string, attempt, i int, outs []doc.Output, rec Record, branch string) (Record, error) {
	o := outs[i]
	if rec.final() {
		return rec, nil
	}
	reason := refusal(r.Policy, outs, i, r.Target)
	if reason == "" && o.Kind == doc.OutputGitHubPullRequest && branch == "" {
		reason = "a pull request needs a github.push before it in the outputs, done"
	}
	if reason == "" && o.Kind == doc.OutputGitHubPush && r.Pusher == nil {
		reason = "the task has no worktree to push"
	}
	if reason != "" {
		return r.end(ctx, key, Record{Kind: o.Kind, State: doc.OutcomeRefused, Reason: reason})
	}
	// An earlier attempt of the task that did this very output (a retry
	// after a lost host, a crash) did it for this one too.
	if prev, ok, err := r.earlier(ctx, task, attempt, i, o); err != nil {
		return rec, err
	} else if ok {
		return r.end(ctx, key, prev)
	}
	if rec.State == doc.OutcomeStarted {
		// Started and never ended: the call may have happened.
		if link, err := r.lookup(ctx, key, o, branch); err == nil && link != "" {
			return r.end(ctx, key, Record{Kind: o.Kind, State: doc.OutcomeDone, Link: link, Branch: r.branchOf(o)})
		} else if err != nil {
			return r.end(ctx, key, Record{Kind: o.Kind, State: doc.OutcomeFailed, Error: "look up after an unfinished call: " + redact.String(err.Error())})
		}
	}
	if err := r.start(ctx, key, o.Kind); err != nil {
		return rec, err
	}
	if r.Held != nil {
		if err := r.Held(ctx); err != nil {
			return rec, fmt.Errorf("output %s: %w", key, err)
		}
	}
	link, refused, err := r.call(ctx, key, o, branch)
	switch {
	case refused != "":
		return r.end(ctx, key, Record{Kind: o.Kind, State: doc.OutcomeRefused, Reason: refused})
	case err != nil:
		// The call may have happened and only its answer been lost.
		if l, lerr := r.lookup(ctx, key, o, branch); lerr == nil && l != "" {
			return r.end(ctx, key, Record{Kind: o.Kind, State: doc.OutcomeDone, Link: l, Branch: r.branchOf(o)})
		}
		return r.end(ctx, key, Record{Kind: o.Kind, State: doc.OutcomeFailed, Error: redact.String(err.Error())})
	}
	return r.end(ctx, key, Record{Kind: o.Kind, State: doc.OutcomeDone, Link: link, Branch: r.branchOf(o)})
}

// earlier finds output i of an earlier attempt of task, of the same kind,
// done (or started and found where it went).
func (r *Runner) earlier(ctx context.Context, task string, attempt, i int, o doc.Output) (Record, bool, error) {
	for a := attempt - 1; a >= 0; a-- {
		key := Key(task, a, i)
		cctx, cancel := r.callCtx(ctx)
		b, err := r.Store.Value(cctx, NS, key)
		cancel()
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return Record{}, false, err
		}
		var rec Record
		if json.Unmarshal(b, &rec) != nil || rec.Kind != o.Kind {
			continue
		}
		if rec.State == doc.OutcomeStarted {
			if link, err := r.lookup(ctx, key, o, ""); err == nil && link != "" {
				rec.State, rec.Link = doc.OutcomeDone, link
			}
		}
		if rec.State == doc.OutcomeDone {
			rec.Reason = fmt.Sprintf("done by attempt %d", a)
			return rec, true, nil
		}
	}
	return Record{}, false, nil
}

func (r *Runner) branchOf(o doc.Output) string {
	if o.Kind != doc.OutputGitHubPush {
		return ""
	}
	return Branch(r.Target.TaskID, o.BranchSuffix)
}

// start records that output key's call is about to run.
func (r *Runner) start(ctx context.Context, key, kind string) error {
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	err := r.Store.Update(cctx, func(tx store.Tx) error {
		if _, err := tx.ValueForUpdate(NS, key); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return setRecord(tx, key, Record{Kind: kind, State: doc.OutcomeStarted, At: r.now()})
	})
	if err != nil {
		return fmt.Errorf("record output %s started: %w", key, err)
	}
	return nil
}

// end records output key's outcome and returns it.
func (r *Runner) end(ctx context.Context, key string, rec Record) (Record, error) {
	rec.At = r.now()
	cctx, cancel := r.callCtx(context.WithoutCancel(ctx))
	defer cancel()
	err := r.Store.Update(cctx, func(tx store.Tx) error { return setRecord(tx, key, rec) })
	if err != nil {
		return rec, fmt.Errorf("record output %s %s: %w", key, rec.State, err)
	}
	return rec, nil
}

func setRecord(tx store.Tx, key string, rec Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return tx.Set(NS, key, b)
}

// call performs output o.
func (r *Runner) call(ctx context.Context, key string, o doc.Output, branch string) (link, refused string, err error) {
	t := r.Target
	mark := "\n\n" + Marker(key)
	switch o.Kind {
	case doc.OutputGitHubPush:
		return r.Pusher.Push(ctx, Branch(t.TaskID, o.BranchSuffix), o.Message, key)
	case doc.OutputJiraComment:
		j, err := r.Services.Jira()
		if err != nil {
			return "", err.Error(), nil
		}
		link, err := j.AddComment(ctx, t.JiraKey, o.Body+"\n\n"+jiraMarker(key))
		return link, "", err
	}
	g, err := r.Services.GitHub()
	if err != nil {
		return "", err.Error(), nil
	}
	if !g.Writable() {
		return "", ErrNoGitHubToken.Error(), nil
	}
	switch o.Kind {
	case doc.OutputGitHubReview:
		var cs []LineComment
		for _, c := range o.Comments {
			cs = append(cs, LineComment{Path: c.Path, Line: c.Line, Side: "RIGHT", Body: c.Body})
		}
		link, err = g.CreateReview(ctx, t.Repo, t.PR, o.Event, o.Body+mark, cs)
	case doc.OutputGitHubComment:
		n := t.PR
		if n == 0 {
			n = t.Issue
		}
		link, err = g.CreateComment(ctx, t.Repo, n, o.Body+mark)
	case doc.OutputGitHubPullRequest:
		repo, rerr := g.Repo(ctx, t.Repo)
		if rerr != nil {
			return "", "", rerr
		}
		if branch == repo.DefaultBranch {
			return "", "a pull request's head may not be the default branch", nil
		}
		link, err = g.CreatePull(ctx, t.Repo, branch, repo.DefaultBranch, o.Title, o.Body+mark)
	default:
		return "", fmt.Sprintf("unknown output kind %q", o.Kind), nil
	}
	return link, "", err
}

// jiraMarker is Marker as Jira keeps it: an HTML comment would show, so
// the key is a short visible line.
func jiraMarker(key string) string { return "[kingdom:" + key + "]" }

// lookup finds output key where it went: a body with its marker, a pull
// request from its branch, a branch with the worktree's commit. "" when
// it is not there.
func (r *Runner) lookup(ctx context.Context, key string, o doc.Output, branch string) (string, error) {
	t := r.Target
	switch o.Kind {
	case doc.OutputGitHubPush:
		if r.Pusher == nil {
			return "", nil
		}
		return r.Pusher.Pushed(ctx, Branch(t.TaskID, o.BranchSuffix))
	case doc.OutputJiraComment:
		j, err := r.Services.Jira()
		if err != nil {
			return "", err
		}
		return j.FindComment(ctx, t.JiraKey, jiraMarker(key))
	}
	g, err := r.Services.GitHub()
	if err != nil {
		return "", err
	}
	var cs []Comment
	switch o.Kind {
	case doc.OutputGitHubReview:
		cs, err = g.Reviews(ctx, t.Repo, t.PR)
	case doc.OutputGitHubComment:
		n := t.PR
		if n == 0 {
			n = t.Issue
		}
		cs, err = g.IssueComments(ctx, t.Repo, n)
	case doc.OutputGitHubPullRequest:
		if branch == "" {
			return "", nil
		}
		return g.FindPull(ctx, t.Repo, branch)
	}
	if err != nil {
		return "", err
	}
	return findMarked(cs, Marker(key)), nil
}

func (r *Runner) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := r.CallTimeout
	if d <= 0 {
		d = 10 * time.Second
	}
	return context.WithTimeout(ctx, d)
}

func (r *Runner) now() string {
	if r.Now != nil {
		return doc.FormatTime(r.Now())
	}
	return doc.FormatTime(time.Now())
}

// NotRun are the outcomes of outputs an attempt that did not succeed
// asked for: none runs (SPEC §12.3: after a successful soldier only).
func NotRun(outs []doc.Output, status string) []doc.OutputOutcome {
	var res []doc.OutputOutcome
	for i, o := range outs {
		res = append(res, doc.OutputOutcome{Index: i, Kind: o.Kind, State: doc.OutcomeRefused,
			Reason: fmt.Sprintf("not carried out: the attempt's status is %s", status)})
	}
	return res
}
