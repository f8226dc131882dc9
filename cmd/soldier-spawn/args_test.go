package main

import (
	"context"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/spawn"
)

// The argv a general gives the soldier session (spawn.RunArgs) reads back
// as the same task attempt.
func TestRunArgs_ParseBackToTheSameParams(t *testing.T) {
	full := spawn.Params{BaseDir: "/opt/k", TaskID: "task-20261125-001", General: "gen-a", PromptFile: "/opt/k/state/prompts/x.md",
		Workdir: "/w d", SoldierID: "soldier-1-ab", Resume: "3f2a", Engine: "claude"}
	bare := full
	bare.Resume, bare.Engine = "", ""
	for _, want := range []spawn.Params{full, bare} {
		var got spawn.Params
		ran := false
		cmd := newCommand(func(_ context.Context, p spawn.Params) error { got, ran = p, true; return nil })
		if err := cmd.Run(context.Background(), spawn.RunArgs("/bin/soldier-spawn", want)); err != nil {
			t.Fatal(err)
		}
		if !ran || got != want {
			t.Errorf("run got %+v (ran %v), want %+v", got, ran, want)
		}
	}
}
