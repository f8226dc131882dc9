package soldier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/redact"
	"github.com/kingdom-dev/kingdom/pkg/spawn"
)

// PetitionOptions configure Petition.
type PetitionOptions struct {
	BaseDir    string
	EventID    string
	PromptFile string
	Out        string        // state/king/petition-results/<event>.json
	Timeout    time.Duration // hard limit (king.yaml petition.timeout_seconds)
	// Models is king.yaml petition.models (one per engine; SPEC §10.9).
	Models  func(engine string) string
	System  *config.System
	Environ []string
}

// Petition runs the classifier once and writes {"general": …} or
// {"direct_response": …} atomically to o.Out, or {"error": "…"} on any
// failure or timeout (SPEC §9.21). The returned error is the failure that
// was recorded (the out file is written either way, unless writing it
// fails).
func Petition(ctx context.Context, o PetitionOptions) error {
	if err := ids.Check(o.EventID); err != nil {
		return fmt.Errorf("petition: event: %w", err)
	}
	if o.Out == "" || o.PromptFile == "" {
		return errors.New("petition: --out and --prompt are required")
	}
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Second
	}
	if o.System == nil {
		o.System = config.DefaultSystem()
	}
	if err := layout.EnsureDir(filepath.Dir(o.Out)); err != nil {
		return err
	}
	res, perr := classify(ctx, o)
	var out any = res
	if perr != nil {
		out = map[string]string{"error": perr.Error()}
	}
	if err := atomicfile.WriteJSON(o.Out, out); err != nil {
		return fmt.Errorf("write petition result %s: %w", o.Out, err)
	}
	return perr
}

func classify(ctx context.Context, o PetitionOptions) (*doc.PetitionResult, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	eng := o.System.Runtime.Engine
	model := ""
	if (eng == config.EngineClaude || eng == config.EngineCodex) && o.Models != nil {
		model = o.Models(eng)
	}
	// The command engine writes its answer to a dot-temp beside the out
	// file; it is published only after validation, so the king never reads
	// a half-written or malformed answer.
	staging := filepath.Join(filepath.Dir(o.Out), fmt.Sprintf(".tmp-petition-%d-%s", os.Getpid(), ids.Rand(4)))
	defer os.Remove(staging)
	workdir := filepath.Dir(o.PromptFile)
	// §10.9: the classifier reads untrusted text, so it runs with no
	// tools and no session, never with the configured args.
	inv, err := engine.Build(engine.Spec{Engine: eng, System: o.System, Model: model, Petition: true,
		PromptFile: o.PromptFile, Workdir: workdir, TaskID: o.EventID, ResultPath: staging})
	if err != nil {
		return nil, err
	}
	l := layout.New(o.BaseDir)
	parser := engine.NewParser(inv.Engine)
	// The engine's model key and nothing more; no manifest lends it a
	// token.
	ro := RunOptions{Params: spawn.Params{BaseDir: o.BaseDir, TaskID: o.EventID, PromptFile: o.PromptFile,
		Workdir: workdir, SoldierID: "petition-" + o.EventID, Engine: inv.Engine}, System: o.System, Environ: o.Environ}
	hb := filepath.Join(os.TempDir(), fmt.Sprintf(".kingdom-petition-hb-%d", os.Getpid()))
	defer os.Remove(hb)
	// The engine's output is kept in memory only (petitions have no
	// soldier session; stderr is discarded).
	code, stderrTail, err := executeTo(ctx, l, ro, inv, engineEnv(l, ro, hb, nil), parser, hb, false)
	if ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("petition timed out after %s", o.Timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("petition engine: %w", err)
	}
	po := parser.Outcome()
	text := po.FinalText
	if po.IsError {
		// The engine's own words (no credit, refused flags) go to the
		// king's fallback log line.
		f := engine.Classify(inv.Engine, false, code, po, stderrTail, "system.yaml")
		return nil, fmt.Errorf("petition engine failed (%s): %s", f.Reason, redactBound(f.Message()))
	}
	if inv.Engine == config.EngineCommand {
		if b, rerr := atomicfile.ReadLimited(staging, maxResultBytes); rerr == nil {
			text = string(b)
		}
	}
	var r doc.PetitionResult
	if !engine.ExtractJSONObject(text, &r) {
		if code != 0 {
			f := engine.Classify(inv.Engine, false, code, po, stderrTail, "system.yaml")
			return nil, fmt.Errorf("petition engine exited with code %d without an answer (%s): %s", code, f.Reason, redactBound(f.Message()))
		}
		return nil, fmt.Errorf("petition answer is not a JSON object: %q", redact.Clip(strings.TrimSpace(text), 200))
	}
	r.General = strings.TrimSpace(r.General)
	r.DirectResponse = strings.TrimSpace(r.DirectResponse)
	switch {
	case r.General != "" && r.DirectResponse != "":
		return nil, errors.New("petition answer has both general and direct_response")
	case r.General != "" && !ids.ValidGeneral(r.General):
		return nil, fmt.Errorf("petition answer names an invalid general %q", r.General)
	case r.General == "" && r.DirectResponse == "":
		return nil, errors.New("petition answer has neither general nor direct_response")
	}
	return &r, nil
}
