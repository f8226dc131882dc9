package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestCreateNoReplace_NeverReplacesAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.json")
	if err := CreateNoReplace(p, []byte(`{"a":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	err := CreateNoReplace(p, []byte(`{"a":2}`), 0o600)
	if !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	b, _ := os.ReadFile(p)
	if string(b) != `{"a":1}` {
		t.Fatalf("content %s, want the first write", b)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("dir holds %v, want only x.json", names)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
}

func TestRenameNoReplace_MissingSourceAndExistingTarget(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := RenameNoReplace(a, b); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing source: %v", err)
	}
	os.WriteFile(a, []byte("a"), 0o600)
	os.WriteFile(b, []byte("b"), 0o600)
	if err := RenameNoReplace(a, b); !errors.Is(err, ErrExists) {
		t.Fatalf("existing target: %v", err)
	}
	if got, _ := os.ReadFile(b); string(got) != "b" {
		t.Fatal("target replaced")
	}
}

func TestSweeps(t *testing.T) {
	dir := t.TempDir()
	SetRole("gen-x")
	defer SetRole("kingdom")
	os.WriteFile(filepath.Join(dir, ".tmp-gen_x-999999999-ab"), nil, 0o600) // a pid that cannot exist
	os.WriteFile(filepath.Join(dir, ".tmp-gen_x-"+itoa(os.Getpid())+"-cd"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, ".tmp-king-999999999-ef"), nil, 0o600)
	n, err := SweepDeadPidTemps(dir, "gen-x")
	if err != nil || n != 1 {
		t.Fatalf("swept %d (%v), want 1 (own role, dead pid)", n, err)
	}
	ents, _ := os.ReadDir(dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if strings.Contains(strings.Join(left, ","), "999999999-ab") || len(left) != 2 {
		t.Fatalf("left %v", left)
	}
}

func itoa(n int) string {
	return strconv.Itoa(n)
}
