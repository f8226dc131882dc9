package control

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// A resume may name one engine; no other action may, and the name must be
// an engine's name, not a path or a flag.
func TestRequest_EngineOnlyOnResume(t *testing.T) {
	for _, c := range []struct {
		r  Request
		ok bool
	}{
		{Request{Action: ActionResume}, true},
		{Request{Action: ActionResume, Engine: "codex"}, true},
		{Request{Action: ActionResume, Engine: "../codex"}, false},
		{Request{Action: ActionResume, Engine: "--all"}, false},
		{Request{Action: ActionPause, Engine: "codex"}, false},
		{Request{Action: ActionCancel, TaskID: "task-20261121-001", Engine: "codex"}, false},
	} {
		if err := c.r.Validate(); (err == nil) != c.ok {
			t.Errorf("Validate(%+v) = %v, want ok %v", c.r, err, c.ok)
		}
	}
	l := layout.New(t.TempDir())
	id, err := Submit(t.Context(), filesKV(t, l), Request{Action: ActionResume, Engine: "codex", By: "alice"}, time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(l.KingControlDir(), id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var r Request
	if err := json.Unmarshal(b, &r); err != nil || r.Engine != "codex" {
		t.Errorf("submitted request %s: %+v %v", b, r, err)
	}
}

// cancel_event names a safe event id: it becomes a queue document's name.
func TestRequest_CancelEventNeedsASafeEventID(t *testing.T) {
	for _, c := range []struct {
		r  Request
		ok bool
	}{
		{Request{Action: ActionCancelEvent, EventID: "evt-github-1"}, true},
		{Request{Action: ActionCancelEvent}, false},
		{Request{Action: ActionCancelEvent, EventID: "../evt-1"}, false},
		{Request{Action: ActionCancelEvent, EventID: "evt/1"}, false},
		{Request{Action: ActionCancelEvent, EventID: "evt-1", Engine: "codex"}, false},
	} {
		if err := c.r.Validate(); (err == nil) != c.ok {
			t.Errorf("Validate(%+v) = %v, want ok %v", c.r, err, c.ok)
		}
	}
}

// An unpark names its park (SPEC §12.4) in a form parks.Target reads;
// without one, or with an unsafe one, it is refused, and no other action
// takes a target.
func TestRequest_UnparkNeedsATarget(t *testing.T) {
	for _, c := range []struct {
		r  Request
		ok bool
	}{
		{Request{Action: ActionUnpark, Target: "gen-pr"}, true},
		{Request{Action: ActionUnpark, Target: "general:gen-pr"}, true},
		{Request{Action: ActionUnpark, Target: "item:gh:acme:web:12"}, true},
		{Request{Action: ActionUnpark, Target: "gh:acme:web:12"}, true},
		{Request{Action: ActionUnpark, Target: "acme/web#12"}, true},
		{Request{Action: ActionUnpark}, false},
		{Request{Action: ActionUnpark, Target: "  "}, false},
		{Request{Action: ActionUnpark, Target: "general:"}, false},
		{Request{Action: ActionUnpark, Target: "../etc/passwd"}, false},
		{Request{Action: ActionUnpark, Target: "gen-pr", Engine: "codex"}, false},
		{Request{Action: ActionPause, Target: "gen-pr"}, false},
		{Request{Action: ActionCancel, TaskID: "task-20261121-001", Target: "gen-pr"}, false},
	} {
		if err := c.r.Validate(); (err == nil) != c.ok {
			t.Errorf("Validate(%+v) = %v, want ok %v", c.r, err, c.ok)
		}
	}
	l := layout.New(t.TempDir())
	s := filesKV(t, l)
	if _, err := Submit(t.Context(), s, Request{Action: ActionUnpark, By: "alice"}, time.Unix(1, 0)); err == nil {
		t.Error("Submit queued an unpark without a target")
	}
	id, err := Submit(t.Context(), s, Request{Action: ActionUnpark, Target: "acme/web#12", By: "alice"}, time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(l.KingControlDir(), id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil || raw["action"] != ActionUnpark || raw["target"] != "acme/web#12" {
		t.Errorf("submitted request %s: %v", b, err)
	}
}
