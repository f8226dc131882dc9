package soldier

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/modelfake"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/spawn"
)

// benchTasks is how many tasks each engine runs per benchmark op: the
// p50/p99 are over these.
const benchTasks = 50

// BenchmarkRun_EngineOverhead: one task attempt, spawn → published raw
// result, for the real claude CLI answering from the instant fake model
// (one StructuredOutput turn), next to the command engine (a shell writing
// the result file) and a bare fork+exec of /bin/true (the machine's floor).
// Reported per engine: p50 and p99 over 50 tasks, and the peak RSS of a
// claude process (the largest child, getrusage RUSAGE_CHILDREN).
func BenchmarkRun_EngineOverhead(b *testing.B) {
	cli := modelfake.FindCLI(b, "claude")
	fake := modelfake.New()
	defer fake.Close()
	fake.Fallback(modelfake.Always(modelfake.Tool("StructuredOutput", map[string]any{"status": "success", "summary": "ok"})))
	home := b.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	claudeSys := config.DefaultSystem()
	claudeSys.Runtime.Claude.Command = cli
	for k, v := range fake.ClaudeEnv() {
		env = append(env, k+"="+v)
		claudeSys.Runtime.EnvPassthrough = append(claudeSys.Runtime.EnvPassthrough, k)
	}
	cmdSys := config.DefaultSystem()
	cmdSys.Runtime.Engine = config.EngineCommand
	// A constant script: the task's values arrive as argv words.
	cmdSys.Runtime.Command.Argv = []string{"/bin/sh", "-c", `printf '{"task_id":"%s","status":"success","summary":"ok"}' "$2" > "$1"`, "sh", "{result_path}", "{task_id}"}

	run := func(sys *config.System, eng string, n int) []time.Duration {
		base, work := b.TempDir(), b.TempDir()
		layout.New(base).Ensure()
		prompt := filepath.Join(base, "p.md")
		os.WriteFile(prompt, []byte("review the change"), 0o600)
		var ds []time.Duration
		for i := 0; i < n; i++ {
			task := fmt.Sprintf("task-20260101-%03d", i+1)
			t0 := time.Now()
			out, err := Run(context.Background(), RunOptions{Params: spawn.Params{BaseDir: base, TaskID: task, General: "gen-b",
				PromptFile: prompt, Workdir: work, SoldierID: fmt.Sprintf("soldier-1-%d", i), Engine: eng}, System: sys, Environ: env})
			ds = append(ds, time.Since(t0))
			if err != nil || out.Raw["status"] != "success" {
				b.Fatalf("%s task %d: %v %v", eng, i, err, out.Raw)
			}
		}
		return ds
	}
	floor := func(n int) []time.Duration {
		var ds []time.Duration
		for i := 0; i < n; i++ {
			t0 := time.Now()
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(t0))
		}
		return ds
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f := floor(benchTasks)
		c := run(cmdSys, config.EngineCommand, benchTasks)
		cl := run(claudeSys, config.EngineClaude, benchTasks)
		b.ReportMetric(ms(pct(f, 50)), "exec-p50-ms")
		b.ReportMetric(ms(pct(c, 50)), "command-p50-ms")
		b.ReportMetric(ms(pct(c, 99)), "command-p99-ms")
		b.ReportMetric(ms(pct(cl, 50)), "claude-p50-ms")
		b.ReportMetric(ms(pct(cl, 99)), "claude-p99-ms")
	}
	b.StopTimer()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "claude-peak-rss-MB")
	}
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "runner-rss-MB")
	}
}

func pct(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
