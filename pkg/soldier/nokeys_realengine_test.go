package soldier

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kingdom-dev/kingdom/internal/testkit/modelfake"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// SPEC §12.3, with the real claude: the repository does not configure the
// engine. A worktree whose .claude/settings.json (committed, or brought in
// by a checkout between two runs) has SessionStart and UserPromptSubmit
// hooks runs neither, first run or resume; the kingdom user's own
// ~/.claude/settings.json "env" and "model" redirect neither the endpoint
// nor the model Kingdom sets.
func TestRealClaude_RepositoryAndUserSettingsDoNotConfigureTheEngine(t *testing.T) {
	r := newRealRig(t, "claude")
	// The user's settings point at another model API: one request there
	// is the leak (and, unlike a dead port, fails fast).
	elsewhere := modelfake.New()
	t.Cleanup(elsewhere.Close)
	elsewhere.Fallback(modelfake.Turns(so(map[string]any{"status": "success", "summary": "answered by the user's endpoint"})))
	os.MkdirAll(filepath.Join(r.home, ".claude"), 0o700)
	user, _ := json.Marshal(map[string]any{"env": map[string]string{"ANTHROPIC_BASE_URL": elsewhere.URL}, "model": "users-own-model"})
	os.WriteFile(filepath.Join(r.home, ".claude", "settings.json"), user, 0o600)

	marker := filepath.Join(t.TempDir(), "hook-ran")
	hook := func(event string) map[string]any {
		return map[string]any{event: []any{map[string]any{"hooks": []any{map[string]any{"type": "command",
			"command": "echo " + event + " >> " + marker + "; env >> " + marker}}}}}
	}
	settings := func(work string, events ...string) {
		hooks := map[string]any{}
		for _, e := range events {
			for k, v := range hook(e) {
				hooks[k] = v
			}
		}
		b, _ := json.Marshal(map[string]any{"hooks": hooks, "permissions": map[string]any{"allow": []string{"Bash(*)"}}})
		os.MkdirAll(filepath.Join(work, ".claude"), 0o700)
		os.WriteFile(filepath.Join(work, ".claude", "settings.json"), b, 0o600)
		os.WriteFile(filepath.Join(work, ".claude", "settings.local.json"), b, 0o600)
	}
	r.fake.Script("SCEN-hooks", modelfake.Turns(
		so(map[string]any{"status": "needs_human", "summary": "need a branch", "question": "Which branch?"}),
		so(map[string]any{"status": "success", "summary": "done"}),
	))
	work := worktree(t)
	settings(work, "SessionStart", "UserPromptSubmit")
	first := r.run("task-20261201-101", "SCEN-hooks review", work, "")
	if first.Raw["status"] != "needs_human" {
		t.Fatalf("first run %v", first.Raw)
	}
	// A checkout in the session brings other hooks for the next start.
	settings(work, "SessionStart", "UserPromptSubmit", "Stop", "PreToolUse")
	second := r.run("task-20261201-102", "The human answered: main", work, first.SessionID)
	if second.Raw["status"] != "success" {
		t.Fatalf("resumed run %v", second.Raw)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Fatalf("a repository hook ran:\n%.400s", b)
	}
	if n := len(elsewhere.Requests("")); n != 0 {
		t.Fatalf("the user's settings.json env redirected %d model requests", n)
	}
	reqs := r.fake.Requests("SCEN-hooks")
	if len(reqs) != 2 {
		t.Fatalf("%d requests at Kingdom's endpoint, want 2", len(reqs))
	}
	for _, q := range reqs {
		if strings.Contains(string(q.Body), "users-own-model") {
			t.Fatalf("the user's settings.json model was used: %.200s", q.Body)
		}
	}
}

// SPEC §12.3, with the real codex: its sandbox has no network by default,
// even when runtime.codex.args ask for it; the manifest's engine_network
// is the one opt-in.
func TestRealCodex_NoNetworkUnlessTheManifestOptsIn(t *testing.T) {
	var hits atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1); w.Write([]byte("REACHED")) }))
	t.Cleanup(site.Close)
	r := newRealRig(t, "codex")
	r.sys.Runtime.Codex.Args = append(r.sys.Runtime.Codex.Args, "-c", "sandbox_workspace_write.network_access=true")
	done := `{"status":"success","summary":"fetched","error":null,"reason":null,"question":null,"memory_updates":null,"notify_channel":null,"proclamation":null}`
	r.fake.Script("SCEN-net", modelfake.Turns(modelfake.Shell("curl -s -m 5 "+site.URL+"/x; echo rc=$?"), modelfake.Text(done)))
	l := layout.New(r.base)
	for i, c := range []struct {
		manifest string
		reach    bool
	}{
		{"name: gen-x\n", false},
		{"name: gen-x\nengine_network: true\n", true},
	} {
		os.WriteFile(l.GeneralManifest("gen-x"), []byte(c.manifest), 0o600)
		before := hits.Load()
		out := r.run("task-20261201-11"+string(rune('0'+i)), "SCEN-net fetch", worktree(t), "")
		if out.Raw["status"] != "success" {
			t.Fatalf("%q: %v", c.manifest, out.Raw)
		}
		if got := hits.Load() > before; got != c.reach {
			reqs := r.fake.Requests("SCEN-net")
			t.Fatalf("manifest %q: the agent reached the network: %v, want %v (tool results %q)", c.manifest, got, c.reach, reqs[len(reqs)-1].ToolResults)
		}
	}
}
