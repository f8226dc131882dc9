package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// soldier-spawn starts once per task, so what it links is paid for on every
// task: a general-purpose JSON Schema validator initialises its meta-schemas
// at start (pkg/schema, pkg/queue: the soldier uses pkg/doc and leaves the
// validation of its raw result to the general), and x/text's tables come
// with it. Neither may come back unnoticed.
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
			strings.HasSuffix(d, "/kingdom/pkg/schema"), strings.HasSuffix(d, "/kingdom/pkg/queue"):
			t.Errorf("soldier-spawn links %s", d)
		}
	}
}

// make build builds without cgo, so soldier-spawn (which links package net
// through pkg/config) is a static binary: no dynamic loader and no shared
// libraries to map at each start.
func TestDeps_MakeBuildMakesAStaticSoldierSpawn(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\tCGO_ENABLED=0 \$\(GO\) build `).Match(mk) {
		t.Fatal("the Makefile's build recipe does not build with CGO_ENABLED=0")
	}
	bin := filepath.Join(t.TempDir(), "soldier-spawn")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("soldier-spawn has a %v program header: dynamically linked", p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("soldier-spawn needs shared libraries %v (%v)", libs, err)
	}
}
