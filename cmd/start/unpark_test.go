package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/parks"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
)

// `start status` shows a park with its evidence (text and --json, a
// warning of the verdict), and `start unpark` files an unpark naming it
// and prints the king's reply.
func TestStartCommands_ParksAndUnpark(t *testing.T) {
	bin := startBin(t)
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := kv.OnStore(st)
	since := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Second)
	p := parks.Park{Kind: parks.General, Name: "gen-pr", Since: since, Until: since.Add(time.Hour),
		Reason: "3 failures alike (failed, EngineError) within an hour reached breaker.failure_threshold 3",
		Evidence: parks.Evidence{Count: 3, Fingerprint: "gen-pr|failed|engine", Last: []parks.Attempt{
			{TaskID: "task-20261124-001", At: since.Add(-time.Minute), Status: "failed", ErrorReason: "EngineError", Error: "exit 1"}}}}
	if err := kv.PutJSON(t.Context(), s, kv.NSParks, parks.Key(p.Kind, p.Name), p); err != nil {
		t.Fatal(err)
	}

	out, _, _ := runStart(t, bin, l.Base, "status", "--json")
	var doc struct {
		Parks   []map[string]any `json:"parks"`
		Verdict struct {
			Problems []struct{ Check, Reason string } `json:"problems"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if len(doc.Parks) != 1 || doc.Parks[0]["key"] != "general:gen-pr" || doc.Parks[0]["count"] != 3.0 ||
		doc.Parks[0]["unpark"] != "start unpark gen-pr" || len(doc.Parks[0]["last"].([]any)) != 1 {
		t.Errorf("parks %+v", doc.Parks)
	}
	found := false
	for _, pr := range doc.Verdict.Problems {
		found = found || pr.Check == "park" && strings.Contains(pr.Reason, "gen-pr parked since")
	}
	if !found {
		t.Errorf("no park in the verdict %+v", doc.Verdict.Problems)
	}
	out, _, _ = runStart(t, bin, l.Base, "status")
	for _, want := range []string{"general gen-pr since", "evidence: 3 × gen-pr|failed|engine", "task-20261124-001 attempt 0", "EngineError — exit 1", "lift now: start unpark gen-pr"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	if _, errOut, code := runStart(t, bin, l.Base, "unpark"); code != 2 || !strings.Contains(errOut, "usage: start unpark") {
		t.Errorf("unpark without a target: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runStart(t, bin, l.Base, "unpark", "item", "../x"); code != 2 || !strings.Contains(errOut, "park") {
		t.Errorf("unpark of an unsafe item: exit %d: %s", code, errOut)
	}

	// A king: answers the first request it sees.
	got := make(chan control.Request, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			qs, _ := control.Requests(ctx, s)
			if len(qs) > 0 {
				var req control.Request
				json.Unmarshal(qs[0].Data, &req)
				control.Answer(ctx, s, qs[0].Key, control.Reply{ID: req.ID, Action: req.Action, OK: true,
					Message: "unparked general gen-pr (parked since …)", At: "2026-11-24T20:00:00Z"})
				got <- req
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	out, errOut, code := runStart(t, bin, l.Base, "unpark", "gen-pr")
	if code != 0 || !strings.Contains(out, "unparked general gen-pr") {
		t.Fatalf("unpark exit %d: %s %s", code, out, errOut)
	}
	req := <-got
	if req.Action != control.ActionUnpark || req.Target != "gen-pr" || req.By == "" || req.Validate() != nil {
		t.Errorf("request %+v", req)
	}
}
