// Package logging builds the slog.Logger every role uses: human-readable
// lines on stdout (what `tmux attach` shows) and the same line appended to
// logs/system.log in the seed's format
//
//	[YYYY-MM-DD HH:MM:SS] [CATEGORY] [role] message key=value …
//
// The category is the record's "cat" attribute (e.g. RECOVERY, ALERT) or its
// level. Each record opens, appends and closes system.log under a shared
// flock on logs/.rotate.lock, so the chamberlain's rotation is followed
// (SPEC §9.11). Secrets are redacted from every line.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/lockfile"
	"github.com/kingdom-dev/kingdom/pkg/redact"
)

// CatKey is the attribute naming a record's category.
const CatKey = "cat"

// Options configures New.
type Options struct {
	Role       string
	Stdout     io.Writer // nil = os.Stdout; io.Discard to silence
	SystemLog  string    // logs/system.log ("" = stdout only)
	RotateLock string    // logs/.rotate.lock
	Level      slog.Level
}

// New returns a logger for a role.
func New(o Options) *slog.Logger {
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	h := &handler{o: o, shared: &shared{}}
	return slog.New(h)
}

type shared struct {
	mu sync.Mutex
	lf *lockfile.File
}

type handler struct {
	o      Options
	attrs  string
	group  string
	shared *shared
}

func (h *handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.o.Level }

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	nh := *h
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range as {
		writeAttr(&b, h.group, a)
	}
	nh.attrs = b.String()
	return &nh
}

func (h *handler) WithGroup(name string) slog.Handler {
	nh := *h
	if nh.group != "" {
		nh.group += "."
	}
	nh.group += name
	return &nh
}

func levelCat(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "ERROR"
	case l >= slog.LevelWarn:
		return "WARN"
	case l >= slog.LevelInfo:
		return "INFO"
	}
	return "DEBUG"
}

func writeAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		g := a.Key
		if group != "" {
			g = group + "." + g
		}
		for _, ga := range a.Value.Group() {
			writeAttr(b, g, ga)
		}
		return
	}
	key := a.Key
	if group != "" {
		key = group + "." + key
	}
	v := a.Value.String()
	if a.Value.Kind() == slog.KindDuration {
		v = a.Value.Duration().String()
	}
	if strings.ContainsAny(v, " \t\"=") || v == "" {
		v = fmt.Sprintf("%q", v)
	}
	b.WriteByte(' ')
	b.WriteString(key)
	b.WriteByte('=')
	b.WriteString(v)
}

func (h *handler) Handle(_ context.Context, r slog.Record) error {
	cat := levelCat(r.Level)
	var b strings.Builder
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == CatKey && h.group == "" {
			cat = strings.ToUpper(a.Value.String())
			return true
		}
		writeAttr(&b, h.group, a)
		return true
	})
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	line := fmt.Sprintf("[%s] [%s] [%s] %s\n", t.Format("2006-01-02 15:04:05"), cat, h.o.Role, Redact(b.String()))
	h.shared.mu.Lock()
	defer h.shared.mu.Unlock()
	io.WriteString(h.o.Stdout, line)
	if h.o.SystemLog != "" {
		h.appendFile(line)
	}
	return nil
}

func (h *handler) appendFile(line string) {
	s := h.shared
	if s.lf == nil && h.o.RotateLock != "" {
		if lf, err := lockfile.Open(h.o.RotateLock); err == nil {
			s.lf = lf
		}
	}
	if s.lf != nil {
		if s.lf.RLock() == nil {
			defer s.lf.Unlock()
		}
	}
	f, err := os.OpenFile(h.o.SystemLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	f.WriteString(line)
	f.Close()
}

// Redact replaces secrets with "[REDACTED]": the one redactor,
// redact.String (SPEC §10.14).
func Redact(s string) string { return redact.String(s) }

// MaybeSecret is a cheap pre-check: false means Redact would change nothing.
func MaybeSecret(s string) bool { return redact.MaybeSecret(s) }

// Discard returns a logger that drops everything (tests).
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
