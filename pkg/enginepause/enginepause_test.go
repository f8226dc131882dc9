package enginepause

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPauseFile_ActiveUntilItsEnd(t *testing.T) {
	p := filepath.Join(t.TempDir(), "engine-pause.json")
	f, err := Load(p)
	if err != nil || len(f) != 0 {
		t.Fatalf("missing file: %v %v", f, err)
	}
	now := time.Date(2026, 11, 24, 20, 0, 0, 0, time.UTC)
	f["claude"] = Pause{Until: "2026-11-24T21:00:00Z", Reason: "limit"}
	f["codex"] = Pause{Until: "2026-11-24T19:00:00Z", Reason: "old"}
	if err := Save(p, f); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	g, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := g.Active("claude", now); !ok || !u.Equal(now.Add(time.Hour)) {
		t.Errorf("claude active = %v until %s", ok, u)
	}
	if _, ok := g.Active("codex", now); ok {
		t.Error("an ended pause is active")
	}
	if _, ok := g.Active("command", now); ok {
		t.Error("an engine never paused is active")
	}
	if _, ok := g.Active("claude", now.Add(time.Hour)); ok {
		t.Error("the pause is active at its end")
	}
	if e := g.Engines(); len(e) != 2 || e[0] != "claude" {
		t.Errorf("engines %v", e)
	}
	os.WriteFile(p, []byte("{not json"), 0o600)
	if g, err := Load(p); err == nil || len(g) != 0 {
		t.Errorf("a corrupt file: %v %v, want an error and no pause", g, err)
	}
}
