package main

import (
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/soldier"
)

// What the general starts (soldier.RunArgs) is read whole by the fast
// path; anything else is left to the full command line parser.
func TestFastRunParams_ReadsRunArgsAndLeavesTheRestToTheParser(t *testing.T) {
	p := soldier.Params{BaseDir: "/opt/k", TaskID: "task-20261125-001", General: "gen-a", PromptFile: "/opt/k/state/prompts/x.md",
		Workdir: "/w d", SoldierID: "soldier-1-ab", Resume: "3f2a", Engine: "claude"}
	got, ok := fastRunParams(soldier.RunArgs("/bin/soldier-spawn", p))
	if !ok || got != p {
		t.Fatalf("fastRunParams(RunArgs(%+v)) = %+v, %v", p, got, ok)
	}
	p.Resume, p.Engine = "", ""
	if got, ok := fastRunParams(soldier.RunArgs("/bin/soldier-spawn", p)); !ok || got != p {
		t.Fatalf("without resume and engine: %+v, %v", got, ok)
	}
	if got, ok := fastRunParams([]string{"ss", "run", "--task=task-20261125-001", "--base-dir=/b"}); !ok || got.TaskID != "task-20261125-001" || got.BaseDir != "/b" {
		t.Fatalf("--name=value: %+v, %v", got, ok)
	}
	for _, args := range [][]string{
		{"ss"},
		{"ss", "--task", "x"},
		{"ss", "petition", "--event", "x"},
		{"ss", "run", "--help"},
		{"ss", "run", "-h"},
		{"ss", "run", "--task"},
		{"ss", "run", "--task", "a", "--task", "b"},
		{"ss", "run", "--tsak", "a"},
		{"ss", "run", "word"},
		{"ss", "run", "--task", "a", "extra"},
	} {
		if _, ok := fastRunParams(args); ok {
			t.Errorf("fastRunParams(%q) took it; the parser must", args)
		}
	}
}
