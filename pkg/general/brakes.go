package general

import (
	"fmt"
	"hash/fnv"
	"io/fs"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/engine"
	"github.com/kingdom-dev/kingdom/pkg/spend"
)

// Brakes of one attempt (SPEC §12.4, king.yaml breaker), kept by its
// watcher:
//
//   - No progress: progress is a new engine event or a change in the
//     attempt's worktree. The soldier touches the heartbeat on every
//     line of the engine's output that is progress (not claude's
//     api_retry lines), so a heartbeat the watcher sees change is an
//     engine event; the worktree is fingerprinted (every entry's name,
//     size and mtime, .git internals skipped) at most every
//     worktreeEvery. An attempt without either for no_progress_minutes
//     is killed: failed, Stalled (the king retries it once).
//   - Burn: the cost and tokens the engine reported (the soldier's spent
//     record: claude's per-message usage, codex's turn.completed) since
//     the last change in the worktree, or since the attempt's start,
//     past burn_usd / burn_tokens: killed, failed, Runaway, terminal.
//     Engine events alone do not reset it: an agent that talks and
//     calls tools without changing anything is what it stops.
//
// A general restarted while its soldier runs starts these anew at the
// re-attach (the burn still counts from the attempt's start).

// worktreeEvery bounds how often a watcher walks its attempt's worktree
// (on the general's clock); a brake about to fire walks it first.
const worktreeEvery = 30 * time.Second

// maxWorktreeEntries bounds one walk: the fingerprint covers the first
// entries in lexical order (a change there is still seen).
const maxWorktreeEntries = 100_000

// brakes is one attempt's no-progress and burn state.
type brakes struct {
	stall      time.Duration // 0: no no-progress brake
	burnUSD    *float64
	burnTokens *int64
	workdir    string
	spentPath  string

	lastProgress time.Time
	lastWalk     time.Time
	walked       bool
	fp           uint64
	// baseUSD and baseTokens are the spent figures at the last worktree
	// change (zero: the attempt's start).
	baseUSD    float64
	baseTokens int64
}

func newBrakes(b config.KingBreaker, workdir, spentPath string, now time.Time) *brakes {
	return &brakes{stall: time.Duration(b.NoProgressMinutes) * time.Minute, burnUSD: b.BurnUSD, burnTokens: b.BurnTokens,
		workdir: workdir, spentPath: spentPath, lastProgress: now}
}

func (b *brakes) enabled() bool {
	return b.stall > 0 || b.burnUSD != nil || b.burnTokens != nil
}

// check is one look at the attempt at now; event says the watcher saw an
// engine event since its last look. A non-empty reason is the brake that
// fires, msg its words (the figure and the limit).
func (b *brakes) check(now time.Time, event bool) (reason, msg string) {
	if !b.enabled() {
		return "", ""
	}
	if event {
		b.lastProgress = now
	}
	if !b.walked || now.Sub(b.lastWalk) >= worktreeEvery {
		b.walk(now)
	}
	if b.stall > 0 && now.Sub(b.lastProgress) >= b.stall {
		// A change since the last walk is progress: look once more.
		if b.lastWalk != now {
			b.walk(now)
		}
		if now.Sub(b.lastProgress) >= b.stall {
			return doc.ReasonStalled, fmt.Sprintf("no engine event and no change in its worktree for %d minutes (breaker.no_progress_minutes %d)",
				int(now.Sub(b.lastProgress).Minutes()), int(b.stall.Minutes()))
		}
	}
	if b.burnUSD == nil && b.burnTokens == nil {
		return "", ""
	}
	if reason, msg = b.burn(); reason != "" && b.lastWalk != now {
		b.walk(now) // a change since the last walk counts the burn anew
		reason, msg = b.burn()
	}
	return reason, msg
}

// burn compares what the engine spent since the last worktree change with
// the caps.
func (b *brakes) burn() (reason, msg string) {
	usd, tokens, priced := b.spent()
	if b.burnUSD != nil && priced && usd-b.baseUSD > *b.burnUSD {
		return doc.ReasonRunaway, fmt.Sprintf("spent $%.2f since its last progress (breaker.burn_usd $%.2f)", usd-b.baseUSD, *b.burnUSD)
	}
	if b.burnTokens != nil && tokens-b.baseTokens > *b.burnTokens {
		return doc.ReasonRunaway, fmt.Sprintf("used %d tokens since its last progress (breaker.burn_tokens %d)", tokens-b.baseTokens, *b.burnTokens)
	}
	return "", ""
}

// spent is the soldier's record of what the engine spent so far.
func (b *brakes) spent() (usd float64, tokens int64, priced bool) {
	sp, ok := engine.ReadSpent(b.spentPath)
	if !ok {
		return 0, 0, false
	}
	tokens = spend.Usage(*sp.Usage).Tokens()
	if sp.CostUSD != nil {
		return *sp.CostUSD, tokens, true
	}
	return 0, tokens, false
}

// walk fingerprints the worktree; a change since the last walk is
// progress, and the burn counts again from here.
func (b *brakes) walk(now time.Time) {
	fp := fingerprint(b.workdir)
	if b.walked && fp != b.fp {
		b.lastProgress = now
		b.baseUSD, b.baseTokens, _ = b.spent()
	}
	b.fp, b.walked, b.lastWalk = fp, true, now
}

// fingerprint hashes every entry under dir (its path, size, mtime and
// mode), skipping .git directories and files (the repository's internals,
// which git itself touches) and stopping after maxWorktreeEntries. A
// missing dir hashes as empty.
func fingerprint(dir string) uint64 {
	h := fnv.New64a()
	n := 0
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a vanishing entry: the next walk sees the rest
		}
		if d.Name() == ".git" && p != dir {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if n++; n > maxWorktreeEntries {
			return filepath.SkipAll
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		h.Write([]byte(p))
		h.Write([]byte{0})
		h.Write(strconv.AppendInt(nil, fi.Size(), 10))
		h.Write(strconv.AppendInt(nil, fi.ModTime().UnixNano(), 10))
		h.Write(strconv.AppendUint(nil, uint64(fi.Mode()), 10))
		return nil
	})
	return h.Sum64()
}
