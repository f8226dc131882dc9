package files

import (
	"os"
	"testing"

	"github.com/kingdom-dev/kingdom/internal/testkit/storetest"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

func open(loc string) (store.Store, error) { return Open(layout.New(loc)) }

func TestMain(m *testing.M) {
	storetest.Child(open)
	os.Exit(m.Run())
}

func TestFileStore_Conformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) string { return t.TempDir() }, open)
}
