package envoy

import (
	"fmt"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/proctree"
)

// BenchmarkDeliverBacklog: n messages wait in messages/pending and one tick
// delivers them all (console mode), on an envoy that has run before (one
// warm-up round). Reports the CPU per message of the tick (every thread of
// the process): it must not grow with n.
func BenchmarkDeliverBacklog(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			h := newHarness(b, setup{console: true})
			round := 0
			fill := func() {
				for i := range n {
					id := round*n + i
					h.put(message(fmt.Sprintf("msg-20261121-%06d", id), "thread_start", fmt.Sprintf("task-20261121-%06d", id)))
				}
				round++
			}
			fill()
			h.tick() // warm-up
			var cpu time.Duration
			msgs := 0
			for b.Loop() {
				b.StopTimer()
				fill()
				b.StartTimer()
				c := proctree.SelfCPU()
				h.tick()
				cpu += proctree.SelfCPU() - c
				msgs += n
				b.StopTimer()
				if s := h.msgState(fmt.Sprintf("msg-20261121-%06d", round*n-1)); s != "sent" {
					b.Fatalf("last message in %q", s)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(msgs), "cpu-ms/msg")
		})
	}
}
