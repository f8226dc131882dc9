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
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/lockfile"
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

var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`xox[abposr]-[A-Za-z0-9-]+`),
	regexp.MustCompile(`xapp-[A-Za-z0-9-]+`),
	regexp.MustCompile(`gh[pousr]_[A-Za-z0-9]{16,}`),
	regexp.MustCompile(`github_pat_[A-Za-z0-9_]{20,}`),
	regexp.MustCompile(`sk-ant-[A-Za-z0-9_-]+`),
	regexp.MustCompile(`sk-[A-Za-z0-9]{20,}`),
	regexp.MustCompile(`(?i)(authorization:?\s*(bearer|basic|token)\s+)[^\s"']+`),
	regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9+/=._-]{8,}`),
	regexp.MustCompile(`(?i)((token|password|secret|api_key)=)[^\s&"']+`),
	regexp.MustCompile(`(?i)("[a-z_]*(token|password|secret|api_key)"\s*:\s*")(?:[^"\\]|\\.)+`),
}

var secretEnv = []string{
	"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "JIRA_API_TOKEN",
	"ANTHROPIC_API_KEY", "OPENAI_API_KEY",
}

// Redact replaces known secret shapes and the values of secret environment
// variables with "[REDACTED]".
func Redact(s string) string {
	for _, k := range secretEnv {
		if v := os.Getenv(k); len(v) >= 6 && strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, "[REDACTED]")
		}
	}
	for _, re := range secretPatterns {
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			sub := re.FindStringSubmatch(m)
			if len(sub) > 1 && sub[1] != "" && (strings.HasSuffix(strings.ToLower(sub[1]), "=") || strings.HasSuffix(sub[1], "\"")) ||
				(len(sub) > 2 && strings.HasPrefix(strings.ToLower(sub[1]), "authorization")) {
				return sub[1] + "[REDACTED]"
			}
			return "[REDACTED]"
		})
	}
	return s
}

// MaybeSecret is a cheap pre-check: false means Redact would change nothing
// that a secret pattern matches (env values aside), so hot paths can skip it.
func MaybeSecret(s string) bool {
	l := strings.ToLower(s)
	for _, m := range []string{"xox", "xapp-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "bearer", "basic", "token", "password", "secret", "api_key"} {
		if strings.Contains(l, m) {
			return true
		}
	}
	// "sk-" alone is everywhere ("task-…"): only an API-key shape counts.
	for rest := s; ; {
		i := strings.Index(rest, "sk-")
		if i < 0 {
			break
		}
		rest = rest[i+3:]
		n := 0
		for n < len(rest) && n < 20 && isAlnum(rest[n]) {
			n++
		}
		if n == 20 || strings.HasPrefix(rest, "ant-") || strings.HasPrefix(rest, "proj-") {
			return true
		}
	}
	for _, k := range secretEnv {
		if v := os.Getenv(k); len(v) >= 6 && strings.Contains(s, v) {
			return true
		}
	}
	return false
}

// Discard returns a logger that drops everything (tests).
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
