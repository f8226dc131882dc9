package pg

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
)

// A transaction left open in another database of the same server holds
// the event log's readers back: EventHorizon counts the rows written since
// and names that transaction; once it ends nothing is held.
func TestEventHorizon_NamesAnOpenTransactionInAnotherDatabase(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.New(t) // its own server: the open transaction holds every database back
	st, err := Open(ctx, srv.DB(t), "host-a")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if h, err := st.EventHorizon(ctx); err != nil || h.Held != 0 || h.Oldest != "" {
		t.Fatalf("idle server: %+v %v, want nothing held", h, err)
	}
	other, err := pgx.Connect(ctx, srv.DB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil { // takes an xid
		t.Fatal(err)
	}
	if err := st.Emit(ctx, "task.created", "t", nil); err != nil {
		t.Fatal(err)
	}
	if evs, err := st.Events(ctx, "", 10); err != nil || len(evs) != 0 {
		t.Fatalf("read %d events past an open transaction (%v): the test cannot tell", len(evs), err)
	}
	h, err := st.EventHorizon(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Held != 1 || !strings.Contains(h.Oldest, "xid ") || h.Since.IsZero() || time.Since(h.Since) > time.Minute {
		t.Fatalf("held back: %+v, want 1 row held by a named transaction begun just now", h)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if h, err := st.EventHorizon(ctx); err != nil || h.Held != 0 || h.Oldest != "" {
		t.Fatalf("after commit: %+v %v, want nothing held", h, err)
	}
}
