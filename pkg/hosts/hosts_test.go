package hosts

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestSelfFence(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const window = 300 * time.Second
	cases := []struct {
		name   string
		lastOK time.Time
		now    time.Time
		want   bool
	}{
		{"never renewed", time.Time{}, t0, true},
		{"just renewed", t0, t0, false},
		{"a moment before the window", t0, t0.Add(window - time.Millisecond), false},
		{"at the window", t0, t0.Add(window), true},
		{"long silent", t0, t0.Add(time.Hour), true},
		{"clock before the renewal", t0, t0.Add(-time.Minute), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := SelfFence(tc.lastOK, tc.now, window); got != tc.want {
				t.Errorf("SelfFence(%v, %v) = %v, want %v", tc.lastOK, tc.now, got, tc.want)
			}
		})
	}
}

func TestTakeoverDue(t *testing.T) {
	listed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const takeover = 600 * time.Second
	cases := []struct {
		name string
		age  time.Duration
		now  time.Time
		want bool
	}{
		{"fresh", 0, listed, false},
		{"silent past the self-fence only", 400 * time.Second, listed, false},
		{"silent exactly takeover", takeover, listed, true},
		{"age plus time since listing reaches takeover", 500 * time.Second, listed.Add(100 * time.Second), true},
		{"age plus time since listing short of it", 500 * time.Second, listed.Add(99 * time.Second), false},
		{"reader's clock stepped back", 599 * time.Second, listed.Add(-time.Hour), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := store.Host{ID: "h", Age: tc.age, ListedAt: listed}
			if got := TakeoverDue(h, tc.now, takeover); got != tc.want {
				t.Errorf("TakeoverDue(age %v, %v after listing) = %v, want %v", tc.age, tc.now.Sub(listed), got, tc.want)
			}
		})
	}
}

func TestRegistry_RenewListForget(t *testing.T) {
	ctx := context.Background()
	st, err := pg.Open(ctx, pgtest.DB(t), "host-a")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg := st
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := reg.RenewHost(ctx, "host-b", "v1", started); err != nil {
		t.Fatal(err)
	}
	if err := reg.RenewHost(ctx, "host-a", "v1", started); err != nil {
		t.Fatal(err)
	}
	restarted := started.Add(time.Hour)
	if err := reg.RenewHost(ctx, "host-a", "v2", restarted); err != nil {
		t.Fatal(err)
	}
	// host-b went silent ten minutes ago (by the database's clock).
	if _, err := st.Pool().Exec(ctx, "UPDATE hosts SET renewed_at = now() - interval '10 minutes' WHERE host_id='host-b'"); err != nil {
		t.Fatal(err)
	}
	list, err := reg.Hosts(ctx, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "host-a" || list[1].ID != "host-b" {
		t.Fatalf("list = %+v, want host-a then host-b", list)
	}
	a, b := list[0], list[1]
	if !a.StartedAt.Equal(restarted) || a.Version != "v2" || !a.Alive || a.Age >= 5*time.Minute {
		t.Errorf("host-a = %+v, want restarted, v2, alive", a)
	}
	if b.Alive || b.Age < 10*time.Minute || b.Age > 11*time.Minute {
		t.Errorf("host-b = %+v, want dead, about 10 minutes old", b)
	}
	now := b.ListedAt
	if !TakeoverDue(b, now, 10*time.Minute) || TakeoverDue(a, now, 10*time.Minute) {
		t.Errorf("takeover due: host-a %v, host-b %v; want only host-b", TakeoverDue(a, now, 10*time.Minute), TakeoverDue(b, now, 10*time.Minute))
	}
	if err := reg.ForgetHost(ctx, "host-b"); err != nil {
		t.Fatal(err)
	}
	if list, _ := reg.Hosts(ctx, 5*time.Minute); len(list) != 1 || list[0].ID != "host-a" {
		t.Errorf("after forget: %+v", list)
	}
	if err := reg.RenewHost(ctx, "../etc", "v1", started); err == nil {
		t.Error("an unsafe host id was renewed")
	}
}
