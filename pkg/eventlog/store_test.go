package eventlog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

// eachStore runs fn on the file store and on PostgreSQL (pgtest skips
// without its binaries, except under CI=true). open opens another handle on
// the same store, as a restarted consumer would.
func eachStore(t *testing.T, fn func(t *testing.T, open func() store.Store)) {
	t.Run("files", func(t *testing.T) {
		l := layout.New(t.TempDir())
		fn(t, func() store.Store {
			st, err := files.Open(l, "test-host")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		})
	})
	t.Run("pg", func(t *testing.T) {
		dsn := pgtest.DB(t)
		fn(t, func() store.Store {
			st, err := pg.Open(context.Background(), dsn, "host-a")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		})
	})
}

// Events emitted through a store come back from its event log in order,
// each once, with the emitter's actor and a timestamp.
func TestStoreEmitter_InOrder(t *testing.T) {
	eachStore(t, func(t *testing.T, open func() store.Store) {
		st := open()
		em := eventlog.NewStoreEmitter(st, "tester")
		for i := 0; i < 5; i++ {
			if err := em.Emit("test.event", map[string]any{"i": i}); err != nil {
				t.Fatal(err)
			}
		}
		if err := em.EmitAs("test.other", "king", nil); err != nil {
			t.Fatal(err)
		}
		evs, err := open().Events(t.Context(), "", 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range evs {
			var d struct{ I int }
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatalf("event data %s: %v", ev.Data, err)
			}
			if ev.TS == "" {
				t.Errorf("event %+v has no timestamp", ev)
			}
			got = append(got, fmt.Sprintf("%s/%s/%d", ev.Type, ev.Actor, d.I))
		}
		want := "test.event/tester/0,test.event/tester/1,test.event/tester/2,test.event/tester/3,test.event/tester/4,test.other/king/0"
		if strings.Join(got, ",") != want {
			t.Fatalf("events %v, want %s", got, want)
		}
	})
}

// A store emit redacts secrets as a file emit does.
func TestStoreEmitter_Redacts(t *testing.T) {
	eachStore(t, func(t *testing.T, open func() store.Store) {
		st := open()
		em := eventlog.NewStoreEmitter(st, "tester")
		secret := "xoxb-1234567890-abcdefghijklmnop"
		if err := em.Emit("test.secret", map[string]any{"i": 1, "err": "Authorization: Bearer " + secret}); err != nil {
			t.Fatal(err)
		}
		evs, err := st.Events(context.Background(), "", 10)
		if err != nil || len(evs) != 1 {
			t.Fatalf("events = %v, %v", evs, err)
		}
		if strings.Contains(string(evs[0].Data), secret) || !json.Valid(evs[0].Data) {
			t.Fatalf("stored data %s leaks the secret or is not JSON", evs[0].Data)
		}
	})
}

// A database that cannot be reached makes Emit return an error, which the
// caller logs; it does not hang.
func TestStoreEmitter_FailureIsReturned(t *testing.T) {
	st, err := pg.Open(context.Background(), pgtest.DB(t), "host-a")
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := eventlog.NewStoreEmitter(st, "tester").Emit("test.event", nil); err == nil {
		t.Fatal("emit into a closed store reported success")
	}
}
