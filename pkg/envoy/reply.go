package envoy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
)

// ConsoleReply is an envelope in state/envoy/console-inbox/ written by
// `envoy reply` (the operator's answer in a task's thread, SPEC §9.27) or by
// `envoy dm` (Kind "dm": a direct message to the bot, no task).
type ConsoleReply struct {
	Kind      string `json:"kind,omitempty"` // "" = reply, "dm"
	TaskID    string `json:"task_id,omitempty"`
	Text      string `json:"text"`
	User      string `json:"user_id"`
	TS        string `json:"ts"` // Slack-shaped ts of the reply
	CreatedAt string `json:"created_at"`
}

// ConsoleUser is the user id of replies played with `envoy reply`.
const ConsoleUser = "console"

// ConsoleDMChannel is the DM channel of messages played with `envoy dm`;
// answers to them appear under it in the console log.
const ConsoleDMChannel = "D-CONSOLE"

// KindDM marks an `envoy dm` envelope.
const KindDM = "dm"

// QueueReply drops a reply envelope for taskID into the console inbox
// (write-then-rename) and returns its path. The running envoy (or the next
// `envoy --once`) handles it exactly like a human's reply in that task's
// thread.
func QueueReply(l layout.Layout, taskID, text string, now time.Time) (string, error) {
	if err := ids.Check(taskID); err != nil {
		return "", fmt.Errorf("queue reply: task id: %w", err)
	}
	if strings.TrimSpace(text) == "" {
		return "", errors.New("queue reply: empty text")
	}
	return queueConsole(l, ConsoleReply{TaskID: taskID, Text: text}, now)
}

// QueueDM drops a direct message to the bot into the console inbox: the
// envoy admits it as the slack.channel.message a DM in Slack would make
// (petition, routing, answer in the console log under ConsoleDMChannel).
// Only the envoy creates slack.* events (SPEC §10.15); this is how a
// kingdom without Slack is asked something.
func QueueDM(l layout.Layout, text string, now time.Time) (string, error) {
	if strings.TrimSpace(text) == "" {
		return "", errors.New("queue dm: empty text")
	}
	return queueConsole(l, ConsoleReply{Kind: KindDM, Text: text}, now)
}

func queueConsole(l layout.Layout, r ConsoleReply, now time.Time) (string, error) {
	if err := layout.EnsureDir(l.EnvoyConsoleInbox()); err != nil {
		return "", err
	}
	us := now.UnixMicro()
	r.User = ConsoleUser
	r.TS = fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
	r.CreatedAt = now.UTC().Format(time.RFC3339)
	// The name sorts oldest first (reply-<unixnano>-…) for both kinds.
	name := fmt.Sprintf("reply-%d-%s.json", now.UnixNano(), ids.Rand(3))
	path := filepath.Join(l.EnvoyConsoleInbox(), name)
	if err := atomicfile.WriteJSON(path, r); err != nil {
		return "", fmt.Errorf("queue console message: %w", err)
	}
	return path, nil
}

// ProcessConsoleInbox handles every `envoy reply` envelope: the reply is
// placed in the thread awaiting an answer for its task (or the task's live
// conversation) and admitted as the same slack.thread.reply event a Slack
// reply would produce. An envelope naming no awaited task goes to
// console-inbox/rejected/ with the reason.
func (e *Envoy) ProcessConsoleInbox(ctx context.Context) error {
	dir := e.l.EnvoyConsoleInbox()
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("read console inbox: %w", err)
	}
	names := make([]string, 0, len(ents))
	for _, de := range ents {
		if de.Type().IsRegular() && strings.HasSuffix(de.Name(), ".json") && !atomicfile.IsTemp(de.Name()) {
			names = append(names, de.Name())
		}
	}
	sort.Strings(names) // reply-<unixnano>-…: oldest first
	rejDir := filepath.Join(dir, "rejected")
	var errs []error
	for _, name := range names {
		path := filepath.Join(dir, name)
		reject := func(reason string) {
			e.log.Warn("console reply rejected", "file", name, "reason", reason)
			if err := queue.RejectPath(path, rejDir, reason, e.em); err != nil {
				errs = append(errs, err)
			}
		}
		b, err := queue.ReadLimited(path, queue.DefaultMaxSize)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				reject(err.Error())
			}
			continue
		}
		var r ConsoleReply
		if err := json.Unmarshal(b, &r); err != nil {
			reject("not valid JSON: " + err.Error())
			continue
		}
		in := Inbound{Kind: "message", User: ConsoleUser, Text: r.Text, TS: r.TS, Console: true}
		switch {
		case r.Kind == KindDM && (r.TS == "" || strings.TrimSpace(r.Text) == ""):
			reject("a dm needs a ts and a text")
			continue
		case r.Kind == KindDM:
			in.Channel, in.ChannelType = ConsoleDMChannel, "im"
		case r.Kind != "":
			reject(fmt.Sprintf("unknown kind %q", r.Kind))
			continue
		case ids.Check(r.TaskID) != nil || r.TS == "" || strings.TrimSpace(r.Text) == "":
			reject("needs a valid task_id, a ts and a text")
			continue
		default:
			if err := e.st.view(ctx, func(s *State) {
				if a, ok := s.Awaiting[r.TaskID]; ok {
					in.Channel, in.ThreadTS = a.Channel, a.ThreadTS
					return
				}
				now := e.clock.Now()
				for _, c := range s.Conversations {
					if c.ReplyContext != nil && c.ReplyContext.TaskID == r.TaskID {
						if _, live := s.liveConversation(c.Channel, c.ThreadTS, now); live {
							in.Channel, in.ThreadTS = c.Channel, c.ThreadTS
							return
						}
					}
				}
			}); err != nil {
				errs = append(errs, err)
				continue
			}
			if in.ThreadTS == "" {
				reject(fmt.Sprintf("task %s is not waiting for a reply", r.TaskID))
				continue
			}
			if r.User != "" {
				in.User = r.User
			}
		}
		f, err := e.handleInbound(ctx, in)
		if err != nil {
			errs = append(errs, err)
			continue // keep the envelope: the next tick tries again
		}
		e.doFollowUp(ctx, f)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ReplyRejection returns the reason a queued reply envelope (a path from
// QueueReply) was rejected, if it was.
func ReplyRejection(path string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(path), "rejected", filepath.Base(path)+".reason"))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}
