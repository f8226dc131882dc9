package envoy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// A tick delivers its messages in batches (issues #15, #17) — all of them
// in one, unless there are more than batchMax or the posts take longer than
// batchAge. Before the first post, room for every delivery record of the
// batch is reserved in the journal (a full disk holds the sends,
// diskhold.go); each message is then posted, in order, and its record
// appended at once; at the end of the batch the records are synced with one
// fdatasync, each file's status is rewritten over a recycled spare with one
// group commit (spares.go; new files where there is no pool), and the files
// move to sent/ (or failed/); the directories are synced once, at the next
// checkpoint, before the journal that still holds the records is emptied.
// Per message that leaves one post, one appended line, one overwrite and
// fdatasync of a file that already exists, a swap and a rename — no file
// created, no state file rewritten.
//
// A crash at any instant loses nothing and posts nothing twice beyond what
// it did before: a record appended is in the page cache, so a killed envoy
// finds it on restart and finishes the message without posting it again
// (deliver); a message is in pending/ until its record is durable; a
// rewritten file still in pending/ is finished by the next tick.

// done is a message the tick is finished with, waiting for the batch.
type done struct {
	ent    queue.Entry
	m      *schema.Message
	state  string // layout.Sent or layout.Failed
	d      Delivery
	errMsg string // failed: why
	extra  map[string]any
}

// sendPending sends every message in pending/, oldest first. The envoy is
// the single consumer of the messages queue (its leader lock makes it so), so
// each message stays in pending/ while it is sent and moves to sent/ or
// failed/ with the tick's batch.
func (e *Envoy) sendPending(ctx context.Context) error {
	e.mu.Lock()
	hold := e.holdUntil
	e.mu.Unlock()
	if e.clock.Now().Before(hold) {
		return nil // Slack's Retry-After has not passed yet
	}
	if e.diskHeld() {
		return nil // the state cannot be written: post nothing (diskhold.go)
	}
	entries, err := e.messages.List(layout.Pending)
	if err != nil || len(entries) == 0 {
		return err
	}
	if cp, ok := e.poster.(*consolePoster); ok {
		cp.begin()
		defer cp.end()
	}
	var (
		dones []*done
		since time.Time // when the first of dones was delivered
		errs  []error
		room  int // delivery records reserved and not yet used
	)
	finish := func() {
		if len(dones) == 0 {
			return
		}
		if err := e.finishAll(dones); err != nil {
			errs = append(errs, err)
		}
		dones = nil
		// A checkpoint if the journal is long or old enough (journal.go).
		if err := e.st.flush(e.clock.Now(), false); err != nil {
			errs = append(errs, err)
		}
	}
	for i, ent := range entries {
		if ctx.Err() != nil {
			break
		}
		if room == 0 {
			n := min(batchMax, len(entries)-i)
			if err := e.reserveRecords(n); err != nil {
				_ = e.holdForDisk(ctx, err) // nothing more is posted this tick
				break
			}
			room = n
		}
		room--
		d, err := e.deliver(ctx, ent)
		if d != nil {
			if len(dones) == 0 {
				since = e.clock.Now()
			}
			dones = append(dones, d)
			// A long tick (a backlog, a slow Slack) finishes as it goes.
			if len(dones) >= batchMax || e.clock.Now().Sub(since) >= batchAge {
				finish()
			}
		}
		if err != nil {
			if errors.Is(err, errHeld) {
				e.log.Warn("slack rate limit: sends held", "err", err)
				break
			}
			if errors.Is(err, errDiskHeld) {
				break
			}
			errs = append(errs, err)
		}
	}
	finish()
	return errors.Join(errs...)
}

// A batch ends after batchMax messages or batchAge after its first post:
// the rest of a long tick goes on in a new batch, so messages reach sent/
// and their records are synced as the tick goes.
const (
	batchMax = 64
	batchAge = time.Second
)

// finishAll syncs the tick's delivery records, rewrites each finished
// message's status (and extra fields) in place with one group commit, then
// moves it to its final state. The directory is the truth; the status field
// only helps someone reading the file with cat. A message whose step fails
// stays in pending/: its delivery is recorded, so the next tick finishes it
// without posting it again.
func (e *Envoy) finishAll(dones []*done) error {
	if len(dones) == 0 {
		return nil
	}
	if afterPosts != nil {
		afterPosts()
	}
	// Every record of this tick is durable before any message leaves pending/.
	if err := e.st.syncJournal(); err != nil {
		return fmt.Errorf("finish %d messages: %w", len(dones), err)
	}
	var errs []error
	staged := make([]*done, 0, len(dones))
	// Each rewrite swaps a recycled spare in (spares.go), or is a new
	// file where there is no pool; one group commit for all.
	e.useSpares()
	b := queue.NewBatch()
	// pending/ is synced with the moves, at the next checkpoint (syncMoves),
	// before the journal that records these deliveries is emptied.
	b.DeferDirSync()
	if afterRename != nil {
		b.AfterRename(afterRename)
	}
	var rw []*done
	for _, d := range dones {
		data, err := statusDoc(d.ent.Data, d.state, d.extra)
		if errors.Is(err, errNotObject) {
			staged = append(staged, d) // moved as it is
			continue
		}
		if err == nil {
			_, err = b.Rewrite(e.messages, layout.Pending, d.ent.ID, data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("finish message %s: %w", d.ent.ID, err))
			continue
		}
		rw = append(rw, d)
	}
	if err := b.Commit(); err != nil {
		// Some files may be rewritten (each whole); those stay in pending/.
		errs = append(errs, fmt.Errorf("finish messages: %w", err))
	} else {
		staged = append(staged, rw...)
	}
	var moved []*done
	var sent []string
	dirs := map[string]bool{layout.Pending: true}
	for _, d := range staged {
		if err := e.messages.Move(layout.Pending, d.state, d.ent.ID); err != nil {
			errs = append(errs, fmt.Errorf("finish message %s: %w", d.ent.ID, err))
			continue
		}
		dirs[d.state] = true
		moved = append(moved, d)
		if d.state == layout.Sent {
			sent = append(sent, d.ent.ID)
		}
	}
	// The moves are made durable before the records that stand for them
	// go: at the next checkpoint (syncMoves), not once per tick.
	if len(moved) > 0 || len(rw) > 0 {
		e.markMoved(dirs)
	}
	e.st.delivered(sent)
	for _, d := range moved {
		if d.state == layout.Sent {
			e.em.Emit("message.sent", map[string]any{"msg_id": d.m.ID, "task_id": d.m.TaskID, "channel": d.d.Channel})
			e.log.Info("message sent", "msg_id", d.m.ID, "type", d.m.Type, "channel", d.d.Channel)
			continue
		}
		e.em.Emit("message.failed", map[string]any{"msg_id": d.m.ID, "task_id": d.m.TaskID, "error": d.errMsg})
		e.log.Error("message failed", "msg_id", d.m.ID, "type", d.m.Type, "err", d.errMsg)
	}
	return errors.Join(errs...)
}

var errNotObject = errors.New("not a JSON object")

// statusDoc returns data (a message file) with its status and the extra
// fields set, indented as the queue writes files. Raw values: every other
// field is kept byte for byte (numbers too), and nothing below the top
// level is parsed.
func statusDoc(data []byte, state string, extra map[string]any) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil || doc == nil {
		return nil, errNotObject
	}
	var err error
	if doc["status"], err = json.Marshal(state); err != nil {
		return nil, err
	}
	for k, v := range extra {
		if doc[k], err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// syncMoves fsyncs the queue directories messages moved in since the last
// checkpoint (the store calls it before it empties the journal).
func (e *Envoy) syncMoves() error {
	e.mu.Lock()
	dirs := e.movedTo
	e.movedTo = nil
	e.mu.Unlock()
	var errs []error
	for _, st := range []string{layout.Sent, layout.Failed, layout.Pending} {
		if dirs[st] {
			if err := atomicfile.SyncDir(e.messages.Dir(st)); err != nil {
				errs = append(errs, err)
			} else if e.spares != nil {
				e.spares.Synced(e.messages.Dir(st))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		e.markMoved(dirs) // synced again at the next checkpoint
		return err
	}
	return nil
}

// markMoved notes the message states moved into, for syncMoves.
func (e *Envoy) markMoved(states map[string]bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.movedTo == nil {
		e.movedTo = map[string]bool{}
	}
	for st := range states {
		e.movedTo[st] = true
	}
}

// Crash points for tests: afterPosts runs when a tick's posts are done and
// recorded (not yet synced), afterRename after the i-th status rewrite of
// the batch. Nil outside tests.
var (
	afterPosts  func()
	afterRename func(i int)
)
