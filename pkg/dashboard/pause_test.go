package dashboard

import (
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/kv"
)

// The dashboard shows the operator's pause from state/king/paused.json, the
// file the king writes on `start pause` (pkg/control).
func TestReadPause_FollowsTheKingsPauseFile(t *testing.T) {
	l := newBase(t)
	k := kv.OnStore(withStore(t, Options{Layout: l}).Store)
	if p := readPause(t.Context(), k); p.State != "running" {
		t.Fatalf("not paused: %+v", p)
	}
	if err := atomicfile.WriteJSON(l.KingPaused(), control.Pause{Since: "2026-11-24T20:00:00Z", By: "alice@host"}); err != nil {
		t.Fatal(err)
	}
	if p := readPause(t.Context(), k); p.State != "paused" || p.Since != "2026-11-24T20:00:00Z" || p.Detail != "by alice@host" {
		t.Fatalf("paused: %+v", p)
	}
}
