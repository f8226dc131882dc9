package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// TestPipelineBench measures the whole kingdom with an instant soldier (run
// by `make bench`, gated by KINGDOM_BENCH): latency from an event file
// landing in queue/events/pending/ to its task file, and to its completion
// message in messages/sent/; then idle CPU seconds and RSS of every daemon
// over 60 s. It writes a markdown section to $KINGDOM_BENCH_OUT.
func TestPipelineBench(t *testing.T) {
	if os.Getenv("KINGDOM_BENCH") == "" {
		t.Skip("pipeline benchmark: set KINGDOM_BENCH=1 (make bench does)")
	}
	const n = 100
	k := chaosKingdom(t, 5)
	k.Start()
	roles := []string{"sentinel", "king", "envoy", "chamberlain", "gen-a", "gen-b", "gen-c"}
	k.WaitRoles(roles...)
	time.Sleep(3 * time.Second) // let start-up work settle before timing

	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Add(k.L.QueueState(layout.QTasks, layout.Pending))
	w.Add(k.L.QueueState(layout.QMessages, layout.Sent))
	var mu sync.Mutex
	taskSeen := map[string]time.Time{} // task id → first seen
	sentSeen := map[string]time.Time{} // message id → first seen
	go func() {
		for ev := range w.Events {
			if !ev.Has(fsnotify.Create) || strings.HasPrefix(filepath.Base(ev.Name), ".") {
				continue
			}
			now := time.Now()
			name := strings.TrimSuffix(filepath.Base(ev.Name), ".json")
			mu.Lock()
			if strings.Contains(ev.Name, "/tasks/") {
				if _, ok := taskSeen[name]; !ok {
					taskSeen[name] = now
				}
			} else if _, ok := sentSeen[name]; !ok {
				sentSeen[name] = now
			}
			mu.Unlock()
		}
	}()

	landed := map[string]time.Time{}
	pending := k.L.QueueState(layout.QEvents, layout.Pending)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("evt-bench-%03d", i)
		ev := map[string]any{"id": id, "type": "chaos." + []string{"a", "b", "c"}[i%3], "source": "inbox", "repo": nil,
			"payload": map[string]any{"n": i}, "priority": "normal", "created_at": time.Now().UTC().Format(time.RFC3339), "status": "pending"}
		b, _ := json.Marshal(ev)
		tmp := filepath.Join(k.L.Base, "."+id)
		os.WriteFile(tmp, b, 0o600)
		landed[id] = time.Now()
		if err := os.Rename(tmp, filepath.Join(pending, id+".json")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond) // one event at a time: latency, not throughput
	}
	k.Eventually("all bench events completed", 5*time.Minute, func() bool {
		return k.Events.Count(layout.Completed) == n && k.Msgs.Count(layout.Pending) == 0
	})
	time.Sleep(500 * time.Millisecond)

	var toTask, toSent []time.Duration
	mu.Lock()
	for _, st := range layout.QueueStates[layout.QTasks] {
		for _, tk := range k.TaskList(st) {
			l, ok := landed[tk.EventID]
			if !ok {
				continue
			}
			if at, ok := taskSeen[tk.ID]; ok {
				toTask = append(toTask, at.Sub(l))
			}
			if at, ok := sentSeen["msg-"+tk.ID+"-done"]; ok {
				toSent = append(toSent, at.Sub(l))
			}
		}
	}
	mu.Unlock()
	if len(toTask) < n*9/10 || len(toSent) < n*9/10 {
		t.Fatalf("measured %d task and %d completion latencies of %d", len(toTask), len(toSent), n)
	}

	// Idle: no events for 60 s; CPU seconds and RSS of every daemon.
	pids := rolePIDs(t, k)
	pids["start"] = k.start.Process.Pid
	before := map[string]float64{}
	for name, pid := range pids {
		before[name] = cpuSeconds(pid)
	}
	idle := 60 * time.Second
	time.Sleep(idle)
	type row struct {
		name     string
		cpu, rss float64
	}
	var rows []row
	for name, pid := range pids {
		rows = append(rows, row{name, cpuSeconds(pid) - before[name], rssMiB(pid)})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })

	var b strings.Builder
	fmt.Fprintf(&b, "### Pipeline (real binaries, instant soldier, %d events one at a time)\n\n", n)
	fmt.Fprintf(&b, "| path | p50 | p99 | max |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| event lands in `pending/` → task file | %s | %s | %s |\n", pct(toTask, 50), pct(toTask, 99), pct(toTask, 100))
	fmt.Fprintf(&b, "| event lands in `pending/` → completion message in `sent/` | %s | %s | %s |\n\n", pct(toSent, 50), pct(toSent, 99), pct(toSent, 100))
	fmt.Fprintf(&b, "### Idle daemons over %v\n\n", idle)
	fmt.Fprintf(&b, "This kingdom runs the test watchdog interval of 1 s (start lists tmux sessions every second);\n"+
		"the default is 60 s, so start's figure is an upper bound. Every role ticks at least every 10 s.\n\n")
	fmt.Fprintf(&b, "| process | CPU seconds | RSS MiB |\n|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %.2f | %.1f |\n", r.name, r.cpu, r.rss)
	}
	t.Log("\n" + b.String())
	if out := os.Getenv("KINGDOM_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func pct(ds []time.Duration, p int) string {
	if len(ds) == 0 {
		return "-"
	}
	return pctD(ds, p).Round(100 * time.Microsecond).String()
}

// procStat returns the fields of /proc/<pid>/stat after the command name
// (state, ppid, …; utime is [11]), or nil.
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 15 {
		return nil
	}
	return f
}

// cpuSeconds reads utime+stime of a process (clock ticks of 1/100 s).
func cpuSeconds(pid int) float64 { return statSeconds(pid, 11, 12) }

// statSeconds sums the /proc/<pid>/stat tick fields at idx, in seconds.
func statSeconds(pid int, idx ...int) float64 {
	f := procStat(pid)
	var sum float64
	for _, i := range idx {
		if f != nil {
			v, _ := strconv.ParseFloat(f[i], 64)
			sum += v
		}
	}
	return sum / 100
}

func rssMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return kb / 1024
		}
	}
	return 0
}
