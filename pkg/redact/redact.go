// Package redact is Kingdom's one redactor (SPEC §10.14): every way out of
// the process — Slack and console messages, results, session logs, prompts,
// events, system.log — passes text through String (or a value through
// Value, a stream through Writer) so a secret never leaves in clear.
//
// It replaces with Marker:
//   - the exact values of the secret variables Kingdom knows, read from the
//     process environment at call time: GH_TOKEN, GITHUB_TOKEN,
//     JIRA_API_TOKEN, every SLACK_*_TOKEN, ANTHROPIC_API_KEY,
//     OPENAI_API_KEY, CLAUDE_CODE_OAUTH_TOKEN, ANTHROPIC_AUTH_TOKEN,
//     CODEX_API_KEY, KINGDOM_PG_DSN (the PostgreSQL DSN, which may carry
//     a password), and the names given to SetExtraNames
//     (config.SecretEnvNames: system.yaml runtime.secret_env and
//     store.dsn_env, the dashboard's http.token_env, the envoy's Slack
//     token variables);
//   - token shapes (Slack xox*/xapp tokens, every GitHub form: ghp_,
//     gho_, ghu_, ghr_, ghs_ (the opaque and the newer ghs_<app>_<JWT>
//     installation token, dots, dashes and underscores included),
//     github_pat_,
//     Anthropic/OpenAI sk- keys, Authorization headers, token=… query
//     parameters, "…token": "…" JSON fields, the password of a
//     postgres://user:password@host URL).
//
// Drive it with redact.String(s); CleanEnv(env) drops the secret variables
// from an environment handed to a process that must not hold them (the tmux
// server).
package redact

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Marker replaces every secret.
const Marker = "[REDACTED]"

// MinValueLen is the shortest secret value matched exactly: a shorter value
// would redact ordinary words.
const MinValueLen = 6

// knownNames are the secret variables of SPEC §10.14 (SLACK_*_TOKEN is
// matched by shape in IsSecretName).
var knownNames = []string{"GH_TOKEN", "GITHUB_TOKEN", "JIRA_API_TOKEN", "ANTHROPIC_API_KEY", "OPENAI_API_KEY",
	"CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN", "CODEX_API_KEY", "KINGDOM_PG_DSN", "KINGDOM_HTTP_TOKEN",
	"GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN"}

var (
	extraMu sync.RWMutex
	extra   []string
)

// SetExtraNames adds variable names whose values are secrets too
// (system.yaml runtime.secret_env). It replaces the previous extra list.
func SetExtraNames(names []string) {
	extraMu.Lock()
	defer extraMu.Unlock()
	extra = append([]string(nil), names...)
}

// IsSecretName reports whether the variable name holds a secret Kingdom
// knows.
func IsSecretName(name string) bool {
	for _, k := range knownNames {
		if name == k {
			return true
		}
	}
	if strings.HasPrefix(name, "SLACK_") && strings.HasSuffix(name, "_TOKEN") && len(name) > len("SLACK__TOKEN") {
		return true
	}
	extraMu.RLock()
	defer extraMu.RUnlock()
	for _, k := range extra {
		if name == k {
			return true
		}
	}
	return false
}

// values returns the secret values present in the environment, longest
// first (so a value containing another is replaced whole).
func values() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || len(v) < MinValueLen || !IsSecretName(k) {
			continue
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// patterns are compiled on first use: every process links this package
// (soldier-spawn starts once per task), most text never reaches them (see
// maybePattern), and compiling them at init cost each start ~0.2 ms.
var patterns = sync.OnceValue(func() []*regexp.Regexp {
	return []*regexp.Regexp{
		regexp.MustCompile(`xox[abposr]-[A-Za-z0-9-]+`),
		regexp.MustCompile(`xapp-[A-Za-z0-9-]+`),
		// GitHub's stateless installation token (2026): ghs_<app id>_<JWT>,
		// ~520 characters; GitHub's own recommended shape. Before the
		// opaque forms, which would stop at its first underscore.
		regexp.MustCompile(`ghs_[A-Za-z0-9._-]{36,}`),
		regexp.MustCompile(`gh[pousr]_[A-Za-z0-9]{16,}`),
		regexp.MustCompile(`github_pat_[A-Za-z0-9_]{20,}`),
		regexp.MustCompile(`sk-ant-[A-Za-z0-9_-]+`),
		regexp.MustCompile(`sk-proj-[A-Za-z0-9_-]{20,}`),
		regexp.MustCompile(`sk-[A-Za-z0-9]{20,}`),
		regexp.MustCompile(`(?i)(authorization:?\s*(bearer|basic|token)\s+)[^\s"']+`),
		regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9+/=._-]{8,}`),
		regexp.MustCompile(`(?i)((token|password|secret|api_key)=)[^\s&"']+`),
		regexp.MustCompile(`(?i)("[a-z_]*(token|password|secret|api_key)"\s*:\s*")(?:[^"\\]|\\.)+`),
		// A DSN's password (a DSN that is not the exact value of its
		// variable: quoted in an error, typed by hand).
		regexp.MustCompile(`(?i)(postgres(?:ql)?://[^:/@\s]*:)[^@\s/]+@`),
	}
})

// String returns s with every secret replaced by Marker.
func String(s string) string {
	for _, v := range values() {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Marker)
		}
	}
	if !maybePattern(s) {
		return s
	}
	return applyPatterns(s)
}

// applyPatterns replaces every token shape in s.
func applyPatterns(s string) string {
	for _, re := range patterns() {
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			sub := re.FindStringSubmatch(m)
			if len(sub) > 1 && sub[1] != "" && (strings.HasSuffix(strings.ToLower(sub[1]), "=") || strings.HasSuffix(sub[1], "\"")) ||
				(len(sub) > 2 && strings.HasPrefix(strings.ToLower(sub[1]), "authorization")) {
				return sub[1] + Marker
			}
			if len(sub) > 1 && strings.HasSuffix(sub[1], ":") && strings.HasSuffix(m, "@") {
				return sub[1] + Marker + "@" // postgres://user:[REDACTED]@host
			}
			return Marker
		})
	}
	return s
}

// maybePattern is a cheap pre-check: false means no pattern can match.
func maybePattern(s string) bool {
	l := strings.ToLower(s)
	for _, m := range []string{"xox", "xapp-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "bearer", "basic", "token", "password", "secret", "api_key", "postgres"} {
		if strings.Contains(l, m) {
			return true
		}
	}
	return maybeSK(s)
}

// maybeSK reports whether an "sk-" of s starts what an sk- pattern could
// match: "sk-ant-", "sk-proj-", or "sk-" and 20 letters or digits. Every
// task id has an "sk-" ("task-…") and nearly every event and log line names
// one: a bare "sk-" sent them all through the regular expressions.
func maybeSK(s string) bool {
	for {
		i := strings.Index(s, "sk-")
		if i < 0 {
			return false
		}
		s = s[i+3:]
		if strings.HasPrefix(s, "ant-") || strings.HasPrefix(s, "proj-") {
			return true
		}
		n := 0
		for n < len(s) && n < 20 && isAlnum(s[n]) {
			n++
		}
		if n == 20 {
			return true
		}
	}
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// MaybeSecret reports whether String could change s (false: skip it).
func MaybeSecret(s string) bool {
	if maybePattern(s) {
		return true
	}
	for _, v := range values() {
		if strings.Contains(s, v) {
			return true
		}
	}
	return false
}

// Value redacts every string inside a decoded JSON value (maps and slices
// are changed in place) and returns it.
func Value(v any) any {
	switch x := v.(type) {
	case string:
		return String(x)
	case map[string]any:
		for k, e := range x {
			x[k] = Value(e)
		}
	case []any:
		for i, e := range x {
			x[i] = Value(e)
		}
	case []string:
		for i, e := range x {
			x[i] = String(e)
		}
	}
	return v
}

// JSON returns a JSON document with its string values redacted, keeping
// numbers exact; a document that does not decode is redacted as text.
func JSON(b []byte) []byte {
	if !MaybeSecret(string(b)) {
		return b
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return []byte(String(string(b)))
	}
	out, err := json.MarshalIndent(Value(v), "", "  ")
	if err != nil {
		return []byte(String(string(b)))
	}
	if bytes.HasSuffix(b, []byte("\n")) {
		out = append(out, '\n')
	}
	return out
}

// MaxLine is the longest partial line a Writer holds before redacting and
// writing it anyway.
const MaxLine = 1 << 20

// Writer redacts a stream line by line (a secret split across two writes is
// still caught) before it reaches the underlying writer. Close flushes the
// last partial line; it does not close the underlying writer.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewWriter returns a redacting writer over w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write buffers p and writes every complete line, redacted. It reports
// len(p) written unless the underlying writer fails.
func (r *Writer) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			break
		}
		if err := r.emit(r.buf[:i+1]); err != nil {
			return 0, err
		}
		r.buf = r.buf[i+1:]
	}
	if len(r.buf) > MaxLine {
		if err := r.emit(r.buf); err != nil {
			return 0, err
		}
		r.buf = nil
	}
	if len(r.buf) == 0 {
		r.buf = nil
	}
	return len(p), nil
}

func (r *Writer) emit(line []byte) error {
	_, err := io.WriteString(r.w, String(string(line)))
	return err
}

// Close writes the buffered partial line, if any.
func (r *Writer) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) == 0 {
		return nil
	}
	err := r.emit(r.buf)
	r.buf = nil
	return err
}

// CleanEnv returns env ("K=V" entries) without the secret variables.
func CleanEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if IsSecretName(k) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Clip keeps the first n runes of s and marks the cut with "…" (never
// splitting a character): the one bound for text that leaves the kingdom
// (reasons, messages, alerts).
func Clip(s string, n int) string {
	if len(s) <= n {
		return s // n bytes hold at most n runes
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}
