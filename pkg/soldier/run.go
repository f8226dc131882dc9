package soldier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

var nowFunc = time.Now

// Environment variables a soldier's engine sees (beside the passthrough).
const (
	EnvTaskID        = "KINGDOM_TASK_ID"
	EnvResultPath    = "KINGDOM_RESULT_PATH"
	EnvHeartbeatPath = "KINGDOM_HEARTBEAT_PATH"
	EnvSoldierID     = "KINGDOM_SOLDIER_ID"
	EnvGeneral       = "KINGDOM_GENERAL"
	EnvWorkdir       = "KINGDOM_WORKDIR"
)

// maxResultBytes bounds a staging result file (SPEC §8: 1 MiB).
const maxResultBytes = 1 << 20

// RunOptions configure Run.
type RunOptions struct {
	Params
	System  *config.System
	Environ []string // the process environment (os.Environ())
}

// Outcome reports what Run published.
type Outcome struct {
	Raw       map[string]any
	ExitCode  int
	SessionID string
}

// ErrInterrupted is returned by Run when the soldier was stopped by a signal
// (its tmux session killed); no raw result is published then.
var ErrInterrupted = errors.New("soldier interrupted by a signal")

// Run executes the engine for one task attempt and publishes
// state/results/<task>-raw.json. It publishes a synthetic failed result
// (EngineMissing, EngineError, InvalidResult) whenever the engine does not
// leave a valid one, so a finished soldier always leaves a raw result. The
// publication is no-replace: a result the general already wrote (Timeout)
// wins.
func Run(ctx context.Context, o RunOptions) (*Outcome, error) {
	if err := o.Check(); err != nil {
		return nil, fmt.Errorf("soldier run: %w", err)
	}
	l := layout.New(o.BaseDir)
	if o.System == nil {
		o.System = config.DefaultSystem()
	}
	if o.Engine == "" {
		o.Engine = o.System.Runtime.Engine
	}
	task := o.TaskID
	if err := atomicfile.WriteFile(l.ResultSoldierID(task), []byte(o.SoldierID+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("record soldier id: %w", err)
	}
	hb := l.ResultHeartbeat(task)
	_ = atomicfile.Touch(hb)

	out := &Outcome{ExitCode: -1}
	staging := l.ResultStaging(task)
	inv, err := engine.Build(engine.Spec{
		Engine: o.Engine, System: o.System, Resume: o.Resume,
		PromptFile: o.PromptFile, Workdir: o.Workdir, TaskID: task, ResultPath: staging,
	})
	if err != nil {
		reason := schema.ReasonEngineError
		if errors.Is(err, engine.ErrMissing) {
			reason = schema.ReasonEngineMissing
		}
		out.Raw = failed(task, reason, err.Error())
		return out, publish(l, task, out.Raw)
	}

	parser := engine.NewParser(inv.Engine)
	code, runErr := execute(ctx, l, o, inv, parser, hb)
	if errors.Is(runErr, ErrInterrupted) {
		// Killed from outside (the general's timeout, a dead-general
		// cleanup, an operator): whoever killed the soldier writes its
		// result; publishing EngineError here would race a Timeout.
		return out, runErr
	}
	out.ExitCode = code
	out.SessionID = parser.SessionID()
	if out.SessionID != "" {
		_ = atomicfile.WriteFile(l.ResultSessionID(task), []byte(out.SessionID+"\n"), 0o600)
	}

	raw, stageErr := readStaging(staging, task)
	switch {
	case raw != nil:
		if _, ok := raw["session_id"]; !ok && out.SessionID != "" {
			raw["session_id"] = out.SessionID
		}
		if u := parser.Usage(); u != nil {
			m, _ := raw["metrics"].(map[string]any)
			if m == nil {
				m = map[string]any{}
			}
			if _, ok := m["usage"]; !ok {
				m["usage"] = u
			}
			raw["metrics"] = m
		}
		out.Raw = raw
	case stageErr != nil && !errors.Is(stageErr, fs.ErrNotExist):
		out.Raw = failed(task, schema.ReasonInvalidResult, "agent result "+staging+": "+stageErr.Error())
	default:
		msg := fmt.Sprintf("engine %s exited with code %d without writing a result", inv.Engine, code)
		if runErr != nil {
			msg = fmt.Sprintf("engine %s: %v (no result written)", inv.Engine, runErr)
		}
		if parser.IsError() && parser.FinalText() != "" {
			msg += ": " + truncate(parser.FinalText(), 500)
		}
		out.Raw = failed(task, schema.ReasonEngineError, msg)
		out.Raw["exit_code"] = code
	}
	if out.SessionID != "" {
		if _, ok := out.Raw["session_id"]; !ok {
			out.Raw["session_id"] = out.SessionID
		}
	}
	return out, publish(l, task, out.Raw)
}

func failed(task, reason, msg string) map[string]any {
	return map[string]any{
		"task_id": task, "status": schema.ResultFailed, "summary": msg,
		"error": msg, "error_reason": reason,
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// readStaging reads and validates the agent's result file. A file that is
// not a valid raw result for this task is an error.
func readStaging(path, task string) (map[string]any, error) {
	b, err := queue.ReadLimited(path, maxResultBytes)
	if err != nil {
		return nil, err
	}
	r, err := schema.DecodeRawResult(b)
	if err != nil {
		return nil, err
	}
	if r.TaskID != task {
		return nil, fmt.Errorf("task_id %q does not match %s", r.TaskID, task)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if r.Status == schema.ResultFailed || r.Status == schema.ResultKilled {
		if _, ok := m["error_reason"]; !ok {
			if r.Status == schema.ResultKilled {
				m["error_reason"] = schema.ReasonSoldierDied
			} else {
				m["error_reason"] = schema.ReasonAgentFailed
			}
		}
	}
	return m, nil
}

// publish writes the raw result with no-replace (§9.5).
func publish(l layout.Layout, task string, raw map[string]any) error {
	b, err := json.MarshalIndent(redactRaw(raw), "", "  ")
	if err != nil {
		return fmt.Errorf("encode raw result %s: %w", task, err)
	}
	if err := atomicfile.CreateNoReplace(l.ResultRaw(task), append(b, '\n'), 0o600); err != nil {
		if errors.Is(err, atomicfile.ErrExists) {
			removeStaging(l.ResultStaging(task))
			return nil // the general already decided (Timeout, SoldierDied)
		}
		return fmt.Errorf("publish raw result %s: %w", task, err)
	}
	removeStaging(l.ResultStaging(task))
	return nil
}

// execute runs the engine: stdin = prompt (claude/codex), stdout to
// logs/sessions/<soldier>.json, stderr to .err; every output line touches
// the heartbeat and stdout lines feed the parser. It returns the exit code.
func execute(ctx context.Context, l layout.Layout, o RunOptions, inv *engine.Invocation, p engine.Parser, hb string) (int, error) {
	return executeTo(ctx, l, o, inv, p, hb, true)
}

func executeTo(ctx context.Context, l layout.Layout, o RunOptions, inv *engine.Invocation, p engine.Parser, hb string, logs bool) (int, error) {
	var stdoutLog, stderrLog io.Writer = io.Discard, io.Discard
	if logs {
		if err := layout.EnsureDir(l.SessionLogsDir()); err != nil {
			return -1, err
		}
		f, err := os.OpenFile(l.SessionLog(o.SoldierID), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return -1, err
		}
		defer f.Close()
		w, flush := redactedLog(f)
		defer flush()
		stdoutLog = w
		g, err := os.OpenFile(l.SessionErr(o.SoldierID), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return -1, err
		}
		defer g.Close()
		w2, flush2 := redactedLog(g)
		defer flush2()
		stderrLog = w2
	}

	cmd := exec.CommandContext(ctx, inv.Path, inv.Args[1:]...)
	cmd.Args[0] = inv.Args[0]
	cmd.Dir = inv.Dir
	cmd.Env = engine.Env(o.Environ, o.System.Runtime.EnvPassthrough, map[string]string{
		layout.EnvBase:   o.BaseDir,
		EnvTaskID:        o.TaskID,
		EnvResultPath:    l.ResultStaging(o.TaskID),
		EnvHeartbeatPath: hb,
		EnvSoldierID:     o.SoldierID,
		EnvGeneral:       o.General,
		EnvWorkdir:       o.Workdir,
	})
	// The engine gets its own process group so the whole tree can be killed
	// at once; Pdeathsig takes it down even if this runner is SIGKILLed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	if inv.StdinPrompt {
		f, err := os.Open(o.PromptFile)
		if err != nil {
			return -1, fmt.Errorf("open prompt: %w", err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	// Output goes through writers, not pipes read by us: when the engine
	// exits but leaves a background child holding stdout (a dev server
	// started by the agent), WaitDelay closes the pipes instead of the
	// soldier hanging until its timeout.
	outW := &lineWriter{log: stdoutLog, hb: hb, parser: p}
	errW := &lineWriter{log: stderrLog, hb: hb}
	cmd.Stdout, cmd.Stderr = outW, errW
	// tmux kill-session sends SIGHUP to the pane's process group, which is
	// ours, not the engine's: catch it (and SIGTERM/SIGINT) and take the
	// engine's group down with us, or a killed soldier's agent would go on
	// working as an orphan.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return -1, err
	}
	var interrupted atomic.Bool
	waited := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			interrupted.Store(true)
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-waited:
		}
	}()
	err := cmd.Wait()
	close(waited)
	// Whatever the engine left running in its group goes with it.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	outW.flush()
	errW.flush()
	code := cmd.ProcessState.ExitCode()
	if interrupted.Load() || ctx.Err() == context.Canceled {
		return code, ErrInterrupted
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) || errors.Is(err, exec.ErrWaitDelay) {
		err = nil // a non-zero exit is reported by its code
	}
	return code, err
}

// lineWriter receives an engine's output: it copies it to the log and, per
// complete line, touches the heartbeat and feeds the parser.
type lineWriter struct {
	log    io.Writer
	hb     string
	parser engine.Parser
	buf    []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	_, _ = w.log.Write(b)
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxLineBytes {
		// A giant line without a newline: still proof of life; the parser
		// only needs whole JSON lines, which are far shorter.
		_ = atomicfile.Touch(w.hb)
		w.buf = w.buf[:0]
	}
	return len(b), nil
}

func (w *lineWriter) line(l []byte) {
	_ = atomicfile.Touch(w.hb)
	if w.parser != nil {
		w.parser.Line(bytes.TrimRight(l, "\r"))
	}
}

func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.line(w.buf)
		w.buf = nil
	}
}

// maxLineBytes bounds the partial line kept in memory.
const maxLineBytes = 16 << 20

// PublishConfigFailure publishes a terminal EngineError raw result for a
// soldier that cannot run because its configuration does not load: running
// the engine with defaults would ignore the operator's engine and
// env_passthrough (SPEC §9.17); retrying would fail the same way.
func PublishConfigFailure(baseDir, task string, cfgErr error) error {
	if err := ids.Check(task); err != nil {
		return fmt.Errorf("task: %w", err)
	}
	raw := failed(task, schema.ReasonEngineError, "configuration: "+cfgErr.Error())
	raw["terminal"] = true
	return publish(layout.New(baseDir), task, raw)
}
