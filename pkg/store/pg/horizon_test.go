package pg

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// A row whose transaction commits after a later one's is delivered exactly
// once, after it commits: "id > last" would skip it.
func TestEvents_LateCommitIsNeitherSkippedNorRepeated(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DB(t)
	st, err := Open(ctx, dsn, "host-a")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	txA, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txA.Exec(ctx, "INSERT INTO event_log (type, actor, data) VALUES ('A', 't', '{}')"); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.Emit("B", "t", nil) }); err != nil {
		t.Fatal(err)
	}
	first, err := st.Events(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 0 {
		t.Fatalf("delivered %v while an older transaction is open; want nothing yet", types(first))
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := st.Events(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Type != "A" || got[1].Type != "B" {
		t.Fatalf("after commit: %v, want [A B]", types(got))
	}
	rest, err := st.Events(ctx, got[1].Cursor, 10)
	if err != nil || len(rest) != 0 {
		t.Fatalf("after the last cursor: %v %v, want nothing", types(rest), err)
	}
	// B delivered first (A not yet written), then A commits: A comes once.
	a2, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a2.Exec(ctx, "INSERT INTO event_log (type, actor, data) VALUES ('C', 't', '{}')"); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.Emit("D", "t", nil) }); err != nil {
		t.Fatal(err)
	}
	cur := got[1].Cursor
	var seen []string
	for round := range 3 {
		if round == 1 {
			if err := a2.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		evs, err := st.Events(ctx, cur, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			seen = append(seen, e.Type)
			cur = e.Cursor
		}
	}
	if len(seen) != 2 || seen[0] != "C" || seen[1] != "D" {
		t.Fatalf("resumed reads saw %v, want [C D] once each", seen)
	}
}

func types(evs []store.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// Killing the leader's session reports the lease lost, and a new leader's
// epoch fences the old one's writes.
func TestLease_SessionLossIsReportedAndFenced(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DB(t)
	st, err := Open(ctx, dsn, "host-a")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.LeaseCheck = 50 * time.Millisecond
	l, err := st.Lead(ctx, "envoy")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, err := st.Pool().Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype='advisory' AND classid=$1 AND granted`, lockLeader); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(30 * time.Second): // a deadline, not a measurement
		t.Fatal("lease not reported lost after its session was terminated")
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		tx.Fence(l)
		return tx.Set(store.NSDeliveries, "m-1", []byte("posted"))
	})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("lost leader's write: %v, want ErrFenced", err)
	}
	st2, err := Open(ctx, dsn, "host-b")
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	l2, err := st2.Lead(ctx, "envoy")
	if err != nil {
		t.Fatalf("take over after session loss: %v", err)
	}
	defer l2.Release()
	if l2.Epoch() != l.Epoch()+1 {
		t.Fatalf("epoch %d, want %d", l2.Epoch(), l.Epoch()+1)
	}
}

// A DSN carrying libpq's keepalive parameters connects (pgx would send them
// to the server as settings, which it refuses).
func TestOpen_KeepaliveParamsInDSN(t *testing.T) {
	dsn := pgtest.DB(t) + "&keepalives_idle=5&keepalives_interval=2&keepalives_count=3"
	st, err := Open(context.Background(), dsn, "host-a")
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := Open(context.Background(), pgtest.DB(t)+"&keepalives_idle=soon", "host-a"); err == nil {
		t.Fatal("bad keepalives_idle accepted")
	}
}

// burnXIDs advances the server's transaction counter by n in one
// statement: each loop round writes in a subtransaction of its own, and
// each such write takes a new transaction id.
func burnXIDs(t *testing.T, ctx context.Context, conn *pgx.Conn, n int) {
	t.Helper()
	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE IF NOT EXISTS burn (i int)"); err != nil {
		t.Fatal(err)
	}
	_, err := conn.Exec(ctx, `DO $$ BEGIN
		FOR i IN 1..`+strconv.Itoa(n)+` LOOP
			BEGIN INSERT INTO burn VALUES (i); EXCEPTION WHEN division_by_zero THEN NULL; END;
		END LOOP; END $$`)
	if err != nil {
		t.Fatal(err)
	}
}

// Transaction ids of rows on both sides of a decimal-digit boundary (999 →
// 1000, 9999 → 10000, …) are read in transaction order, each once, one
// page at a time: as text "10000" sorts before "9999", and a cursor that
// follows that order moves backwards.
func TestEvents_CursorCrossesADigitBoundaryOfTransactionIDs(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DB(t)
	st, err := Open(ctx, dsn, "host-a")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var cur uint64
	if err := conn.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&cur); err != nil {
		t.Fatal(err)
	}
	next := uint64(10)
	for next <= cur+3 {
		next *= 10
	}
	// Three events just below the boundary, three just above.
	if gap := int(next - cur - 6); gap > 0 {
		burnXIDs(t, ctx, conn, gap)
	}
	var want []string
	for i := range 6 {
		typ := "e" + strconv.Itoa(i)
		want = append(want, typ)
		if err := st.Emit(ctx, typ, "t", nil); err != nil {
			t.Fatal(err)
		}
	}
	var xids []string
	rows, _ := conn.Query(ctx, "SELECT xid::text FROM event_log ORDER BY id")
	xids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(xids[0]) == len(xids[len(xids)-1]) {
		t.Fatalf("transaction ids %v do not cross a digit boundary; the test cannot tell", xids)
	}
	var got []string
	var c store.Cursor
	for range 20 {
		evs, err := st.Events(ctx, c, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		got = append(got, evs[0].Type)
		c = evs[0].Cursor
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("read %v one at a time (xids %v), want %v each once, in order", got, xids, want)
	}
}
