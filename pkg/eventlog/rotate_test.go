package eventlog_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/lockfile"
)

func rotateUnderLock(t testing.TB, dir string) {
	t.Helper()
	err := lockfile.With(filepath.Join(dir, ".rotate.lock"), func() error {
		return os.Rename(filepath.Join(dir, "events.log"), filepath.Join(dir, "events-20261120.log"))
	})
	if err != nil {
		t.Fatal(err)
	}
}
