package envoy

import (
	"context"
	"fmt"
	"testing"
)

// FuzzHandleInbound feeds arbitrary Slack message fields to the inbound
// path: it must never panic, and whatever it queues must be a valid event
// under a safe file name (events() decodes each against its schema).
func FuzzHandleInbound(f *testing.F) {
	f.Add("im", "message", "1700000000.000100", "", "hello", "D1")
	f.Add("channel", "app_mention", "1700000000.000100", "1700000000.000001", "<@UBOT> hi", "C1")
	f.Add("im", "message", "../../etc", "", "x", "D1")
	f.Add("im", "message", "1.2", "1.2", "", "")
	h := newHarness(f, setup{console: true})
	n := 0
	f.Fuzz(func(t *testing.T, chType, kind, ts, threadTS, text, channel string) {
		h.t = t
		n++
		before := len(h.events())
		if _, err := h.e.handleInbound(context.Background(), Inbound{EventID: fmt.Sprint("Ev", n), Kind: kind, Channel: channel, ChannelType: chType,
			User: "UALICE", Text: text, TS: ts, ThreadTS: threadTS}); err != nil {
			return
		}
		if after := len(h.events()); after > before+1 {
			t.Fatalf("%d events from one message", after-before)
		}
	})
}
