package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGroup_CommitsEveryFileWholeAcrossDirectories(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	var g Group
	var renamed []int
	g.AfterRename = func(i int) { renamed = append(renamed, i) }
	n := maxOpen + 10 // past the early-sync bound
	for i := range n {
		dir := a
		if i%2 == 1 {
			dir = b
		}
		if _, err := g.Write(filepath.Join(dir, fmt.Sprintf("f%03d.json", i)), []byte(fmt.Sprintf(`{"n":%d}`, i)), 0o600, i%3 == 0); err != nil {
			t.Fatal(err)
		}
	}
	// Before Commit nothing is visible but dot-temps.
	for _, d := range []string{a, b} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if !IsTemp(e.Name()) {
				t.Fatalf("%s visible before Commit", e.Name())
			}
		}
	}
	if err := g.Commit(); err != nil {
		t.Fatal(err)
	}
	if len(renamed) != n {
		t.Errorf("AfterRename ran %d times, want %d", len(renamed), n)
	}
	for i := range n {
		dir := a
		if i%2 == 1 {
			dir = b
		}
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("f%03d.json", i)))
		if err != nil || string(got) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("file %d: %q %v", i, got, err)
		}
	}
	for _, d := range []string{a, b} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if IsTemp(e.Name()) {
				t.Errorf("temp left: %s", e.Name())
			}
		}
	}
}

func TestGroup_NoReplaceConflictIsPerItemAndAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	taken := filepath.Join(dir, "taken.json")
	os.WriteFile(taken, []byte("old"), 0o600)
	var g Group
	conflict, _ := g.Write(taken, []byte("new"), 0o600, true)
	ok, _ := g.Write(filepath.Join(dir, "fresh.json"), []byte("fresh"), 0o600, true)
	replace, _ := g.Write(filepath.Join(dir, "taken2.json"), []byte("x"), 0o600, false)
	if err := g.Commit(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(conflict.Err, ErrExists) || ok.Err != nil || replace.Err != nil {
		t.Errorf("errs: conflict %v ok %v replace %v", conflict.Err, ok.Err, replace.Err)
	}
	if b, _ := os.ReadFile(taken); string(b) != "old" {
		t.Errorf("no-replace overwrote: %q", b)
	}

	var g2 Group
	g2.Write(filepath.Join(dir, "aborted.json"), []byte("x"), 0o600, false)
	g2.Abort()
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, ","); got != "fresh.json,taken.json,taken2.json" {
		t.Errorf("dir after abort = %s", got)
	}
}

// A step between two writes sees the earlier file in place and the later
// one not yet; a failing step stops the commit: the later file never
// appears and no temp is left.
func TestGroup_CommitStepsRunBetweenTheRenamesAndAFailureStopsThem(t *testing.T) {
	dir := t.TempDir()
	first, second, third := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	var g Group
	for _, p := range []string{first, second} {
		if _, err := g.Write(p, []byte(p), 0o600, false); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	look := func() error {
		for _, p := range []string{first, second} {
			if _, err := os.Stat(p); err == nil {
				seen = append(seen, filepath.Base(p))
			}
		}
		return nil
	}
	if err := g.CommitSteps(map[int][]func() error{1: {look}, 2: {look}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(seen, ","); got != "a,a,b" {
		t.Errorf("steps saw %q, want a (before b's rename) then a,b", got)
	}

	var h Group
	for _, p := range []string{second, third} {
		if _, err := h.Write(p, []byte("new"), 0o600, false); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("boom")
	if err := h.CommitSteps(map[int][]func() error{1: {func() error { return boom }}}); !errors.Is(err, boom) {
		t.Fatalf("commit: %v, want boom", err)
	}
	if b, _ := os.ReadFile(second); string(b) != "new" {
		t.Errorf("the rename before the failed step: %q", b)
	}
	if _, err := os.Stat(third); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file after the failed step exists: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if IsTemp(e.Name()) {
			t.Errorf("temp %s left behind", e.Name())
		}
	}
}
