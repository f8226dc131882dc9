package files

import (
	"context"
	"os"
	"testing"

	"github.com/kingdom-dev/kingdom/internal/testkit/storetest"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

func open(loc string) (store.Store, error) { return Open(layout.New(loc), "test-host") }

func TestMain(m *testing.M) {
	storetest.Child(open)
	os.Exit(m.Run())
}

func TestFileStore_Conformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) string { return t.TempDir() }, open)
}

func TestFilesLeaders_EpochAndHeld(t *testing.T) {
	l := layout.New(t.TempDir())
	s, err := Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	lease, err := s.Lead(ctx, "king")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Leaders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if li := m["king"]; li.Epoch != 1 || !li.Held || li.Holder != "" {
		t.Fatalf("king leading: %+v", li)
	}
	lease.Release()
	m, _ = s.Leaders(ctx)
	if li := m["king"]; li.Epoch != 1 || li.Held {
		t.Fatalf("king released: %+v", li)
	}
}
