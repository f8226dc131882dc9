package engine

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	// Reset times name IANA zones ("9am (America/Chicago)"); a host without
	// /usr/share/zoneinfo must still parse them.
	_ "time/tzdata"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
)

// Usage and rate limits (SPEC §10.8). The engines word them in many ways and
// the words change between versions; every shape measured is recognised
// here by pure functions, so the soldier can turn a limit into
// error_reason UsageLimited with the time it lifts.
//
//	w := engine.NewLimitWatch(engineName)
//	for each stdout line: w.Line(line)      // beside the Parser
//	w.Text(stderrTail)                      // any other output
//	if lim, ok := w.Limit(now, fallback); ok { /* UsageLimited, lim.ResetsAt */ }

// Limit is a recognised usage or rate limit.
type Limit struct {
	// ResetsAt is when the engine accepts work again: parsed from the
	// engine's text or event, else now + the fallback.
	ResetsAt time.Time
	// Parsed says ResetsAt came from the engine, not from the fallback.
	Parsed bool
	// Reason is the engine's words without a final period (the caller
	// redacts and truncates).
	Reason string
}

// DefaultLimitFallback is runtime.usage_limit_fallback_minutes' default.
const DefaultLimitFallback = 60 * time.Minute

// MinLimitPause is the shortest pause: a reset already in the past (clock
// skew, a stale message, a time shown to the minute) must not turn a
// limited engine into a tight loop of attempts that are never counted.
const MinLimitPause = 15 * time.Second

// MaxLimitPause bounds a parsed reset: the longest window the engines have
// is seven days; anything further is a misparse and the fallback is used.
// It is the pause file's cap.
const MaxLimitPause = enginepause.MaxPause

// LimitWatch accumulates the limit signals of one engine run. It is not safe
// for concurrent use.
type LimitWatch struct {
	engine string
	// hit: a limit text or event was seen in an error context.
	hit    bool
	reason string
	// reset is the first reset time the output carried (zero: none).
	reset time.Time
	// epochReset is a reset given as a unix time; resolved without now.
	// relative is a reset given as a duration from the time of the run.
	relative time.Duration
	// textReset is a wall-clock reset to resolve against now.
	textReset *wallReset
	// rejected: a claude rate_limit_event with status rejected.
	rejected bool
	// failed429: claude's result said is_error with api_error_status 429.
	failed429 bool
	// failedResult: claude's result said is_error.
	failedResult bool
	// textReason is the limit sentence of a text, preferred to reason.
	textReason string
	// server: a server rate limit or overload was seen in an error
	// context (a claude 429 result, codex's rate-limit or high-demand
	// words); serverReason is its sentence. A usage limit outranks it.
	server       bool
	serverReason string
}

// NewLimitWatch returns a watch for engine name (claude, codex or command;
// a command engine's output is read as text).
func NewLimitWatch(name string) *LimitWatch { return &LimitWatch{engine: name} }

// Line consumes one stdout line (without the newline).
func (w *LimitWatch) Line(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var m map[string]any
	if line[0] != '{' || json.Unmarshal(line, &m) != nil {
		w.Text(string(line))
		return
	}
	typ, _ := m["type"].(string)
	switch w.engine {
	case config.EngineClaude:
		w.claudeRecord(typ, m)
	case config.EngineCodex:
		w.codexRecord(typ, m)
	default:
		w.Text(string(line))
	}
}

func (w *LimitWatch) claudeRecord(typ string, m map[string]any) {
	switch typ {
	case "rate_limit_event":
		info, _ := m["rate_limit_info"].(map[string]any)
		if info == nil {
			return
		}
		if st, _ := info["status"].(string); st != "rejected" {
			return
		}
		w.rejected = true
		if t, ok := epochOf(info["resetsAt"]); ok {
			w.setReset(t)
		}
		if w.reason == "" {
			kind, _ := info["rateLimitType"].(string)
			w.reason = strings.TrimSpace("rate limit rejected " + kind)
		}
	case "result":
		isErr, _ := m["is_error"].(bool)
		if !isErr {
			return
		}
		w.failedResult = true
		if st, ok := m["api_error_status"].(float64); ok && (st == 429 || st == 529) {
			// 529: the API is overloaded, the same weather as a 429.
			w.failed429 = true
		}
		res, _ := m["result"].(string)
		w.Text(res)
		errs, _ := m["errors"].([]any)
		for _, e := range errs {
			if s, ok := e.(string); ok {
				w.Text(s)
			}
		}
		if w.failed429 {
			// A 429 is a usage limit only when something says so (the
			// words, a rejected rate_limit_event); otherwise it is the
			// server's rate limit (x-should-retry: true, no reset named):
			// retried, never a pause of the engine (SPEC §12.4).
			w.server = true
			if w.serverReason == "" {
				w.serverReason = firstLine(res, "API error 429")
			}
		}
	}
}

func (w *LimitWatch) codexRecord(typ string, m map[string]any) {
	switch typ {
	case "usage_limit_reached":
		w.hit = true
		if w.reason == "" {
			w.reason = "usage_limit_reached"
		}
		w.codexResets(m)
	case "error":
		s, _ := m["message"].(string)
		w.Text(s)
		w.codexResets(m)
	case "turn.failed":
		if e, ok := m["error"].(map[string]any); ok {
			s, _ := e["message"].(string)
			w.Text(s)
			w.codexResets(e)
		}
	}
}

// codexResets reads the API's own resets_at / resets_in_seconds fields.
func (w *LimitWatch) codexResets(m map[string]any) {
	if t, ok := epochOf(m["resets_at"]); ok {
		w.setReset(t)
		return
	}
	if s, ok := m["resets_in_seconds"].(float64); ok && s >= 0 && s < MaxLimitPause.Seconds() {
		if w.relative == 0 {
			w.relative = time.Duration(s * float64(time.Second))
		}
	}
}

// Text consumes any other output of the run: stderr, a result text, an
// error message. A text is taken as a limit only when it says so.
func (w *LimitWatch) Text(s string) {
	if s == "" {
		return
	}
	if len(s) > 64<<10 {
		s = s[len(s)-64<<10:]
	}
	if !IsLimitText(s) {
		if w.engine == config.EngineCodex && serverRE().MatchString(s) {
			w.server = true
			if w.serverReason == "" {
				w.serverReason = lineMatching(s, serverRE())
			}
		}
		return
	}
	w.hit = true
	if w.textReason == "" {
		w.textReason = lineMatching(s, limitRE())
	}
	w.textResets(s)
}

func (w *LimitWatch) textResets(s string) {
	if t, ok := pipeEpoch(s); ok {
		w.setReset(t)
		return
	}
	// An embedded API error object ({"type":"usage_limit_reached",...}).
	if i := strings.IndexByte(s, '{'); i >= 0 {
		var m map[string]any
		if ExtractJSONObject(s[i:], &m) {
			e, _ := m["error"].(map[string]any)
			for _, v := range []any{m["resets_at"], e["resets_at"]} {
				if t, ok := epochOf(v); ok {
					w.setReset(t)
					return
				}
			}
		}
	}
	if wr, ok := parseWallReset(s); ok && w.textReset == nil {
		w.textReset = wr
		return
	}
	if d, ok := parseRelative(s); ok && w.relative == 0 {
		w.relative = d
	}
}

func (w *LimitWatch) setReset(t time.Time) {
	if w.reset.IsZero() {
		w.reset = t
	}
}

// Limit reports whether the run ended on a usage or rate limit, and when it
// lifts: the reset the output named, else now + fallback (≤ 0: the default
// 60 minutes). A reset in the past gives now + MinLimitPause; one beyond
// MaxLimitPause is taken as a misparse and gives the fallback.
func (w *LimitWatch) Limit(now time.Time, fallback time.Duration) (Limit, bool) {
	if !w.usage() {
		return Limit{}, false
	}
	if fallback <= 0 {
		fallback = DefaultLimitFallback
	}
	lim := Limit{Reason: w.textReason}
	if lim.Reason == "" {
		lim.Reason = w.reason
	}
	// The engines end their sentence with a period; messages that quote
	// the reason add their own punctuation after it.
	lim.Reason = strings.TrimRight(strings.TrimSpace(lim.Reason), ".")
	if lim.Reason == "" {
		lim.Reason = "usage limit reached"
	}
	var at time.Time
	switch {
	case !w.reset.IsZero():
		at = w.reset
	case w.textReset != nil:
		at = w.textReset.next(now)
	case w.relative > 0:
		at = now.Add(w.relative)
	}
	switch {
	case at.IsZero() || at.Sub(now) > MaxLimitPause:
		lim.ResetsAt = now.Add(fallback)
	case at.Sub(now) < MinLimitPause:
		lim.ResetsAt = now.Add(MinLimitPause)
		lim.Parsed = true
	default:
		lim.ResetsAt = at
		lim.Parsed = true
	}
	return lim, true
}

// usage reports whether the run ended on a usage limit: the words say so,
// or claude's subscription rate_limit_event was rejected and the run
// failed.
func (w *LimitWatch) usage() bool { return w.hit || (w.rejected && w.failedResult) }

// RateLimit reports whether the run ended on a server rate limit or
// overload, not a usage limit (SPEC §12.4): a claude 429 whose words name
// no usage limit (the API's per-minute limits; the CLI's own retries of an
// x-should-retry: true answer ran out), codex's rate-limit and
// "high demand" errors. Such a run is retried after a backoff; the engine
// is never paused for it. reason is the engine's words.
func (w *LimitWatch) RateLimit() (reason string, ok bool) {
	if !w.server || w.usage() {
		return "", false
	}
	return strings.TrimRight(strings.TrimSpace(w.serverReason), "."), true
}

// serverRE matches codex's words for a server rate limit or overload (not
// a usage limit): the API's rate_limit_exceeded ("Rate limit reached for
// gpt-… on tokens per min"), 429 Too Many Requests without a usage-limit
// body, "We're currently experiencing high demand", server_is_overloaded.
var serverRE = lazyRE(`(?i)(rate limit reached for|rate_limit_exceeded|too many requests|high demand|server_is_overloaded|overloaded)`)

// limitRE matches every wording of a usage limit the engines have used
// (ENGINES.md), case-insensitively. A bare 429 ("Request rejected (429)")
// or rate_limit_exceeded is the server's rate limit, not a usage limit.
var limitRE = lazyRE(`(?i)(usage limit (?:reached|has been reached|exceeded)` +
	`|hit your (?:[\w-]+ )?limit` +
	`|out of extra usage` +
	`|quota exceeded` +
	`|usage_limit_reached)`)

// IsLimitText reports whether s is an engine's usage-limit message.
func IsLimitText(s string) bool { return limitRE().MatchString(s) }

// lineMatching is the line of s that re matches (the one naming the limit),
// trimmed; all of s when no single line does.
func lineMatching(s string, re *regexp.Regexp) string {
	for _, l := range strings.Split(s, "\n") {
		if re.MatchString(l) {
			return strings.TrimSpace(l)
		}
	}
	return strings.TrimSpace(s)
}

func firstLine(s, def string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return def
	}
	return s
}

// epochOf reads a unix time in seconds (or milliseconds) from a JSON number
// or numeric string.
func epochOf(v any) (time.Time, bool) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case string:
		p, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			if t, err := time.Parse(time.RFC3339, strings.TrimSpace(x)); err == nil {
				return t, true
			}
			return time.Time{}, false
		}
		f = p
	default:
		return time.Time{}, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return time.Time{}, false
	}
	if f > 1e12 { // milliseconds
		f /= 1000
	}
	if f > 1e11 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
}

// pipeEpochRE: claude's oldest form, "Claude AI usage limit reached|1745000000".
var pipeEpochRE = lazyRE(`(?i)limit reached\|(\d{9,13})`)

func pipeEpoch(s string) (time.Time, bool) {
	m := pipeEpochRE().FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, false
	}
	return epochOf(m[1])
}

// wallReset is a reset named by the clock: "9am (America/Chicago)",
// "Apr 28th, 2026 10:03 PM". Without a date it means the next such time.
type wallReset struct {
	loc        *time.Location
	hour, min  int
	dated      bool
	year       int // 0: the next occurrence of month/day
	month, day int
}

// recentReset is how long after a named clock time has passed it still
// means the reset the engine just reported, not the same time tomorrow: a
// run that raced the reset, or was slow to start, reads the same words
// again and must wait the minimum pause, not a day.
const recentReset = 5 * time.Minute

// next resolves the reset against now. The engines print their reset to
// the minute and drop the seconds (claude's "6:13pm" for 18:13:20, codex's
// "8:22 AM"), so the named minute is over only at its end: the reset is
// the start of the next minute, never up to 59 s early. A named minute
// that ended at most recentReset ago is now (Limit turns it into the
// minimum pause); one further back is the next occurrence.
func (r *wallReset) next(now time.Time) time.Time {
	n := now.In(r.loc)
	var cands []time.Time
	switch {
	case !r.dated:
		for d := -1; d <= 1; d++ {
			cands = append(cands, time.Date(n.Year(), n.Month(), n.Day()+d, r.hour, r.min, 0, 0, r.loc))
		}
	case r.year != 0:
		cands = append(cands, time.Date(r.year, time.Month(r.month), r.day, r.hour, r.min, 0, 0, r.loc))
	default:
		for y := -1; y <= 1; y++ {
			cands = append(cands, time.Date(n.Year()+y, time.Month(r.month), r.day, r.hour, r.min, 0, 0, r.loc))
		}
	}
	var last time.Time
	for _, c := range cands {
		end := c.Add(time.Minute)
		if end.After(now) {
			if !last.IsZero() && now.Sub(last) <= recentReset {
				return now
			}
			return end
		}
		last = end
	}
	// Every candidate has passed: a dated reset in the past (Limit holds
	// it for the minimum pause).
	return last
}

var (
	// "resets 8pm (Europe/Berlin)", "reset at 9am (America/Chicago)",
	// "resets 9:30 am", "resets at 21:00 (UTC)".
	clockResetRE = lazyRE(`(?i)\breset(?:s)?(?: at)? (\d{1,2})(?::(\d{2}))? ?([ap]\.?m\.?)?(?:\s*\(([A-Za-z0-9_+\-/]+)\))?`)
	// "try again at Apr 28th, 2026 10:03 PM", "resets Nov 25, 9am (Europe/Berlin)".
	datedResetRE = lazyRE(`(?i)\b(?:try again at|reset(?:s)?(?: at| on)?) ([A-Z][a-z]{2,8})\.? (\d{1,2})(?:st|nd|rd|th)?,?(?: (\d{4}))?,?(?: at)? (\d{1,2})(?::(\d{2}))? ?([ap]\.?m\.?)?(?:\s*\(([A-Za-z0-9_+\-/]+)\))?`)
	// "try again at 10:03 PM" (a time without a date).
	againClockRE = lazyRE(`(?i)\btry again at (\d{1,2})(?::(\d{2}))? ?([ap]\.?m\.?)?(?:\s*\(([A-Za-z0-9_+\-/]+)\))?`)
	// "try again in 2 hours 5 minutes", "resets in 45m".
	relativeRE = lazyRE(`(?i)\b(?:try again|resets?) in ((?:\d+ ?(?:days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b[ ,]*(?:and )?)+)`)
	relPartRE  = lazyRE(`(?i)(\d+) ?(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b`)
)

var months = map[string]int{
	"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
	"jul": 7, "aug": 8, "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}

func monthOf(s string) (int, bool) {
	s = strings.ToLower(s)
	if m, ok := months[s]; ok {
		return m, true
	}
	if len(s) >= 3 {
		if m, ok := months[s[:3]]; ok && strings.HasPrefix(strings.ToLower(time.Month(m).String()), s) {
			return m, true
		}
	}
	return 0, false
}

// clock24 turns h, mm and an am/pm marker into a 24-hour time.
func clock24(hs, ms, ampm string) (int, int, bool) {
	h, err := strconv.Atoi(hs)
	if err != nil {
		return 0, 0, false
	}
	m := 0
	if ms != "" {
		if m, err = strconv.Atoi(ms); err != nil || m > 59 {
			return 0, 0, false
		}
	}
	switch ap := strings.ToLower(strings.ReplaceAll(ampm, ".", "")); ap {
	case "":
		if h > 23 {
			return 0, 0, false
		}
	case "am", "pm":
		if h < 1 || h > 12 {
			return 0, 0, false
		}
		// 12 am is 0:00, 12 pm noon.
		h %= 12
		if ap == "pm" {
			h += 12
		}
	}
	return h, m, true
}

// zoneOf loads an IANA zone name; "" or an unknown name is host local time.
func zoneOf(name string) *time.Location {
	if name == "" {
		return time.Local
	}
	if strings.EqualFold(name, "UTC") || strings.EqualFold(name, "GMT") {
		return time.UTC
	}
	if loc, err := time.LoadLocation(name); err == nil {
		return loc
	}
	return time.Local
}

// parseWallReset finds a clock reset in s.
func parseWallReset(s string) (*wallReset, bool) {
	if m := datedResetRE().FindStringSubmatch(s); m != nil {
		if mon, ok := monthOf(m[1]); ok {
			day, _ := strconv.Atoi(m[2])
			year := 0
			if m[3] != "" {
				year, _ = strconv.Atoi(m[3])
			}
			if h, mi, ok := clock24(m[4], m[5], m[6]); ok && day >= 1 && day <= 31 {
				return &wallReset{loc: zoneOf(m[7]), hour: h, min: mi, dated: true, year: year, month: mon, day: day}, true
			}
		}
	}
	for _, re := range []*regexp.Regexp{clockResetRE(), againClockRE()} {
		m := re.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		// A bare number is a time only with am/pm, minutes or a zone:
		// "resets 2 times" is not a clock.
		if m[2] == "" && m[3] == "" && m[4] == "" {
			continue
		}
		if h, mi, ok := clock24(m[1], m[2], m[3]); ok {
			return &wallReset{loc: zoneOf(m[4]), hour: h, min: mi}, true
		}
	}
	return nil, false
}

// parseRelative finds "try again in 2 hours 5 minutes" in s.
func parseRelative(s string) (time.Duration, bool) {
	m := relativeRE().FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	var d time.Duration
	for _, p := range relPartRE().FindAllStringSubmatch(m[1], -1) {
		n, err := strconv.Atoi(p[1])
		if err != nil || n > 100000 {
			return 0, false
		}
		switch u := strings.ToLower(p[2]); {
		case strings.HasPrefix(u, "d"):
			d += time.Duration(n) * 24 * time.Hour
		case strings.HasPrefix(u, "h"):
			d += time.Duration(n) * time.Hour
		case strings.HasPrefix(u, "m"):
			d += time.Duration(n) * time.Minute
		default:
			d += time.Duration(n) * time.Second
		}
	}
	return d, d > 0
}
