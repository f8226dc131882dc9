package enginepause

import (
	"os"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
)

func TestPauseFile_ActiveUntilItsEnd(t *testing.T) {
	l := layout.New(t.TempDir())
	p, s := l.EnginePause(), filesKV(t, l)
	f, err := Load(t.Context(), s)
	if err != nil || len(f) != 0 {
		t.Fatalf("missing file: %v %v", f, err)
	}
	now := time.Date(2026, 11, 24, 20, 0, 0, 0, time.UTC)
	f["claude"] = Pause{Until: "2026-11-24T21:00:00Z", Reason: "limit"}
	f["codex"] = Pause{Until: "2026-11-24T19:00:00Z", Reason: "old"}
	if err := Save(t.Context(), s, f); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	g, err := Load(t.Context(), s)
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
	if g, err := Load(t.Context(), s); err == nil || len(g) != 0 {
		t.Errorf("a corrupt file: %v %v, want an error and no pause", g, err)
	}
}

func TestClamp_BoundsAResetToTheCap(t *testing.T) {
	now := time.Date(2026, 11, 24, 20, 0, 0, 0, time.UTC)
	for _, c := range []struct{ until, want time.Time }{
		{now.Add(time.Hour), now.Add(time.Hour)},
		{now.Add(MaxPause), now.Add(MaxPause)},
		{now.Add(MaxPause + time.Second), now.Add(MaxPause)},
		{time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), now.Add(MaxPause)},
		{now.Add(-time.Hour), now.Add(-time.Hour)},
	} {
		if got := Clamp(c.until, now); !got.Equal(c.want) {
			t.Errorf("Clamp(%s) = %s, want %s", c.until, got, c.want)
		}
	}
}

// A pause recorded beyond the cap (before the cap existed, or by hand) is
// read as ending at the cap after its start, by every reader.
func TestLoad_PauseBeyondTheCapEndsAtTheCap(t *testing.T) {
	s := filesKV(t, layout.New(t.TempDir()))
	since := time.Date(2026, 11, 24, 20, 0, 0, 0, time.UTC)
	f := File{
		"codex":  {Until: "2099-01-01T00:00:00Z", Since: "2026-11-24T20:00:00Z", Reason: "limit"},
		"claude": {Until: "2026-11-25T20:00:00Z", Since: "2026-11-24T20:00:00Z", Reason: "limit"},
	}
	if err := Save(t.Context(), s, f); err != nil {
		t.Fatal(err)
	}
	g, err := Load(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if got := g["codex"].UntilTime(); !got.Equal(since.Add(MaxPause)) {
		t.Errorf("codex until %s, want the cap %s", got, since.Add(MaxPause))
	}
	if _, ok := g.Active("codex", since.Add(MaxPause)); ok {
		t.Error("codex still paused at the cap")
	}
	if got := g["claude"].UntilTime(); !got.Equal(since.Add(24 * time.Hour)) {
		t.Errorf("claude until %s, want its own end", got)
	}
}

// filesKV is the key-value of a files store on l, closed with the test.
func filesKV(t *testing.T, l layout.Layout) kv.KV {
	t.Helper()
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return kv.OnStore(st)
}
