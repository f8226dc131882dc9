package modelfake

import (
	"os"
	"path/filepath"
	"testing"
)

// FindCLI returns the path of a CLI the repo's package.json installs
// (node_modules/.bin/<name>), searching from the working directory up. A
// test without it is skipped, unless CI=true: there a missing install
// must fail, never pass silently.
func FindCLI(t testing.TB, name string) string {
	t.Helper()
	dir, _ := os.Getwd()
	for {
		p := filepath.Join(dir, "node_modules", ".bin", name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			abs, _ := filepath.Abs(p)
			return abs
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("node_modules/.bin/%s is missing: `npm ci` at the repo root installs the pinned CLIs (package.json)", name)
	}
	t.Skipf("node_modules/.bin/%s not installed; run `npm ci` at the repo root to test against the real CLI", name)
	return ""
}
