package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/sessions"
	"github.com/kingdom-dev/kingdom/pkg/tmux"
)

// startChamberlain builds and runs the real chamberlain daemon on base with
// the dashboard on a free loopback port (its own private tmux socket), and
// returns its process and the dashboard URL. The caller stops it.
func startChamberlain(b *testing.B, l layout.Layout) (*exec.Cmd, string) {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "chamberlain")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/chamberlain")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build chamberlain: %v\n%s", err, out)
	}
	os.WriteFile(l.ConfigFile("chamberlain.yaml"), []byte("http:\n  listen: 127.0.0.1:0\n  max_clients: 100\n  max_connections: 128\n"), 0o600)
	cmd := exec.Command(bin, "--base-dir", l.Base)
	cmd.Env = append(os.Environ(), tmux.EnvSocket+"="+fmt.Sprintf("kingdom-bench-ch-%d", os.Getpid()))
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, _ := os.ReadFile(l.SystemLog())
		if i := strings.Index(string(data), "dashboard on http://"); i >= 0 {
			rest := string(data[i+len("dashboard on "):])
			return cmd, strings.TrimSuffix(strings.Fields(rest)[0], "/")
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			b.Fatalf("the chamberlain never served the dashboard:\n%s", data)
		}
		time.Sleep(50 * time.Millisecond) // waiting for another process to start
	}
}

// cpuSeconds is a process's user+system CPU time from /proc.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkDashboard_SSEFanout50 — SPEC §10.16's figure: 50 clients follow
// /api/v1/events of the real chamberlain daemon while events are appended
// at 1,000/s for 10 s through the real emitter. Reported: delivery latency
// (append → client read) p50/p99, the chamberlain process's CPU (ticks and
// all), and beside them the machine's limits measured
// in the same run: the emitter's fastest append rate and the inotify wake
// latency (write → fsnotify event), the floor under any delivery latency.
func BenchmarkDashboard_SSEFanout50(b *testing.B) {
	const clients, rate, dur = 50, 1000, 10 * time.Second
	for i := 0; i < b.N; i++ {
		l := newBase(b)
		em := emitter(l, "bench")
		em.Emit("system.startup", nil)

		srv, base := startChamberlain(b, l)
		url := base + "/api/v1/events"

		var mu sync.Mutex
		var lat []time.Duration
		counts := make([]int, clients)
		var ready, done sync.WaitGroup
		ctx, cancel := context.WithCancel(context.Background())
		for c := 0; c < clients; c++ {
			ready.Add(1)
			done.Add(1)
			go func(c int) {
				defer done.Done()
				req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					ready.Done()
					return
				}
				defer resp.Body.Close()
				br := bufio.NewReaderSize(resp.Body, 64<<10)
				br.ReadString('\n') // retry:
				br.ReadString('\n') // ": kingdom events from …": connected
				ready.Done()
				local := make([]time.Duration, 0, rate*int(dur/time.Second))
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						break
					}
					data, ok := strings.CutPrefix(line, "data: ")
					if !ok {
						continue
					}
					now := time.Now().UnixNano()
					var ev struct {
						Data struct {
							Sent int64 `json:"sent"`
						} `json:"data"`
					}
					if json.Unmarshal([]byte(data), &ev) == nil && ev.Data.Sent > 0 {
						local = append(local, time.Duration(now-ev.Data.Sent))
					}
				}
				mu.Lock()
				lat = append(lat, local...)
				counts[c] = len(local)
				mu.Unlock()
			}(c)
		}
		ready.Wait()

		cpu0, t0 := cpuSeconds(srv.Process.Pid), time.Now()
		n := rate * int(dur/time.Second)
		for k := 0; k < n; k++ {
			if d := time.Until(t0.Add(time.Duration(k) * time.Second / rate)); d > 0 {
				time.Sleep(d) // pacing the append rate is the point of this benchmark
			}
			em.Emit("task.progress", map[string]int64{"k": int64(k), "sent": time.Now().UnixNano()})
		}
		appendWall := time.Since(t0)
		time.Sleep(500 * time.Millisecond) // let the last events reach every client
		cpu1, t1 := cpuSeconds(srv.Process.Pid), time.Now()
		cancel()
		done.Wait()
		srv.Process.Signal(syscall.SIGTERM)
		srv.Wait()
		em.Close()

		delivered := 0
		for _, c := range counts {
			delivered += c
		}
		if delivered != clients*n {
			b.Errorf("delivered %d events, want %d (50 × %d)", delivered, clients*n, n)
		}
		b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
		b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
		b.ReportMetric((cpu1-cpu0)/t1.Sub(t0).Seconds()*100, "chamberlain-cpu-%")
		b.ReportMetric(float64(n)/appendWall.Seconds(), "appended/s")
		b.ReportMetric(float64(delivered), "delivered")
		b.ReportMetric(appendLimit(b, l), "limit-append/s")
		b.ReportMetric(ms(inotifyFloor(b, l)), "limit-inotify-p50-ms")
	}
}

// appendLimit is how many events per second the real emitter can append
// flat out on this machine (1 s).
func appendLimit(b *testing.B, l layout.Layout) float64 {
	em := emitter(l, "limit")
	defer em.Close()
	t0 := time.Now()
	k := 0
	for time.Since(t0) < time.Second {
		em.Emit("limit.probe", map[string]int{"k": k})
		k++
	}
	return float64(k) / time.Since(t0).Seconds()
}

// inotifyFloor is the median time from an append to its fsnotify event.
func inotifyFloor(b *testing.B, l layout.Layout) time.Duration {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return 0
	}
	defer w.Close()
	dir := b.TempDir()
	w.Add(dir)
	p := filepath.Join(dir, "probe.log")
	var d []time.Duration
	for k := 0; k < 200; k++ {
		t := time.Now()
		f, _ := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		f.WriteString("x\n")
		f.Close()
		for ev := range w.Events {
			if ev.Op&fsnotify.Write != 0 {
				break
			}
		}
		d = append(d, time.Since(t))
		// Drain the rest of this write's events (chmod, close).
		for drained := false; !drained; {
			select {
			case <-w.Events:
			case <-time.After(2 * time.Millisecond): // nothing more for this write
				drained = true
			}
		}
	}
	return percentile(d, 0.5)
}

// BenchmarkDashboard_State1000Tasks — /api/v1/state over HTTP with 1,000
// finished tasks (task file + final result each) and 3 running soldiers on
// disk, with a real tmux server on a private socket behind the role rows.
func BenchmarkDashboard_State1000Tasks(b *testing.B) {
	l := newBase(b)
	for k := 0; k < 1000; k++ {
		id := fmt.Sprintf("task-20261124-%03d", k)
		atomicfile.WriteJSON(filepath.Join(l.QueueState(layout.QTasks, layout.Completed), id+".json"), map[string]any{
			"id": id, "event_id": "evt-" + id, "target_general": "gen-pr", "type": "github.pr.review_requested",
			"payload": map[string]any{"subject_title": "PR number " + strconv.Itoa(k)}, "status": "completed"})
		atomicfile.WriteJSON(l.ResultFinal(id), map[string]any{"task_id": id, "status": "success", "summary": "reviewed",
			"general": "gen-pr", "duration_seconds": 12.5, "completed_at": "2026-11-24T10:00:00Z", "retry_count": 0, "cost_usd": 0.12})
	}
	for k := 0; k < 3; k++ {
		sessions.New(l).Add(sessions.Entry{ID: fmt.Sprintf("soldier-1-%d", k), TaskID: fmt.Sprintf("task-20261124-%03d", 1000+k), General: "gen-pr", StartedAt: time.Now()})
	}
	tc := &tmux.Client{Socket: fmt.Sprintf("kingdom-bench-dash-%d", os.Getpid())}
	ctx := context.Background()
	if err := tc.NewSession(ctx, "king", tmux.NewOptions{}, "sleep", "600"); err != nil {
		b.Fatalf("tmux: %v", err)
	}
	defer tc.KillServer(ctx)
	_, url := startServer(b, Options{Layout: l, Tmux: tc})
	var d []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		resp, err := http.Get(url + "/api/v1/state")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d = append(d, time.Since(t))
	}
	b.StopTimer()
	b.ReportMetric(ms(percentile(d, 0.5)), "p50-ms")
	b.ReportMetric(ms(percentile(d, 0.99)), "p99-ms")
	// The floor beside it: one `tmux list-sessions` (a process per request).
	var tl []time.Duration
	for k := 0; k < 50; k++ {
		t := time.Now()
		tc.List(ctx)
		tl = append(tl, time.Since(t))
	}
	b.ReportMetric(ms(percentile(tl, 0.5)), "limit-tmux-list-p50-ms")
}
