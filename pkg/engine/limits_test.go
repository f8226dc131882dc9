package engine

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// limitNow is the fake "now" of the table: the day of codex's measured
// "try again at Apr 28th, 2026 10:03 PM".
var limitNow = time.Date(2026, 4, 28, 12, 0, 0, 0, time.UTC)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load zone %s: %v", name, err)
	}
	return loc
}

func TestLimitWatch_EveryShapeInEngines(t *testing.T) {
	epoch := time.Unix(1777400000, 0).UTC() // 2026-04-28T18:13:20Z
	fallback := 60 * time.Minute
	codexLocal := time.Date(2026, 4, 28, 22, 4, 0, 0, time.Local)
	if !codexLocal.After(limitNow.Add(MinLimitPause)) {
		codexLocal = limitNow.Add(MinLimitPause)
	}
	type line struct {
		stdout string
		stderr string
	}
	cases := []struct {
		name   string
		engine string
		lines  []line
		want   time.Time // zero: no limit
		parsed bool
		reason string // substring of Reason
	}{
		{name: "claude pipe epoch as result text", engine: "claude",
			lines: []line{{stdout: `{"type":"result","subtype":"success","is_error":true,"result":"Claude AI usage limit reached|1777400000","session_id":"s"}`}},
			want:  epoch, parsed: true, reason: "Claude AI usage limit reached"},
		{name: "claude pipe epoch on plain stdout", engine: "claude",
			lines: []line{{stdout: `Claude AI usage limit reached|1777400000`}},
			want:  epoch, parsed: true},
		{name: "claude pipe epoch in milliseconds on stderr", engine: "claude",
			lines: []line{{stderr: "Claude AI usage limit reached|1777400000000\n"}},
			want:  epoch, parsed: true},
		{name: "claude will reset at 9am Chicago", engine: "claude",
			lines: []line{{stdout: `{"type":"result","is_error":true,"result":"Claude usage limit reached. Your limit will reset at 9am (America/Chicago).","api_error_status":null}`}},
			want:  time.Date(2026, 4, 28, 9, 1, 0, 0, mustZone(t, "America/Chicago")), parsed: true, reason: "will reset at 9am"},
		{name: "claude hit your limit resets 8pm Berlin", engine: "claude",
			lines: []line{{stdout: `{"type":"result","is_error":true,"result":"You've hit your limit · resets 8pm (Europe/Berlin)"}`}},
			want:  time.Date(2026, 4, 28, 20, 1, 0, 0, mustZone(t, "Europe/Berlin")), parsed: true, reason: "hit your limit"},
		{name: "claude session limit already past today means tomorrow", engine: "claude",
			lines: []line{{stdout: `{"type":"result","is_error":true,"result":"You've hit your session limit · resets 9am (Europe/Berlin)"}`}},
			want:  time.Date(2026, 4, 29, 9, 1, 0, 0, mustZone(t, "Europe/Berlin")), parsed: true, reason: "session limit"},
		{name: "claude out of extra usage", engine: "claude",
			lines: []line{{stdout: `{"type":"result","is_error":true,"result":"You're out of extra usage · resets 1pm (America/Los_Angeles)"}`}},
			want:  time.Date(2026, 4, 28, 13, 1, 0, 0, mustZone(t, "America/Los_Angeles")), parsed: true, reason: "extra usage"},
		{name: "claude subscription rate_limit_event and its own 5-hour text (measured, 2.1.328)", engine: "claude",
			lines: []line{
				{stdout: `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1777400000,"rateLimitType":"five_hour","isUsingOverage":false},"uuid":"u","session_id":"s"}`},
				{stdout: `{"type":"assistant","message":{"content":[{"type":"text","text":"You've hit your 5-hour limit · resets Apr 28, 2026, 6:13pm (UTC)"}]}}`},
				{stdout: `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"You've hit your 5-hour limit · resets Apr 28, 2026, 6:13pm (UTC)"}`},
			},
			want: epoch, parsed: true, reason: "5-hour limit"},
		{name: "claude 5-hour text alone", engine: "claude",
			lines: []line{{stdout: `{"type":"result","is_error":true,"result":"You've hit your 5-hour limit · resets Apr 28, 2026, 6:13pm (UTC)"}`}},
			want:  time.Date(2026, 4, 28, 18, 14, 0, 0, time.UTC), parsed: true},
		{name: "claude API-key 429 relaying the server's words (measured)", engine: "claude",
			lines: []line{{stdout: `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: Request rejected (429) · You've hit your limit · resets 8pm (Europe/Berlin)"}`}},
			want:  time.Date(2026, 4, 28, 20, 1, 0, 0, mustZone(t, "Europe/Berlin")), parsed: true},
		{name: "claude API error 429 without a time falls back", engine: "claude",
			lines: []line{{stdout: `{"type":"result","is_error":true,"api_error_status":429,"result":"API Error: Request rejected (429) · The usage limit has been reached"}`}},
			want:  limitNow.Add(fallback), reason: "Request rejected (429)"},
		{name: "claude rate_limit_event rejected then 429 result", engine: "claude",
			lines: []line{
				{stdout: `{"type":"system","subtype":"init","session_id":"s"}`},
				{stdout: `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1777400000,"rateLimitType":"five_hour"}}`},
				{stdout: `{"type":"system","subtype":"api_retry","attempt":1,"retry_delay_ms":500,"error_status":429}`},
				{stdout: `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: Request rejected (429) · The usage limit has been reached"}`},
			},
			want: epoch, parsed: true, reason: "usage limit"},
		{name: "claude rate_limit_event rejected then an error result with other text", engine: "claude",
			lines: []line{
				{stdout: `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1777400000,"rateLimitType":"seven_day"}}`},
				{stdout: `{"type":"result","is_error":true,"result":"Something else"}`},
			},
			want: epoch, parsed: true, reason: "seven_day"},
		{name: "claude allowed rate_limit_event is no limit", engine: "claude",
			lines: []line{
				{stdout: `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1777400000}}`},
				{stdout: `{"type":"result","is_error":false,"result":"done"}`},
			}},
		{name: "claude rejected event but the run succeeded", engine: "claude",
			lines: []line{
				{stdout: `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1777400000}}`},
				{stdout: `{"type":"result","is_error":false,"result":"done"}`},
			}},
		{name: "claude agent text mentioning a limit in a success", engine: "claude",
			lines: []line{{stdout: `{"type":"result","is_error":false,"result":"I fixed the usage limit reached banner; resets 8pm"}`}}},
		{name: "claude assistant message mentioning a limit", engine: "claude",
			lines: []line{{stdout: `{"type":"assistant","message":{"content":[{"type":"text","text":"You've hit your limit · resets 8pm (Europe/Berlin)"}]}}`}}},
		{name: "claude other API error", engine: "claude",
			lines: []line{{stdout: `{"type":"result","is_error":true,"api_error_status":400,"result":"API Error: 400 credit balance too low"}`}}},
		{name: "codex error event", engine: "codex",
			lines: []line{{stdout: `{"type":"error","message":"You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again later."}`}},
			want:  limitNow.Add(fallback), reason: "usage limit"},
		{name: "codex turn.failed with a dated reset", engine: "codex",
			lines: []line{
				{stdout: `{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}`},
				{stdout: `{"type":"turn.failed","error":{"message":"You've hit your usage limit. Visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at Apr 28th, 2026 10:03 PM."}}`},
			},
			want: codexLocal, parsed: true, reason: "try again at Apr 28th"},
		{name: "codex 0.169 error and turn.failed with a curly apostrophe (measured)", engine: "codex",
			lines: []line{
				{stdout: `{"type":"error","message":"You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at Apr 28th, 2026 6:13 PM."}`},
				{stdout: `{"type":"turn.failed","error":{"message":"You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at Apr 28th, 2026 6:13 PM."}}`},
			},
			want: time.Date(2026, 4, 28, 18, 14, 0, 0, time.Local), parsed: true, reason: "usage limit"},
		{name: "codex usage_limit_reached event", engine: "codex",
			lines: []line{{stdout: `{"type":"usage_limit_reached","resets_at":1777400000,"resets_in_seconds":22400}`}},
			want:  epoch, parsed: true},
		{name: "codex usage_limit_reached with only resets_in_seconds", engine: "codex",
			lines: []line{{stdout: `{"type":"usage_limit_reached","resets_in_seconds":600}`}},
			want:  limitNow.Add(10 * time.Minute), parsed: true},
		{name: "codex error carrying the API error object", engine: "codex",
			lines: []line{{stdout: `{"type":"error","message":"unexpected status 429 Too Many Requests: {\"error\":{\"type\":\"usage_limit_reached\",\"message\":\"The usage limit has been reached\",\"resets_at\":1777400000}}"}`}},
			want:  epoch, parsed: true},
		{name: "codex quota exceeded", engine: "codex",
			lines: []line{{stdout: `{"type":"turn.failed","error":{"message":"Quota exceeded. Check your plan and billing details."}}`}},
			want:  limitNow.Add(fallback), reason: "Quota exceeded"},
		{name: "codex quota exceeded on stderr", engine: "codex",
			lines: []line{{stderr: "ERROR: Quota exceeded. Check your plan and billing details.\n"}},
			want:  limitNow.Add(fallback)},
		{name: "codex agent message about quotas is no limit", engine: "codex",
			lines: []line{{stdout: `{"type":"item.completed","item":{"type":"agent_message","text":"Quota exceeded. Check your plan and billing details."}}`}}},
		{name: "codex other failure", engine: "codex",
			lines: []line{{stdout: `{"type":"turn.failed","error":{"message":"stream disconnected before completion"}}`}}},
		{name: "codex try again in a duration", engine: "codex",
			lines: []line{{stdout: `{"type":"error","message":"You've hit your usage limit. Try again in 2 hours 5 minutes."}`}},
			want:  limitNow.Add(2*time.Hour + 5*time.Minute), parsed: true},
		{name: "a reset in the past is held for the minimum pause", engine: "claude",
			lines: []line{{stderr: "Claude AI usage limit reached|1700000000"}},
			want:  limitNow.Add(MinLimitPause), parsed: true},
		{name: "a reset absurdly far ahead falls back", engine: "claude",
			lines: []line{{stderr: "Claude AI usage limit reached|4102444800"}},
			want:  limitNow.Add(fallback)},
		{name: "command engine stdout", engine: "command",
			lines: []line{{stdout: "You've hit your limit · resets 8pm (Europe/Berlin)"}},
			want:  time.Date(2026, 4, 28, 20, 1, 0, 0, mustZone(t, "Europe/Berlin")), parsed: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := NewLimitWatch(c.engine)
			for _, l := range c.lines {
				if l.stdout != "" {
					w.Line([]byte(l.stdout))
				}
				if l.stderr != "" {
					w.Text(l.stderr)
				}
			}
			lim, ok := w.Limit(limitNow, fallback)
			if c.want.IsZero() {
				if ok {
					t.Fatalf("got limit %+v, want none", lim)
				}
				return
			}
			if !ok {
				t.Fatalf("no limit recognised, want resets at %s", c.want.UTC())
			}
			if !lim.ResetsAt.Equal(c.want) {
				t.Errorf("resets at %s, want %s", lim.ResetsAt.UTC(), c.want.UTC())
			}
			if lim.Parsed != c.parsed {
				t.Errorf("parsed %v, want %v", lim.Parsed, c.parsed)
			}
			if lim.Reason == "" || !strings.Contains(lim.Reason, c.reason) {
				t.Errorf("reason %q, want it to contain %q", lim.Reason, c.reason)
			}
		})
	}
}

func TestLimitWatch_DefaultFallbackIsAnHour(t *testing.T) {
	w := NewLimitWatch("claude")
	w.Text("Quota exceeded.")
	lim, ok := w.Limit(limitNow, 0)
	if !ok || !lim.ResetsAt.Equal(limitNow.Add(time.Hour)) {
		t.Fatalf("got %+v ok=%v, want now+60m", lim, ok)
	}
}

func TestParseWallReset_Forms(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	cases := []struct {
		text string
		want time.Time
	}{
		{"resets 9:30pm (Europe/Berlin)", time.Date(2026, 4, 28, 21, 31, 0, 0, berlin)},
		{"resets 12am (Europe/Berlin)", time.Date(2026, 4, 29, 0, 1, 0, 0, berlin)},
		{"resets 12pm (Europe/Berlin)", time.Date(2026, 4, 29, 12, 1, 0, 0, berlin)},
		{"resets at 21:00 (UTC)", time.Date(2026, 4, 28, 21, 1, 0, 0, time.UTC)},
		{"resets Nov 25, 9am (Europe/Berlin)", time.Date(2026, 11, 25, 9, 1, 0, 0, berlin)},
		{"resets Jan 3 at 9am (Europe/Berlin)", time.Date(2027, 1, 3, 9, 1, 0, 0, berlin)},
		{"try again at Apr 28th, 2026 10:03 PM (UTC)", time.Date(2026, 4, 28, 22, 4, 0, 0, time.UTC)},
		{"try again at September 1st 2026 1:05 a.m. (UTC)", time.Date(2026, 9, 1, 1, 6, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			r, ok := parseWallReset(c.text)
			if !ok {
				t.Fatalf("not parsed")
			}
			if got := r.next(limitNow); !got.Equal(c.want) {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
	for _, s := range []string{"resets 2 times", "resets 25pm (UTC)", "resets 13am", "resets 24:00 (UTC)"} {
		if r, ok := parseWallReset(s); ok {
			t.Errorf("%q parsed as %+v, want no clock", s, r)
		}
	}
}

func FuzzLimitWatch(f *testing.F) {
	for _, s := range []string{
		`{"type":"result","is_error":true,"api_error_status":429,"result":"API Error: Request rejected (429) · The usage limit has been reached"}`,
		`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1777400000}}`,
		`Claude AI usage limit reached|1777400000`,
		`You've hit your limit · resets 8pm (Europe/Berlin)`,
		`{"type":"turn.failed","error":{"message":"You've hit your usage limit. try again at Apr 28th, 2026 10:03 PM."}}`,
		`{"type":"usage_limit_reached","resets_at":1777400000,"resets_in_seconds":1}`,
		`Quota exceeded. Check your plan and billing details.`,
		`resets Nov 31, 99pm (Mars/Olympus)`,
	} {
		f.Add("claude", s)
		f.Add("codex", s)
	}
	f.Fuzz(func(t *testing.T, eng, out string) {
		w := NewLimitWatch(eng)
		for _, l := range strings.Split(out, "\n") {
			w.Line([]byte(l))
		}
		w.Text(out)
		lim, ok := w.Limit(limitNow, 30*time.Minute)
		if !ok {
			return
		}
		if d := lim.ResetsAt.Sub(limitNow); d < MinLimitPause || d > MaxLimitPause {
			t.Fatalf("reset %s is %s from now, outside [%s, %s]", lim.ResetsAt, d, MinLimitPause, MaxLimitPause)
		}
		if lim.Reason == "" {
			t.Fatal("a limit without a reason")
		}
	})
}

func TestClaudeArgs_MaxBudgetBeforeConfiguredArgs(t *testing.T) {
	b := 0.25
	got := ClaudeArgs(ClaudeRun{Command: "claude", SessionID: "u-1", MaxBudgetUSD: &b, Extra: []string{"--permission-mode", "acceptEdits"}})
	want := []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--session-id", "u-1", "--max-budget-usd", "0.25", "--permission-mode", "acceptEdits",
		"--setting-sources", "", "--settings", `{"disableAllHooks":true}`}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// The engines print a reset to the minute without its seconds; Kingdom
// waits for the end of that minute, and a named minute that has just
// passed (a re-run that raced the reset) is the minimum pause, never the
// same time tomorrow or next year.
func TestLimitWatch_MinutePrecisionResetIsTheEndOfTheMinute(t *testing.T) {
	local := func(d, h, m, s int) time.Time { return time.Date(2026, 4, d, h, m, s, 0, time.Local) }
	utc := func(y, mo, d, h, m, s int) time.Time { return time.Date(y, time.Month(mo), d, h, m, s, 0, time.UTC) }
	codex := func(at string) string {
		return `{"type":"turn.failed","error":{"message":"You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at ` + at + `."}}`
	}
	claude := func(text string) string {
		return `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"` + text + `"}`
	}
	cases := []struct {
		name   string
		engine string
		line   string
		now    time.Time
		want   time.Time
	}{
		{"codex, a minute before", "codex", codex("8:22 AM"), local(28, 8, 21, 10), local(28, 8, 23, 0)},
		{"codex, at the named minute's start", "codex", codex("8:22 AM"), local(28, 8, 22, 0), local(28, 8, 23, 0)},
		{"codex, mid-minute (the reset may be 08:22:59)", "codex", codex("8:22 AM"), local(28, 8, 22, 30), local(28, 8, 23, 0)},
		{"codex, the minute's end is closer than the minimum pause", "codex", codex("8:22 AM"), local(28, 8, 22, 50), local(28, 8, 22, 50).Add(MinLimitPause)},
		{"codex, re-run just after the minute: not tomorrow", "codex", codex("8:22 AM"), local(28, 8, 23, 0), local(28, 8, 23, 0).Add(MinLimitPause)},
		{"codex, re-run 4 minutes late: not tomorrow", "codex", codex("8:22 AM"), local(28, 8, 27, 30), local(28, 8, 27, 30).Add(MinLimitPause)},
		{"codex, a time long past is tomorrow's", "codex", codex("8:22 AM"), local(28, 8, 29, 0), local(29, 8, 23, 0)},
		{"codex, yesterday's 11:59 PM just after midnight", "codex", codex("11:59 PM"), local(29, 0, 2, 0), local(29, 0, 2, 0).Add(MinLimitPause)},
		{"codex, 11:59 PM ends at midnight", "codex", codex("11:59 PM"), local(28, 23, 58, 0), local(29, 0, 0, 0)},
		{"codex dated, mid-minute", "codex", codex("Apr 28th, 2026 8:22 AM"), local(28, 8, 22, 30), local(28, 8, 23, 0)},
		{"codex dated, just past", "codex", codex("Apr 28th, 2026 8:22 AM"), local(28, 8, 24, 0), local(28, 8, 24, 0).Add(MinLimitPause)},
		{"claude text, mid-minute", "claude", claude("You've hit your limit · resets 7:46am (UTC)"), utc(2026, 4, 28, 7, 46, 20), utc(2026, 4, 28, 7, 47, 0)},
		{"claude text, just past: not tomorrow", "claude", claude("You've hit your limit · resets 7:46am (UTC)"), utc(2026, 4, 28, 7, 48, 0), utc(2026, 4, 28, 7, 48, 0).Add(MinLimitPause)},
		{"claude text, long past: tomorrow", "claude", claude("You've hit your limit · resets 7:46am (UTC)"), utc(2026, 4, 28, 9, 0, 0), utc(2026, 4, 29, 7, 47, 0)},
		{"claude dated without a year, just past New Year: not next year", "claude", claude("You've hit your limit · resets Dec 31, 11:59pm (UTC)"), utc(2027, 1, 1, 0, 2, 0), utc(2027, 1, 1, 0, 2, 0).Add(MinLimitPause)},
		{"claude dated without a year, ahead", "claude", claude("You've hit your limit · resets Dec 31, 11:59pm (UTC)"), utc(2026, 12, 31, 23, 0, 0), utc(2027, 1, 1, 0, 0, 0)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := NewLimitWatch(c.engine)
			w.Line([]byte(c.line))
			lim, ok := w.Limit(c.now, time.Hour)
			if !ok || !lim.Parsed {
				t.Fatalf("limit %+v ok=%v, want a parsed reset", lim, ok)
			}
			if !lim.ResetsAt.Equal(c.want) {
				t.Fatalf("now %s: resets at %s, want %s", c.now, lim.ResetsAt, c.want)
			}
		})
	}
}

// An exact reset (claude's rate_limit_event) is taken as it is: the end of
// the minute is only for times printed without seconds.
func TestLimitWatch_ExactResetIsNotRounded(t *testing.T) {
	w := NewLimitWatch("claude")
	w.Line([]byte(`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1777400000,"rateLimitType":"five_hour"}}`))
	w.Line([]byte(`{"type":"result","is_error":true,"api_error_status":429,"result":"You've hit your 5-hour limit · resets 6:13pm (UTC)"}`))
	lim, ok := w.Limit(limitNow, time.Hour)
	if want := time.Unix(1777400000, 0); !ok || !lim.ResetsAt.Equal(want) {
		t.Fatalf("resets at %s ok=%v, want the event's %s", lim.ResetsAt, ok, want.UTC())
	}
}

// The reason is quoted inside sentences ("paused until 08:23: <reason>.
// Its tasks wait…"): the engine's own final period is dropped, so no
// message reads "8:22 AM..".
func TestLimitWatch_ReasonHasNoFinalPeriod(t *testing.T) {
	w := NewLimitWatch("codex")
	w.Line([]byte(`{"type":"turn.failed","error":{"message":"You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro) or try again at 8:22 AM."}}`))
	lim, ok := w.Limit(limitNow, time.Hour)
	if !ok || !strings.HasSuffix(lim.Reason, "try again at 8:22 AM") {
		t.Fatalf("reason %q ok=%v, want the engine's sentence without its final period", lim.Reason, ok)
	}
}

// A 429 that names no usage limit is the server's rate limit (SPEC §12.4):
// never a usage limit (which pauses the engine), always RateLimit; a real
// usage limit stays one. The claude lines are the 2.1.328 CLI's own
// against a fake API (x-should-retry: false per-minute limit; with
// x-should-retry: true the CLI's api_retry lines first).
func TestLimitWatch_ServerRateLimitIsNoUsageLimit(t *testing.T) {
	const perMinute = `{"duration_api_ms":0,"stop_reason":"stop_sequence","session_id":"f06d7486-c083-44d7-a986-5a7f07476df9","total_cost_usd":0,"permission_denials":[],"terminal_reason":"api_error","is_error":true,"num_turns":1,"subtype":"success","api_error_status":429,"api_error_type":"rate_limit_error","result":"API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit","type":"result","duration_ms":329}`
	const retried = `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":1017,"error_status":429,"error":"rate_limit","session_id":"s"}`
	cases := []struct {
		name, engine string
		lines        []string
		server       string // substring of the RateLimit reason; "" = no server limit
		usage        bool
	}{
		{"claude per-minute 429, x-should-retry false", "claude", []string{perMinute}, "per-minute rate limit", false},
		{"claude 429 after the CLI's own retries, x-should-retry true", "claude", []string{retried, retried, perMinute}, "Request rejected (429)", false},
		{"claude 429 with no words", "claude", []string{`{"type":"result","is_error":true,"api_error_status":429,"result":""}`}, "API error 429", false},
		{"claude 529 overloaded", "claude", []string{`{"type":"result","is_error":true,"api_error_status":529,"result":"API Error: Repeated 529 Overloaded errors"}`}, "Overloaded", false},
		{"codex high demand", "codex", []string{`{"type":"error","message":"We're currently experiencing high demand, which may cause temporary errors."}`,
			`{"type":"turn.failed","error":{"message":"We're currently experiencing high demand, which may cause temporary errors."}}`}, "high demand", false},
		{"codex TPM rate limit", "codex", []string{`{"type":"turn.failed","error":{"message":"Rate limit reached for gpt-5 in organization org-x on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s."}}`}, "tokens per min", false},
		{"claude usage limit without a reset stays a usage limit", "claude", []string{`{"type":"result","is_error":true,"api_error_status":429,"result":"API Error: Request rejected (429) · The usage limit has been reached"}`}, "", true},
		{"claude hit your limit", "claude", []string{`{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: Request rejected (429) · You've hit your limit · resets 8pm (Europe/Berlin)"}`}, "", true},
		{"claude subscription window rejected", "claude", []string{`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1777400000,"rateLimitType":"five_hour"}}`, retried,
			`{"type":"result","is_error":true,"api_error_status":429,"result":"API Error: Request rejected (429)"}`}, "", true},
		{"codex usage_limit_reached", "codex", []string{`{"type":"usage_limit_reached","resets_at":1777400000}`}, "", true},
		{"claude success", "claude", []string{`{"type":"result","is_error":false,"result":"rate limit reached for the demo"}`}, "", false},
		{"codex agent text", "codex", []string{`{"type":"item.completed","item":{"type":"agent_message","text":"high demand: 429 Too Many Requests"}}`}, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := NewParser(c.engine)
			for _, l := range c.lines {
				p.Line([]byte(l))
			}
			w := NewLimitWatch(c.engine)
			for _, s := range p.Outcome().Signals {
				w.Line(s.Raw)
			}
			_, usage := w.Limit(limitNow, time.Hour)
			why, server := w.RateLimit()
			if usage != c.usage {
				t.Fatalf("usage limit %v, want %v", usage, c.usage)
			}
			if server != (c.server != "") || !strings.Contains(why, c.server) {
				t.Fatalf("server rate limit %v %q, want %q", server, why, c.server)
			}
		})
	}
}
