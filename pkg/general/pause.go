package general

import (
	"context"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/enginepause"
)

// enginePaused reports whether this general's engine is paused by a usage
// limit at now (SPEC §10.8: the king records the pause; no task of that
// engine starts until it ends, including tasks already in pending/). An
// unreadable pause file pauses nothing.
func (g *General) enginePaused(ctx context.Context, now time.Time) bool {
	ctx, cancel := g.callCtx(ctx)
	defer cancel()
	pf, err := enginepause.Load(ctx, g.kv)
	if err != nil {
		g.log.Warn("engine pauses unreadable", "err", err)
		return false
	}
	eng := g.o.System.EngineFor(g.o.Manifest)
	until, ok := pf.Active(eng, now)
	if ok {
		g.log.Debug("engine paused; pending tasks wait", "engine", eng, "until", doc.FormatTime(until))
	}
	return ok
}
