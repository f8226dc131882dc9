package eventlog_test

import (
	"context"
	"encoding/json"
	"errors"
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

func pollTypes(t *testing.T, r eventlog.Reader) []string {
	t.Helper()
	var got []string
	if _, err := r.Poll(func(ev eventlog.Event) error {
		var d struct{ I int }
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatalf("event data %s: %v", ev.Data, err)
		}
		if ev.Actor != "tester" || ev.Time().IsZero() {
			t.Errorf("event %+v: want actor tester and a timestamp", ev)
		}
		got = append(got, fmt.Sprintf("%s/%d", ev.Type, d.I))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// Events emitted through a store come back in order, each once, to a reader
// that saves its cursor; a reader reopened under the same name resumes
// after the last saved event; fn's error leaves the cursor before its event.
func TestStoreEmitterAndReader_InOrderAndResume(t *testing.T) {
	eachStore(t, func(t *testing.T, open func() store.Store) {
		st := open()
		em := eventlog.NewStoreEmitter(st, "tester")
		for i := 0; i < 5; i++ {
			if err := em.Emit("test.event", map[string]any{"i": i}); err != nil {
				t.Fatal(err)
			}
		}
		r, err := eventlog.OpenStoreReader(st, "consumer")
		if err != nil {
			t.Fatal(err)
		}
		r.Batch = 2 // several store reads per Poll
		got := pollTypes(t, r)
		if strings.Join(got, ",") != "test.event/0,test.event/1,test.event/2,test.event/3,test.event/4" {
			t.Fatalf("first poll: %v", got)
		}
		if err := r.Save(); err != nil {
			t.Fatal(err)
		}
		em.Emit("test.later", map[string]any{"i": 5})
		em.Emit("test.later", map[string]any{"i": 6})

		// A fn error stops at its event and does not move past it.
		stop := errors.New("stop")
		n, err := r.Poll(func(ev eventlog.Event) error { return stop })
		if !errors.Is(err, stop) || n != 0 {
			t.Fatalf("stopped poll = %d, %v", n, err)
		}

		// A restarted consumer (another handle, same name) resumes at the
		// saved cursor: only what came after it.
		r2, err := eventlog.OpenStoreReader(open(), "consumer")
		if err != nil {
			t.Fatal(err)
		}
		if got := pollTypes(t, r2); strings.Join(got, ",") != "test.later/5,test.later/6" {
			t.Fatalf("resumed poll: %v", got)
		}
		if got := pollTypes(t, r2); len(got) != 0 {
			t.Fatalf("a second poll delivered again: %v", got)
		}
		// Another name starts at the beginning.
		r3, _ := eventlog.OpenStoreReader(st, "other")
		if got := pollTypes(t, r3); len(got) != 7 {
			t.Fatalf("a fresh reader got %d events, want 7", len(got))
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

// The file Cursor is a Reader: a consumer switches with its constructor.
func TestCursor_IsAReader(t *testing.T) {
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	em := eventlog.NewEmitter(l.EventsLog(), l.RotateLock(), "tester", nil)
	defer em.Close()
	em.Emit("test.event", map[string]any{"i": 0})
	var r eventlog.Reader
	r, err := eventlog.OpenCursor(l.EventsLog(), l.ChamberlainCursor())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := pollTypes(t, r); strings.Join(got, ",") != "test.event/0" {
		t.Fatalf("poll: %v", got)
	}
}
