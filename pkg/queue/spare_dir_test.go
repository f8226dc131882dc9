package queue

import (
	"os"
	"path/filepath"
	"testing"
)

// Placing a pool's fresh directory leaves exactly that directory, empty,
// beside the pool: no candidate, no probe, and a killed placement's
// leftovers are swept.
func TestSpares_FreshPlacementLeavesOnlyItsDirectory(t *testing.T) {
	parent := t.TempDir()
	leftover := filepath.Join(parent, ".try-spare-fresh-99999-0")
	if err := os.MkdirAll(leftover, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(leftover, "probe"), nil, 0o600)
	sp, err := NewSpares(filepath.Join(parent, "spare"))
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(parent)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[0] != "spare" || names[1] != "spare-fresh" {
		t.Errorf("beside the pool: %v, want [spare spare-fresh]", names)
	}
	if fresh, _ := os.ReadDir(sp.fresh); len(fresh) != 0 {
		t.Errorf("fresh directory holds %v", fresh)
	}
	if fi, err := os.Stat(sp.fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("fresh directory: %v %v", fi, err)
	}
	if sp.Len() != 0 {
		t.Errorf("a new pool holds %d spares", sp.Len())
	}
}
