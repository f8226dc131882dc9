package tmux_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// BenchmarkStart compares a soldier's new-session as a tmux process of its
// own with the same command sent through the control client: CPU of this
// process and its reaped children (the tmux client processes) and of the
// tmux server, per Start.
func BenchmarkStart(b *testing.B) {
	for _, mode := range []string{"process", "control"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			c := &tmux.Client{Bin: "tmux", Socket: fmt.Sprintf("kingdom-bench-%d-%d", os.Getpid(), time.Now().UnixNano())}
			defer c.KillServer(ctx)
			if err := c.NewSession(ctx, "keep", tmux.NewOptions{}, "sleep", "600"); err != nil {
				b.Fatal(err)
			}
			server := 0
			if ss, err := c.List(ctx); err == nil {
				server = ppid(ss[0].PID)
			}
			if mode == "control" {
				tmux.UseControlAt(c, "=keep:", "no-output,ignore-size")
				defer c.Close()
				c.Has(ctx, "keep") // connect outside the timing
			}
			env := map[string]string{"KINGDOM_BASE_DIR": "/tmp/x", "KINGDOM_TMUX_SOCKET": c.Socket}
			dir := b.TempDir()
			self0, srv0 := ownCPU(), procCPU(server)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Start(ctx, fmt.Sprintf("s-%d", i), tmux.NewOptions{Dir: dir, Env: env}, "sleep", "0"); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			self, srv := ownCPU()-self0, procCPU(server)-srv0
			b.ReportMetric(float64(self.Microseconds())/1000/float64(b.N), "client-CPU-ms/op")
			b.ReportMetric(float64(srv.Microseconds())/1000/float64(b.N), "server-CPU-ms/op")
		})
	}
}

func ownCPU() time.Duration {
	var s, c syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &s)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &c)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(s.Utime) + tv(s.Stime) + tv(c.Utime) + tv(c.Stime)
}

// procCPU is utime+stime+cutime+cstime of pid (the server reaps its panes'
// processes and utempter).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	var t int64
	for _, i := range []int{11, 12, 13, 14} {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		t += n
	}
	return time.Duration(t) * time.Second / 100
}

func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	n, _ := strconv.Atoi(f[1])
	return n
}
