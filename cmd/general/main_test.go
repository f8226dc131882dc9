package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// As root into the kingdom user's tree, install refuses: the 0600 files it
// wrote would be root's, and the general could not read its manifest.
func TestInstall_AsRootIntoAnotherUsersTreeRefusesAndWritesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own a tree as nobody")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "general")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	l := layout.New(filepath.Join(dir, "kingdom"))
	l.Ensure()
	filepath.Walk(l.Base, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, 65534, 65534)
		}
		return nil
	})
	pkg := filepath.Join(dir, "gen-x")
	os.MkdirAll(pkg, 0o755)
	os.WriteFile(filepath.Join(pkg, "manifest.yaml"), []byte("name: gen-x\ndescription: test\nsubscribes: [\"test.*\"]\n"), 0o644)
	os.WriteFile(filepath.Join(pkg, "prompt.md"), []byte("do {{task_id}}\n"), 0o644)
	out, err := exec.Command(bin, "install", "--base-dir", l.Base, pkg).CombinedOutput()
	if err == nil {
		t.Fatalf("install as root into nobody's tree succeeded:\n%s", out)
	}
	if !strings.Contains(string(out), "runuser -u nobody -- ") {
		t.Fatalf("refusal does not say how to run it:\n%s", out)
	}
	if _, err := os.Stat(l.GeneralManifest("gen-x")); err == nil {
		t.Fatal("the manifest was written anyway")
	}
}
