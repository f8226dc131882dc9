package envoy

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkDeliver measures one outbound message end to end: list pending,
// validate, post (fake Slack over HTTP, or the console), record the
// delivery and mapping, rewrite and move the file to sent/, emit.
func BenchmarkDeliver(b *testing.B) {
	for _, mode := range []struct {
		name    string
		console bool
	}{{"slack", false}, {"console", true}} {
		b.Run(mode.name, func(b *testing.B) {
			h := newHarness(b, setup{console: mode.console})
			i := 0
			for b.Loop() {
				i++
				h.put(message(fmt.Sprintf("msg-20261121-%06d", i), "thread_start", fmt.Sprintf("task-20261121-%06d", i%50)))
				h.tick()
			}
			if s := h.msgState(fmt.Sprintf("msg-20261121-%06d", i)); s != "sent" {
				b.Fatalf("last message in %q", s)
			}
		})
	}
}

// BenchmarkInbound measures admitting one DM as an event (state lookup,
// dedupe, put-once, seen marker, event log).
func BenchmarkInbound(b *testing.B) {
	h := newHarness(b, setup{console: true})
	i := 0
	for b.Loop() {
		i++
		ts := fmt.Sprintf("1700000000.%06d", i)
		if _, err := h.e.handleInbound(context.Background(), Inbound{EventID: "Ev" + ts, Kind: "message", Channel: "D1", ChannelType: "im",
			User: "UALICE", Text: "hello", TS: ts}); err != nil {
			b.Fatal(err)
		}
	}
}
