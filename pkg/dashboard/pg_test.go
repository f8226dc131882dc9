package dashboard

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func openPG(t *testing.T, host string) *pg.Store {
	t.Helper()
	st, err := pg.Open(context.Background(), pgtest.DB(t), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// In PostgreSQL mode the stream reads the store's event log: a client that
// reconnects with the last id it saw gets exactly the events after it.
func TestEvents_PG_LastEventIDResumesTheStoreLog(t *testing.T) {
	st := openPG(t, "host-a")
	em := eventlog.NewStoreEmitter(st, "king")
	em.Emit("system.startup", nil) // history before the client came: not replayed
	_, url := startServer(t, Options{Layout: newBase(t), Poll: 20 * time.Millisecond, Store: st})

	c := openSSE(t, url+"/api/v1/events", "")
	c.WaitComment(t, "kingdom events from")
	for i := 0; i < 10; i++ {
		em.Emit("task.created", map[string]int{"n": i})
	}
	first := readN(t, c, 10)
	c.Close()
	for i := 10; i < 20; i++ {
		em.Emit("task.created", map[string]int{"n": i})
	}
	c2 := openSSE(t, url+"/api/v1/events", first[len(first)-1].ID)
	second := readN(t, c2, 10)
	for i, ev := range append(first, second...) {
		if n := eventN(t, ev.Data); n != i {
			t.Fatalf("event %d carries n=%d (id %s): not exactly once, in order", i, n, ev.ID)
		}
	}

	// ?tail=3 starts three events before the end of the log.
	c3 := openSSE(t, url+"/api/v1/events?tail=3", "")
	for i, ev := range readN(t, c3, 3) {
		if n := eventN(t, ev.Data); n != 17+i {
			t.Errorf("tail event %d: n=%d, want %d", i, n, 17+i)
		}
	}
	if code, body := get(t, url+"/api/v1/events", "Last-Event-ID", "not-a-cursor"); code != 400 {
		t.Errorf("a bad Last-Event-ID: %d %s, want 400", code, body)
	}
}

// The state, and /metrics, show every host and who leads each leader role.
func TestState_PG_ShowsHostsAndLeaders(t *testing.T) {
	ctx := context.Background()
	st := openPG(t, "host-a")
	reg := st
	started := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	for _, h := range []string{"host-a", "host-b"} {
		if err := reg.RenewHost(ctx, h, "v1", started); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Pool().Exec(ctx, "UPDATE hosts SET renewed_at = now() - interval '10 minutes' WHERE host_id='host-b'"); err != nil {
		t.Fatal(err)
	}
	lease, err := st.Lead(ctx, "king")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	cfg := config.DefaultStore()
	cfg.HostID = "host-a"
	_, url := startServer(t, Options{Layout: newBase(t), Store: st, Cluster: &cfg})

	code, body := get(t, url+"/api/v1/state")
	if code != 200 {
		t.Fatalf("state: %d %s", code, body)
	}
	if err := schema.Validate(doc.KindState, []byte(body)); err != nil {
		t.Fatalf("state does not match schemas/state.json: %v\n%s", err, body)
	}
	var s State
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	c := s.Cluster
	if c == nil || len(c.Hosts) != 2 {
		t.Fatalf("cluster = %+v, want two hosts", c)
	}
	if a, b := c.Hosts[0], c.Hosts[1]; a.ID != "host-a" || !a.Alive || b.ID != "host-b" || b.Alive || b.RenewalAgeSeconds < 600 {
		t.Errorf("hosts = %+v, want host-a alive, host-b silent 10 minutes", c.Hosts)
	}
	if len(c.Leaders) != 1 || c.Leaders[0].Role != "king" || c.Leaders[0].Host != "host-a" || c.Leaders[0].Epoch != 1 {
		t.Errorf("leaders = %+v, want king led by host-a at epoch 1", c.Leaders)
	}

	_, m := get(t, url+"/metrics")
	for _, want := range []string{
		`kingdom_host_up{host="host-a"} 1`,
		`kingdom_host_up{host="host-b"} 0`,
		`kingdom_leader_epoch{host="host-a",role="king"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestState_NoClusterSourceNoCluster(t *testing.T) {
	_, url := startServer(t, Options{Layout: newBase(t)})
	if _, body := get(t, url+"/api/v1/state"); strings.Contains(body, `"cluster"`) {
		t.Errorf("file-mode state carries a cluster: %s", body)
	}
}
