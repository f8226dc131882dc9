package envoy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/lockfile"
)

// post is one outbound Slack message.
type post struct {
	Channel  string
	ThreadTS string // "" = top level
	Text     string
	// For the console only: what is being said, about what.
	MsgID, Type, TaskID string
	// Buttons go under the text (buttons.go); the console prints the
	// command that does what each does.
	Buttons []button
}

// poster is where outbound messages go: the Slack Web API or the console.
type poster interface {
	// Post sends p and returns the channel id and ts Slack gave it.
	Post(ctx context.Context, p post) (channel, ts string, err error)
	// React adds the reaction name (without colons) to a message.
	React(ctx context.Context, channel, ts, name string) error
	// Unreact removes our reaction name from a message (gone already: nil).
	Unreact(ctx context.Context, channel, ts, name string) error
	// Find returns the ts of p if it was posted since since, "" when it
	// was not (deliveries.go).
	Find(ctx context.Context, p post, since time.Time) (string, error)
	// Update rewrites the message channel/ts in place: text, no buttons.
	Update(ctx context.Context, channel, ts, text string) error
	// Ephemeral shows text to user alone, in channel (and thread).
	Ephemeral(ctx context.Context, channel, thread, user, text string) error
	// OpenAnswer opens the Answer modal for the click of triggerID: one
	// text input; its submission carries buttonID (buttons.go).
	OpenAnswer(ctx context.Context, triggerID, buttonID, question string) error
}

// webPoster talks to the Slack Web API.
type webPoster struct {
	api *slack.Client

	mu        sync.Mutex
	user, bot string // our identity (auth.test), asked by Find and the socket
}

func (w *webPoster) Post(ctx context.Context, p post) (string, string, error) {
	opts := []slack.MsgOption{slack.MsgOptionText(p.Text, false)}
	if len(p.Buttons) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(buttonBlocks(p.Text, p.Buttons)...))
	}
	if p.ThreadTS != "" {
		opts = append(opts, slack.MsgOptionTS(p.ThreadTS))
	}
	return w.api.PostMessageContext(ctx, p.Channel, opts...)
}

func (w *webPoster) Update(ctx context.Context, channel, ts, text string) error {
	// The blocks are replaced by the text alone: the buttons go.
	_, _, _, err := w.api.UpdateMessageContext(ctx, channel, ts, slack.MsgOptionText(text, false),
		slack.MsgOptionBlocks(textBlock(text)))
	return err
}

func (w *webPoster) Ephemeral(ctx context.Context, channel, thread, user, text string) error {
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	_, err := w.api.PostEphemeralContext(ctx, channel, user, opts...)
	return err
}

func (w *webPoster) OpenAnswer(ctx context.Context, triggerID, buttonID, question string) error {
	_, err := w.api.OpenViewContext(ctx, triggerID, answerModal(buttonID, question))
	return err
}

func (w *webPoster) React(ctx context.Context, channel, ts, name string) error {
	err := w.api.AddReactionContext(ctx, name, slack.ItemRef{Channel: channel, Timestamp: ts})
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && se.Err == "already_reacted" {
		return nil
	}
	return err
}

func (w *webPoster) Unreact(ctx context.Context, channel, ts, name string) error {
	err := w.api.RemoveReactionContext(ctx, name, slack.ItemRef{Channel: channel, Timestamp: ts})
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && se.Err == "no_reaction" {
		return nil
	}
	return err
}

// consolePoster prints outbound messages and appends them to
// logs/envoy-console.log (console mode, no Slack tokens). It hands out
// synthetic, strictly increasing ts values so threads work as on Slack.
type consolePoster struct {
	out   io.Writer
	path  string
	lock  string
	clock clock.Clock

	mu     sync.Mutex
	lastUS int64
	// sess is the log held open for a tick's posts (begin/end), nil
	// between ticks.
	sess *consoleSession
}

// consoleSession is the console log opened once for a tick, under the
// rotation lock held shared until end (a rotation waits for the tick).
type consoleSession struct {
	lf *lockfile.File
	f  *os.File
}

// begin opens the log for the posts of a tick: one write per record
// instead of a lock, an open and a close each. Without the lock or the
// file, each record opens the log on its own as before.
func (c *consolePoster) begin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil || c.lock == "" {
		return
	}
	lf, err := lockfile.Open(c.lock)
	if err != nil {
		return
	}
	if err := lf.RLock(); err != nil {
		lf.Close()
		return
	}
	f, err := os.OpenFile(c.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		lf.Unlock()
		lf.Close()
		return
	}
	c.sess = &consoleSession{lf: lf, f: f}
}

// end closes what begin opened.
func (c *consolePoster) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return
	}
	c.sess.f.Close()
	c.sess.lf.Unlock()
	c.sess.lf.Close()
	c.sess = nil
}

// nextTS returns a Slack-shaped ts ("<unix>.<micro>") later than any given
// before by this process.
func (c *consolePoster) nextTS() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	us := c.clock.Now().UnixMicro()
	if us <= c.lastUS {
		us = c.lastUS + 1
	}
	c.lastUS = us
	return fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
}

func (c *consolePoster) Post(_ context.Context, p post) (string, string, error) {
	ts := c.nextTS()
	where := channelName(p.Channel)
	if p.ThreadTS != "" {
		where += " thread " + p.ThreadTS
	}
	head := fmt.Sprintf("%s %s", where, p.Type)
	if p.TaskID != "" {
		head += " " + p.TaskID
	}
	head += " (" + p.MsgID + ", ts " + ts + ")"
	body := p.Text
	for _, b := range p.Buttons {
		body += "\n[" + b.Label + "] " + b.Command
	}
	if err := c.write(head, body); err != nil {
		return "", "", err
	}
	return p.Channel, ts, nil
}

func (c *consolePoster) Update(_ context.Context, channel, ts, text string) error {
	return c.write(fmt.Sprintf("%s message %s updated", channelName(channel), ts), text)
}

func (c *consolePoster) Ephemeral(_ context.Context, channel, _, user, text string) error {
	return c.write(fmt.Sprintf("%s to %s only", channelName(channel), user), text)
}

// OpenAnswer has no console form: `envoy reply` is the console's Answer.
func (c *consolePoster) OpenAnswer(context.Context, string, string, string) error {
	return errors.New("no modals on the console: answer with envoy reply")
}

func (c *consolePoster) React(_ context.Context, channel, ts, name string) error {
	return c.write(fmt.Sprintf("%s reaction :%s: on %s", channelName(channel), name, ts), "")
}

func (c *consolePoster) Unreact(_ context.Context, channel, ts, name string) error {
	return c.write(fmt.Sprintf("%s reaction :%s: removed from %s", channelName(channel), name, ts), "")
}

// channelName renders a channel for the console with exactly one '#'
// (channels are configured both as "ops" and "#ops").
func channelName(ch string) string {
	return "#" + strings.TrimLeft(ch, "#")
}

// write prints one record: "[YYYY-MM-DD HH:MM:SS] head" and the text indented.
func (c *consolePoster) write(head, text string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] %s\n", c.clock.Now().Local().Format(time.DateTime), head)
	for line := range strings.SplitSeq(text, "\n") {
		if text == "" {
			break
		}
		b.WriteString("    ")
		b.WriteString(line)
		b.WriteByte('\n')
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.out != nil {
		io.WriteString(c.out, b.String())
	}
	if c.sess != nil {
		if _, err := c.sess.f.WriteString(b.String()); err != nil {
			return fmt.Errorf("append %s: %w", c.path, err)
		}
		return nil
	}
	return appendLog(c.path, c.lock, b.String())
}

// appendLog appends s with one write, under the shared rotation lock so the
// chamberlain's rotation never loses a record (SPEC §9.11).
func appendLog(path, rotateLock, s string) error {
	write := func() error {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("append %s: %w", path, err)
		}
		_, werr := f.WriteString(s)
		cerr := f.Close()
		if werr != nil {
			return fmt.Errorf("append %s: %w", path, werr)
		}
		return cerr
	}
	if rotateLock == "" {
		return write()
	}
	lf, err := lockfile.Open(rotateLock)
	if err != nil {
		return write()
	}
	defer lf.Close()
	if err := lf.RLock(); err != nil {
		return write()
	}
	defer lf.Unlock()
	return write()
}
