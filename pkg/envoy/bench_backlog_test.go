package envoy

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDeliverBacklog (issue #17's scaling series): n messages wait in
// messages/pending and one tick delivers them all (console mode). Reports
// the CPU per message: it must not grow with n.
func BenchmarkDeliverBacklog(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var cpu time.Duration
			msgs := 0
			round := 0
			for b.Loop() {
				b.StopTimer()
				h := newHarness(b, setup{console: true})
				for i := range n {
					h.put(message(fmt.Sprintf("msg-20261121-%06d", round*n+i), "thread_start", fmt.Sprintf("task-20261121-%06d", round*n+i)))
				}
				round++
				b.StartTimer()
				c := cpuNow()
				h.tick()
				cpu += cpuNow() - c
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
