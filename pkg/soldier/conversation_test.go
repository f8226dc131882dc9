package soldier

import (
	"os"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/spawn"
)

// The session of a successful attempt stays when its conversation is kept
// (its general's manifest, or the agent asked).
func TestKeepsConversation(t *testing.T) {
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(l.GeneralManifest("gen-herald"), []byte("name: gen-herald\ndescription: talks\nsubscribes: [slack.channel.message]\ntrack_conversation: true\n"), 0o600)
	os.WriteFile(l.GeneralManifest("gen-pr"), []byte("name: gen-pr\ndescription: reviews\nsubscribes: [github.pr.*]\n"), 0o600)
	opts := func(g string) RunOptions { return RunOptions{Params: spawn.Params{BaseDir: l.Base, General: g}} }
	ok := map[string]any{"status": "success", "summary": "hi"}
	for _, c := range []struct {
		name    string
		general string
		raw     map[string]any
		want    bool
	}{
		{"herald success", "gen-herald", ok, true},
		{"herald failure", "gen-herald", map[string]any{"status": "failed"}, false},
		{"pr success", "gen-pr", ok, false},
		{"pr success, agent asked", "gen-pr", map[string]any{"status": "success", "summary": "done", "track_conversation": true}, true},
		{"herald success the general will reject (no summary)", "gen-herald", map[string]any{"status": "success"}, false},
		{"unknown general", "gen-nobody", ok, false},
	} {
		if got := keepsConversation(opts(c.general), c.raw); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A needs_human result keeps its session only when the general will take it
// as one (a summary and a question); a broken claim ends InvalidResult there.
func TestAsksAQuestion(t *testing.T) {
	for _, c := range []struct {
		raw  map[string]any
		want bool
	}{
		{map[string]any{"status": "needs_human", "summary": "s", "question": "which env?"}, true},
		{map[string]any{"status": "needs_human", "summary": "s"}, false},
		{map[string]any{"status": "needs_human", "summary": "s", "question": ""}, false},
		{map[string]any{"status": "needs_human", "question": "which env?"}, false},
		{map[string]any{"status": "success", "summary": "s", "question": "q"}, false},
	} {
		if got := asksAQuestion(c.raw); got != c.want {
			t.Errorf("%v: %v, want %v", c.raw, got, c.want)
		}
	}
}
