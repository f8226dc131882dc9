package pg

import (
	"context"
	"os"
	"testing"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/internal/testkit/storetest"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

func open(loc string) (store.Store, error) { return Open(context.Background(), loc, "host-test") }

func TestMain(m *testing.M) {
	storetest.Child(open)
	os.Exit(pgtest.Main(m))
}

func TestPostgresStore_Conformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) string { return pgtest.DB(t) }, open)
}
