package soldier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/logging"
	"github.com/kingdom-dev/kingdom/pkg/proctree"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/spawn"
)

// Environment variables a soldier's engine sees (beside the passthrough;
// GH_TOKEN only when the manifest lends a read token).
const (
	EnvTaskID        = layout.EnvTaskID
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
	spawn.Params
	System  *config.System
	Environ []string // the process environment (os.Environ())
	// Log receives what the soldier itself has to say (a publication it
	// retries, a forged raw result); nil: slog.Default().
	Log *slog.Logger
	// RateLimitBackoff is the wait before each re-run after a server rate
	// limit; nil: DefaultRateLimitBackoff.
	RateLimitBackoff []time.Duration
}

// Outcome reports what Run published.
type Outcome struct {
	Raw       map[string]any
	ExitCode  int
	SessionID string
	// Engine is what the engine's output said (nil when it never ran).
	Engine *engine.Outcome
}

// ErrInterrupted is returned by Run when the soldier was stopped by a signal
// (its tmux session killed); no raw result is published then.
var ErrInterrupted = errors.New("soldier interrupted by a signal")

// Run executes the engine for one task attempt and publishes
// state/results/<task>-raw.json. The result is the engine's structured
// output, else the agent's staging file (SPEC §10.1: a JSON object for
// this task; the general, which reads it, checks it against the raw-result
// schema, and its "origin" names where it came from); without either it is a
// failed result naming why (NoResult, EngineRefused, SessionLost,
// EngineError; EngineMissing and InvalidResult), with the engine's own
// words (§10.2–10.5). Usage and cost ride along on every attempt (§10.6).
// The publication is no-replace: a result a killer already wrote (the
// general's Timeout, the king's Cancelled) wins, any other found in place
// is the agent's forgery and is replaced; a publication that cannot be
// written (a full disk) is retried until ctx ends (see publisher.publish).
func Run(ctx context.Context, o RunOptions) (*Outcome, error) {
	backoff := o.RateLimitBackoff
	if backoff == nil {
		backoff = DefaultRateLimitBackoff()
	}
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
	// Read by the king (cancel), the general and the chamberlain while we
	// run.
	if err := atomicfile.WriteFile(l.ResultSoldierID(task), []byte(o.SoldierID+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("record soldier id: %w", err)
	}
	hb := l.ResultHeartbeat(task)
	_ = atomicfile.Touch(hb)
	// An earlier attempt's spend must not be taken for this one's.
	_ = os.Remove(l.ResultSpent(task))

	out := &Outcome{ExitCode: -1}
	staging := l.ResultStaging(task)
	pub := newPublisher(l, o)
	agentic := o.Engine == config.EngineClaude || o.Engine == config.EngineCodex
	if o.Resume != "" && agentic {
		lost := ""
		if err := engine.CheckSessionID(o.Engine, o.Resume); err != nil {
			lost = "cannot resume: " + err.Error()
		} else if st, err := os.Stat(o.Workdir); err != nil || !st.IsDir() {
			lost = "cannot resume session " + o.Resume + ": its working directory " + o.Workdir + " is gone"
		}
		if lost != "" {
			out.Raw = failed(task, doc.ReasonSessionLost, lost)
			return out, pub.publish(ctx, out.Raw)
		}
	}
	// The manifest may lend a read token and open codex's network (SPEC
	// §12.3); one that does not load lends and opens nothing.
	m := loadManifest(l, o.General)
	spec := engine.Spec{Engine: o.Engine, System: o.System, Resume: o.Resume,
		PromptFile: o.PromptFile, Workdir: o.Workdir, TaskID: task, ResultPath: staging,
		Network: m != nil && m.EngineNetwork}
	switch o.Engine {
	case config.EngineClaude:
		// Only claude enforces a budget itself (--max-budget-usd); other
		// engines need not read king.yaml for it.
		spec.MaxBudgetUSD = taskBudget(l, m)
		// §10.5: the session id is ours, recorded before the engine starts,
		// so a soldier that dies mid-run still leaves a resumable id.
		out.SessionID = o.Resume
		if out.SessionID == "" {
			out.SessionID = engine.NewSessionID()
			spec.SessionID = out.SessionID
		}
		if err := atomicfile.WriteFile(l.ResultSessionID(task), []byte(out.SessionID+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("record session id: %w", err)
		}
		sch, err := doc.EngineResultSchema(false)
		if err != nil {
			return nil, err
		}
		spec.ResultSchema = sch
	case config.EngineCodex:
		sch, err := doc.EngineResultSchema(true)
		if err != nil {
			return nil, err
		}
		spec.ResultSchema, spec.SchemaFile, spec.LastMessageFile = sch, l.ResultOutputSchema(task), l.ResultLastMessage(task)
		_ = os.Remove(spec.LastMessageFile)
		// Read by the codex we start after this; removed when the run ends.
		if err := atomicfile.WriteFile(spec.SchemaFile, sch, 0o600); err != nil {
			return nil, fmt.Errorf("write output schema: %w", err)
		}
		defer os.Remove(spec.SchemaFile)
		defer os.Remove(spec.LastMessageFile)
	}
	env := engineEnv(l, o, hb, m)
	var (
		inv   *engine.Invocation
		po    *engine.Outcome
		prior *carried // what the runs before a rate limit's re-run spent
	)
	for retry := 0; ; retry++ {
		var err error
		inv, err = engine.Build(spec)
		if err != nil {
			reason, msg := doc.ReasonEngineError, err.Error()
			switch {
			case errors.Is(err, engine.ErrMissing):
				// Build searched this process's PATH: the ❌ names it
				// and the fix.
				f := engine.Missing(o.Engine, err, os.Getenv("PATH"), "system.yaml")
				reason, msg = f.Reason, redactBound(f.Message())
			case errors.Is(err, engine.ErrBadSession):
				reason = doc.ReasonSessionLost
			}
			out.Raw = failed(task, reason, msg)
			return out, pub.publish(ctx, out.Raw)
		}
		parser := prior.wrap(engine.NewParser(inv.Engine))
		code, stderrTail, runErr := executeTo(ctx, l, o, inv, env, parser, hb, true)
		po = parser.Outcome()
		out.Engine = po
		if errors.Is(runErr, ErrInterrupted) {
			// Killed from outside (the general's timeout, a dead-general
			// cleanup, an operator): whoever killed the soldier writes its
			// result; publishing EngineError here would race a Timeout.
			return out, runErr
		}
		out.ExitCode = code
		if po.SessionID != "" {
			out.SessionID = po.SessionID
			// codex's thread id appears only now; claude echoes ours.
			_ = atomicfile.WriteFile(l.ResultSessionID(task), []byte(out.SessionID+"\n"), 0o600)
		}
		ro := o
		ro.Resume = spec.Resume
		out.Raw = resultOf(task, ro, inv, spec, po, code, stderrTail, runErr, staging)
		applyMoney(out.Raw, inv.Engine, po, stderrTail, time.Now(), o.System.UsageLimitFallback())
		why, ok := rateLimited(out.Raw, inv.Engine, po, stderrTail)
		if !ok {
			break
		}
		if retry >= len(backoff) {
			out.Raw["error"] = redactBound(fmt.Sprintf("server rate limit, still after %d re-runs: %s", retry, why))
			out.Raw["summary"] = out.Raw["error"]
			break
		}
		// A server rate limit is weather: wait and run again inside this
		// attempt (its timeout still bounds it), never a pause of the
		// engine, never a retry the king counts (SPEC §12.4).
		wait := backoff[retry]
		pub.log.Warn("server rate limit: running the engine again after a backoff",
			"task", task, "engine", inv.Engine, "backoff", wait.String(), "reason", redactBound(why))
		select {
		case <-ctx.Done():
			return out, ErrInterrupted
		case <-time.After(wait):
		}
		prior = &carried{usage: po.Usage, cost: po.CostUSD}
		spec.Resume, spec.SessionID = resumable(inv.Engine, env, o.Workdir, out.SessionID), ""
		if spec.Resume == "" && inv.Engine == config.EngineClaude {
			out.SessionID = engine.NewSessionID()
			spec.SessionID = out.SessionID
			_ = atomicfile.WriteFile(l.ResultSessionID(task), []byte(out.SessionID+"\n"), 0o600)
		}
		if spec.Resume != "" {
			// The conversation goes on where the limit stopped it.
			cont, err := continuePrompt(l, task)
			if err != nil {
				break
			}
			defer os.Remove(cont)
			spec.PromptFile = cont
		}
	}
	if out.SessionID != "" {
		out.Raw["session_id"] = out.SessionID
	}
	if po.Usage != nil {
		out.Raw["usage"] = po.Usage
	}
	if po.CostUSD != nil {
		out.Raw["cost_usd"] = *po.CostUSD
	} else if c := codexCost(o.System, inv.Engine, po.Usage); c != nil {
		out.Raw["cost_usd"] = *c
	}
	forgetSession(o, inv, env, out)
	return out, pub.publish(ctx, out.Raw)
}

// resultOf picks the attempt's raw result: structured output (a JSON
// object, with the staging file beside it as its fallback) > the staging
// file (a JSON object for this task) > a failure naming why there is none
// (SPEC §10.1–10.5).
func resultOf(task string, o RunOptions, inv *engine.Invocation, spec engine.Spec, po *engine.Outcome,
	code int, stderrTail string, runErr error, staging string) map[string]any {
	structured := po.Structured
	if inv.Engine == config.EngineCodex && spec.LastMessageFile != "" {
		if b, err := atomicfile.ReadLimited(spec.LastMessageFile, maxResultBytes); err == nil {
			var m map[string]any
			if engine.ExtractJSONObject(string(b), &m) {
				structured, _ = json.Marshal(m)
			}
		}
	}
	var structErr error
	raw, stageErr := readStaging(staging, task)
	if inv.Engine == config.EngineClaude && po.Ended && po.IsError {
		// claude's is_error is its failure signal whatever the exit code
		// and subtype (it can end is_error with exit 0): what the agent
		// left before the engine failed is not this attempt's result
		// (SPEC §12.4).
		structured, raw, stageErr = nil, nil, nil
	}
	if len(structured) > 0 {
		sraw, err := fromStructured(task, structured)
		if err == nil {
			if raw != nil {
				sraw[doc.RawFallback] = raw // the general's, if the structured one fails the schema
			}
			return sraw
		}
		structErr = err
	}
	switch {
	case raw != nil:
		return raw
	case structErr != nil:
		return failed(task, doc.ReasonInvalidResult, redactBound("agent structured output: "+structErr.Error()))
	case stageErr != nil && !errors.Is(stageErr, fs.ErrNotExist):
		return failed(task, doc.ReasonInvalidResult, "agent result "+staging+": "+stageErr.Error())
	}
	if runErr != nil {
		stderrTail = strings.TrimSpace(stderrTail + "\n" + runErr.Error())
	}
	f := engine.Classify(inv.Engine, o.Resume != "", code, po, stderrTail, "system.yaml")
	r := failed(task, f.Reason, redactBound(f.Message()))
	if f.Reason == doc.ReasonNoResult {
		if last := strings.TrimSpace(po.FinalText); last != "" {
			r["summary"] = redactBound(last)
		}
	}
	r["exit_code"] = code
	return r
}

// fromStructured reads an agent's structured output as this task's raw
// result: task_id is ours, and so are the fields the agent may not set.
// It is not checked against the raw-result schema here: the general does
// that when it reads the published result, and rejects it naming the
// origin recorded in it (one validator, the reader's: soldier-spawn links
// none).
func fromStructured(task string, b []byte) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		if err == nil {
			err = errors.New("null")
		}
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	doc.StripNulls(m)
	for _, k := range []string{"session_id", "retry_count", "usage", "cost_usd", "terminal", "error_reason"} {
		delete(m, k)
	}
	m["task_id"] = task
	if st, _ := m["status"].(string); st == doc.ResultFailed {
		m["error_reason"] = doc.ReasonAgentFailed
		if e, _ := m["error"].(string); e == "" {
			m["error"] = firstString(m["summary"], "the agent reported a failure")
		}
	}
	m[doc.RawOrigin] = "agent structured output"
	return m, nil
}

func firstString(v any, def string) string {
	if s, _ := v.(string); s != "" {
		return s
	}
	return def
}

// redactBound applies the one redactor and the 1,000-character bound of
// SPEC §10.3 to text the engine or agent produced.
func redactBound(s string) string {
	return engine.Bound(logging.Redact(s))
}

// forgetSession removes the engine's stored session once nothing will
// resume it (SPEC §10.5): kept for needs_human (its resume) and for a
// resumed run that will be retried; gone otherwise.
func forgetSession(o RunOptions, inv *engine.Invocation, env []string, out *Outcome) {
	st, _ := out.Raw["status"].(string)
	if out.SessionID == "" || asksAQuestion(out.Raw) || keepsConversation(o, out.Raw) {
		return
	}
	if o.Resume != "" {
		reason, _ := out.Raw["error_reason"].(string)
		if st == doc.ResultFailed || st == doc.ResultKilled {
			// A usage limit re-runs the same resume after the pause.
			if !doc.DefaultTerminal(reason) || reason == doc.ReasonUsageLimited {
				return
			}
		}
	}
	switch inv.Engine {
	case config.EngineClaude:
		_ = engine.RemoveClaudeSession(engine.ClaudeConfigDir(env), inv.Dir, out.SessionID)
	case config.EngineCodex:
		_ = engine.RemoveCodexSession(engine.CodexHome(env), out.SessionID)
	}
}

// asksAQuestion reports whether raw is a needs_human result the general
// will accept as one: the schema's own needs for it (a summary, a
// question). The soldier does not validate (the general does); a result
// that only claims needs_human becomes InvalidResult there, and its session
// must not outlive it.
func asksAQuestion(raw map[string]any) bool {
	st, _ := raw["status"].(string)
	_, sum := raw["summary"].(string)
	q, _ := raw["question"].(string)
	return st == doc.ResultNeedsHuman && sum && q != ""
}

func failed(task, reason, msg string) map[string]any {
	return map[string]any{
		"task_id": task, "status": doc.ResultFailed, "summary": msg,
		"error": msg, "error_reason": reason,
	}
}

// readStaging reads the agent's result file: a JSON object for this task
// (task_id filled in when absent, refused when it names another). The rest
// of the raw-result schema is the general's to check when it reads the
// published result (see fromStructured); the origin recorded here lets its
// rejection name this file.
func readStaging(path, task string) (map[string]any, error) {
	b, err := atomicfile.ReadLimited(path, maxResultBytes)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := doc.Unmarshal(doc.KindRawResult, b, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("%s: null is not a raw result", doc.KindRawResult)
	}
	// The soldier knows its task (SPEC §10.1): an agent that left task_id
	// out (or null) reported for it; one naming another task did not.
	if id, ok := m["task_id"]; !ok || id == nil {
		m["task_id"] = task
	} else if id != task {
		return nil, fmt.Errorf("task_id %s does not match %s", jsonText(id), task)
	}
	st, _ := m["status"].(string)
	if st == doc.ResultFailed || st == doc.ResultKilled {
		if _, ok := m["error_reason"]; !ok {
			if st == doc.ResultKilled {
				m["error_reason"] = doc.ReasonSoldierDied
			} else {
				m["error_reason"] = doc.ReasonAgentFailed
			}
		}
	}
	m[doc.RawOrigin] = "agent result " + path
	return m, nil
}

// jsonText renders a decoded JSON value for a message (a missing value is
// null).
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return redact.Clip(string(b), 80)
}

// engineEnv is the engine's environment (SPEC §9.17, §12.3): an allowlist
// of o.Environ (engine.Env: no credential but the engine's model key),
// this run's KINGDOM_* values, and GH_TOKEN only as the read-only token
// the manifest m names in github.read_token_env (m may be nil).
func engineEnv(l layout.Layout, o RunOptions, hb string, m *config.Manifest) []string {
	extra := map[string]string{
		layout.EnvBase:   o.BaseDir,
		EnvTaskID:        o.TaskID,
		EnvResultPath:    l.ResultStaging(o.TaskID),
		EnvHeartbeatPath: hb,
		EnvSoldierID:     o.SoldierID,
		EnvGeneral:       o.General,
		EnvWorkdir:       o.Workdir,
	}
	if m != nil && m.GitHub.ReadTokenEnv != "" {
		if v := engine.Getenv(o.Environ, m.GitHub.ReadTokenEnv); v != "" {
			extra[EnvReadToken] = v
		}
	}
	return engine.Env(o.Engine, o.Environ, o.System.Runtime.EnvPassthrough, extra)
}

// EnvReadToken is where a soldier finds the manifest's read-only GitHub
// token (gh and git read it there).
const EnvReadToken = "GH_TOKEN"

// executeTo runs the engine: stdin = prompt (claude/codex), stdout to
// logs/sessions/<soldier>.json, stderr to .err (with logs; a petition's
// output is kept in memory only); every output line touches the heartbeat
// and stdout lines feed the parser. It returns the exit code and the tail
// of the engine's stderr.
func executeTo(ctx context.Context, l layout.Layout, o RunOptions, inv *engine.Invocation, env []string, p engine.Parser, hb string, logs bool) (int, string, error) {
	var stdoutLog, stderrLog io.Writer = io.Discard, io.Discard
	if logs {
		if err := layout.EnsureDir(l.SessionLogsDir()); err != nil {
			return -1, "", err
		}
		f, err := os.OpenFile(l.SessionLog(o.SoldierID), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return -1, "", err
		}
		defer f.Close()
		// What the agent prints passes the one redactor (SPEC §10.14)
		// before it reaches disk, line by line; Close flushes a last
		// partial line.
		w := redact.NewWriter(f)
		defer w.Close()
		stdoutLog = w
		// stderr's log is made only if the engine writes to stderr.
		g := &lazyLog{path: l.SessionErr(o.SoldierID)}
		defer g.Close()
		w2 := redact.NewWriter(g)
		defer w2.Close()
		stderrLog = w2
	}

	var stdin *os.File
	if inv.StdinPrompt {
		f, err := os.Open(o.PromptFile)
		if err != nil {
			return -1, "", fmt.Errorf("open prompt: %w", err)
		}
		defer f.Close()
		stdin = f
	}
	// A background child holding stdout (a dev server started by the
	// agent) does not hang the soldier: its output is read for
	// engineWaitDelay at most after the engine exited.
	outW := &lineWriter{log: stdoutLog, hb: hb, parser: p}
	if logs && (inv.Engine == config.EngineClaude || inv.Engine == config.EngineCodex) {
		outW.spent = &spentRecord{path: l.ResultSpent(o.TaskID), sys: o.System, engine: inv.Engine}
	}
	errW := &lineWriter{log: stderrLog, hb: hb, keepTail: true}
	// tmux kill-session sends SIGHUP to the pane's process group, which is
	// ours, not the engine's: catch it (and SIGTERM/SIGINT) and take the
	// engine's group down with us, or a killed soldier's agent would go on
	// working as an orphan. Once the engine is gone a SIGHUP ends the
	// soldier by default again, before it can publish.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stopSignals...)
	// What the agent detaches is reparented to us, where sweepTask finds
	// it among our own children.
	adopted := proctree.AdoptOrphans() == nil
	code, interrupted, err := runEngine(ctx, inv.Path, inv.Args, inv.Dir, env, stdin, outW, errW, sigs)
	if err == nil {
		// The engine's group is gone; what the agent detached from it
		// (`setsid cmd &`, a daemon) still carries the task's variables.
		// Swept before a second stop signal may end us by default.
		sweepTask(o.BaseDir, o.TaskID, adopted)
	}
	signal.Stop(sigs)
	if err != nil {
		return -1, "", err
	}
	outW.flush()
	errW.flush()
	if interrupted || ctx.Err() == context.Canceled {
		return code, errW.Tail(), ErrInterrupted
	}
	return code, errW.Tail(), nil
}

// lineWriter receives an engine's output: it copies it to the log and, per
// complete line, touches the heartbeat and feeds the parser.
type lineWriter struct {
	log    io.Writer
	hb     string
	parser engine.Parser
	buf    []byte
	// keepTail keeps the last stderrTail bytes written (the engine's own
	// words when it refuses to run).
	keepTail bool
	tail     []byte
	// spent, when set, is kept current with the parser's usage.
	spent *spentRecord
}

// spentRecord keeps layout.ResultSpent current while the engine runs, so
// an attempt killed from outside (the king's cancel SIGKILLs the soldier
// too) still has what it spent recorded: it is rewritten whenever the
// usage changes, once per model message, not per line.
type spentRecord struct {
	path   string
	sys    *config.System
	engine string
	last   doc.Usage
}

func (r *spentRecord) update(po *engine.Outcome) {
	if po.Usage == nil || *po.Usage == r.last {
		return
	}
	r.last = *po.Usage
	cost := po.CostUSD
	if cost == nil {
		cost = codexCost(r.sys, r.engine, po.Usage)
	}
	_ = engine.WriteSpent(r.path, engine.Spent{Usage: po.Usage, CostUSD: cost})
}

// stderrTail bounds the stderr kept for a failure's reason.
const stderrTail = 2048

// Tail is the end of what was written, when keepTail is set.
func (w *lineWriter) Tail() string { return string(w.tail) }

func (w *lineWriter) Write(b []byte) (int, error) {
	_, _ = w.log.Write(b)
	if w.keepTail {
		w.tail = append(w.tail, b...)
		if len(w.tail) > stderrTail {
			w.tail = append([]byte(nil), w.tail[len(w.tail)-stderrTail:]...)
		}
	}
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
	progress := true
	if w.parser != nil {
		progress = w.parser.Line(bytes.TrimRight(l, "\r"))
		if w.spent != nil {
			w.spent.update(w.parser.Outcome())
		}
	}
	if progress {
		_ = atomicfile.Touch(w.hb)
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
func PublishConfigFailure(ctx context.Context, baseDir, task string, cfgErr error, log *slog.Logger) error {
	if err := ids.Check(task); err != nil {
		return fmt.Errorf("task: %w", err)
	}
	raw := failed(task, doc.ReasonEngineError, "configuration: "+cfgErr.Error())
	raw["terminal"] = true
	return newPublisher(layout.New(baseDir), RunOptions{Params: spawn.Params{TaskID: task}, Log: log}).publish(ctx, raw)
}
