package main

import (
	"os/exec"
	"strings"
	"testing"
)

// soldier-spawn starts once per task, so what it links is paid for on every
// task: a general-purpose JSON Schema validator initialises its meta-schemas
// at start, and package net (through cgo) makes the binary dynamically
// linked. Neither may come back unnoticed.
func TestDeps_SoldierSpawnLinksNoHeavyStartup(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), out)
	}
	for _, d := range deps {
		switch {
		case strings.Contains(d, "jsonschema"), strings.HasPrefix(d, "golang.org/x/text/"),
			d == "net", d == "runtime/cgo", d == "os/user":
			t.Errorf("soldier-spawn links %s", d)
		}
	}
}
