package engine

import (
	"testing"
	"time"
)

// The contract the usage-limit classifier plugs into: an Outcome's Signals
// carry whole lines that LimitWatch reads as it reads stdout.
func TestOutcomeSignals_FeedTheLimitWatch(t *testing.T) {
	now := time.Date(2026, 11, 24, 20, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		engine string
		lines  []string
	}{
		"claude rejected + 429": {"claude", []string{
			`{"type":"system","subtype":"init","session_id":"s"}`,
			`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1795554000,"rateLimitType":"five_hour"}}`,
			`{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: Request rejected (429) · The usage limit has been reached"}`,
		}},
		"codex turn.failed": {"codex", []string{
			`{"type":"thread.started","thread_id":"01a20f2d-4a8a-7990-ac76-a404c2689399"}`,
			`{"type":"turn.failed","error":{"message":"You've hit your usage limit. Upgrade to Pro or try again in 2 hours."}}`,
		}},
	} {
		t.Run(name, func(t *testing.T) {
			p := NewParser(tc.engine)
			for _, l := range tc.lines {
				p.Line([]byte(l))
			}
			w := NewLimitWatch(tc.engine)
			for _, s := range p.Outcome().Signals {
				w.Line(s.Raw)
			}
			if _, ok := w.Limit(now, time.Hour); !ok {
				t.Fatalf("no limit recognised from signals %+v", p.Outcome().Signals)
			}
		})
	}
}
