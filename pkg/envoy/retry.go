package envoy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/slack-go/slack"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// A message that failed for a reason the operator can fix is sent again
// once the fix is in:
//
//   - by hand: `envoy retry <msg-id>` moves it from failed/ back to
//     pending/ (RetryFailed);
//   - by itself, when the failure came from the envoy's config (no channel,
//     a channel Slack does not know): its failed file records the config it
//     failed under (config_cause, a fingerprint), and once the envoy runs
//     under another config (envoy.yaml edited, SLACK_DEFAULT_CHANNEL set, a
//     switch between Slack and the console) it goes back to pending/ — once
//     per change: failing again, it records the new fingerprint.
//
// A running envoy reloads envoy.yaml when the file changes (ConfigPath);
// what it applies at once is what a tick reads (default channel, allowed
// users, retries, conversation TTL); tokens, the API URL and the interval
// need a restart.

// configCauseField is the failed file's field holding the fingerprint of
// the config a config-caused failure happened under.
const configCauseField = "config_cause"

// noChannelPrefix starts ErrNoChannel's text: a failed file that has it
// and no config_cause failed for want of a channel before the envoy marked
// such failures.
const noChannelPrefix = "no channel"

// configCaused reports whether a send failed because of where the envoy's
// config sends messages.
func configCaused(err error) bool {
	if errors.Is(err, ErrNoChannel) {
		return true
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "channel_not_found", "not_in_channel", "is_archived":
			return true
		}
	}
	return false
}

// configFingerprint identifies the config messages are sent under: the
// envoy.yaml settings, the effective default channel and the mode. It holds
// no secret (the config names token variables, never their values).
func (e *Envoy) configFingerprint() string {
	cfg := e.config()
	b, _ := json.Marshal(cfg)
	h := sha256.New()
	h.Write(b)
	fmt.Fprintf(h, "\x00%s\x00%t", cfg.DefaultChannel(), e.Console())
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// reloadConfig loads envoy.yaml again when its stamp (inode, size, mtime)
// changed since the last load. A file that does not load is logged and the
// running config kept.
func (e *Envoy) reloadConfig() {
	if e.cfgPath == "" {
		return
	}
	stamp := "missing"
	if fi, err := os.Stat(e.cfgPath); err == nil {
		stamp = strconv.FormatInt(fi.Size(), 10) + "/" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			stamp += "/" + strconv.FormatUint(st.Ino, 10)
		}
	}
	if stamp == e.cfgStamp {
		return
	}
	cfg, err := config.LoadEnvoy(e.cfgPath)
	if err != nil {
		if e.cfgStamp != "" {
			e.log.Warn("envoy.yaml changed but does not load: the running config stays", "err", err)
		}
		e.cfgStamp = stamp
		return
	}
	first := e.cfgStamp == ""
	e.cfgStamp = stamp
	e.cfg.Store(cfg)
	if !first {
		e.log.Info("envoy.yaml reloaded", "path", e.cfgPath)
	}
}

// requeueConfigFailures moves back to pending/ every failed message whose
// failure the config caused under another config than the current one. It
// scans failed/ only when the fingerprint differs from the last scan's
// (the first tick, and after a config change).
func (e *Envoy) requeueConfigFailures() error {
	fp := e.configFingerprint()
	if fp == e.scannedFP {
		return nil
	}
	entries, err := e.messages.List(layout.Failed)
	if err != nil {
		return fmt.Errorf("requeue failed messages: %w", err)
	}
	var errs []error
	for _, ent := range entries {
		var f struct {
			Error string `json:"error"`
			Cause string `json:"config_cause"`
		}
		if json.Unmarshal(ent.Data, &f) != nil || f.Cause == fp {
			continue
		}
		if f.Cause == "" && !strings.HasPrefix(f.Error, noChannelPrefix) {
			continue // not caused by the config
		}
		if err := e.messages.Claim(layout.Failed, layout.Pending, ent.ID); err != nil {
			if !errors.Is(err, queue.ErrTaken) && !errors.Is(err, queue.ErrExists) {
				errs = append(errs, err)
			}
			continue
		}
		e.log.Info("failed message queued again: the envoy's config changed", "msg_id", ent.ID)
		e.em.Emit("message.retried", map[string]any{"msg_id": ent.ID, "reason": "config changed"})
	}
	if len(errs) == 0 {
		e.scannedFP = fp
	}
	return errors.Join(errs...)
}

// RetryFailed moves message id from the messages queue's failed/ back to
// pending/ in st, so the envoy sends it again (`envoy retry`). The move is
// a claim: it never overwrites a message and is safe beside a running
// envoy. The message keeps its error until it is sent.
func RetryFailed(st store.Store, l layout.Layout, id string, em *eventlog.Emitter) error {
	if err := ids.Check(id); err != nil {
		return fmt.Errorf("retry message: %w", err)
	}
	q := queue.OnStore(st, l, layout.QMessages, em, "")
	err := q.Claim(layout.Failed, layout.Pending, id)
	if errors.Is(err, queue.ErrTaken) {
		if state, ok := q.Find(id); ok {
			return fmt.Errorf("retry message %s: it is in %s/, not failed/", id, state)
		}
		return fmt.Errorf("retry message %s: no such message", id)
	}
	if err != nil {
		return fmt.Errorf("retry message %s: %w", id, err)
	}
	em.Emit("message.retried", map[string]any{"msg_id": id, "reason": "envoy retry"})
	return nil
}
