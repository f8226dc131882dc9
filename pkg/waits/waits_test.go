package waits

import (
	"os"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func sample() Record {
	until := time.Date(2026, 11, 27, 8, 23, 0, 0, time.UTC)
	return Record{UpdatedAt: until.Add(-time.Hour), Waits: []Wait{
		{EventID: "evt-1", Reason: TaskBudget, Detail: "today $9.50 + task $1.00 would pass $10.00", Since: until.Add(-2 * time.Hour)},
		{TaskID: "task-20261127-001", Reason: EnginePause, Detail: "codex usage limit", Since: until.Add(-time.Hour), Until: &until},
	}}
}

// roundTrip writes the sample through s and reads it back.
func roundTrip(t *testing.T, s kv.KV) {
	t.Helper()
	if r, err := Read(t.Context(), s); err != nil || len(r.Waits) != 0 {
		t.Fatalf("missing record: %+v, %v", r, err)
	}
	in := sample()
	if err := Write(t.Context(), s, in); err != nil {
		t.Fatal(err)
	}
	out, err := Read(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	by := out.ByID()
	until := *in.Waits[1].Until
	if by["evt-1"].Reason != TaskBudget || by["task-20261127-001"].Until == nil || !by["task-20261127-001"].Until.Equal(until) {
		t.Errorf("round trip: %+v", out)
	}
}

func TestWaits_FileModeIsStateKingWaitsJSON(t *testing.T) {
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, filesKV(t, l))
	fi, err := os.Stat(Path(l))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record file: %v %v, want mode 0600", fi, err)
	}
	if err := os.WriteFile(Path(l), []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(t.Context(), filesKV(t, l)); err == nil {
		t.Error("a torn record read without an error")
	}
}

// With store.kind postgres the record is a value of the shared store: a
// reader on another host (another connection) sees the king's record.
func TestWaits_OnStoreSharedAcrossHosts(t *testing.T) {
	dsn := pgtest.DB(t)
	open := func(host string) kv.KV {
		st, err := pg.Open(t.Context(), dsn, host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return kv.OnStore(st)
	}
	king, other := open("h1"), open("h2")
	roundTrip(t, king)
	r, err := Read(t.Context(), other)
	if err != nil || len(r.Waits) != 2 || r.Waits[0].EventID != "evt-1" {
		t.Fatalf("record read on h2: %+v, %v", r, err)
	}
}

// filesKV is the key-value of a files store on l, closed with the test.
func filesKV(t *testing.T, l layout.Layout) kv.KV {
	t.Helper()
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return kv.OnStore(st)
}
