package retention

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestRows_RemovesEndStateDocumentsPastTheirAge(t *testing.T) {
	// PostgreSQL only: in file mode the file rules of Clean remove these
	// (and the file store would reject these bare documents as poison).
	stores := map[string]func(t *testing.T) store.Store{
		"postgres": func(t *testing.T) store.Store {
			st, err := pg.Open(context.Background(), pgtest.DB(t), "host-a")
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	now := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	ret := config.DefaultChamberlain().Retention
	ret.QueueDays, ret.FailedDays = 7, 30
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := open(t)
			defer st.Close()
			put := func(q, state, id string, age time.Duration) {
				doc := fmt.Sprintf(`{"id":%q,"created_at":%q}`, id, now.Add(-age).Format(time.RFC3339Nano))
				if err := st.Update(ctx, func(tx store.Tx) error { return tx.PutOnce(q, state, id, []byte(doc)) }); err != nil {
					t.Fatal(err)
				}
			}
			day := 24 * time.Hour
			put(layout.QMessages, layout.Sent, "msg-old", 8*day)
			put(layout.QMessages, layout.Sent, "msg-new", 6*day)
			put(layout.QMessages, layout.Failed, "msg-failed", 8*day) // failed_days 30
			put(layout.QMessages, layout.Pending, "msg-pending", 90*day)
			put(layout.QTasks, layout.Completed, "task-old", 8*day)
			n, err := Rows(ctx, st, nil, ret, now)
			if err != nil {
				t.Fatal(err)
			}
			if n != 2 {
				t.Errorf("removed %d, want 2", n)
			}
			for q, idl := range map[string][]string{layout.QMessages: {"msg-old"}, layout.QTasks: {"task-old"}} {
				for _, id := range idl {
					if _, err := st.Get(ctx, q, id); err == nil {
						t.Errorf("%s %s is still there", q, id)
					}
				}
			}
			for _, id := range []string{"msg-new", "msg-failed", "msg-pending"} {
				if _, err := st.Get(ctx, layout.QMessages, id); err != nil {
					t.Errorf("%s was removed: %v", id, err)
				}
			}
		})
	}
}
