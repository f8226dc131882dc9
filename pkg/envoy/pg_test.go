package envoy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/internal/testkit/slackfake"
	"github.com/kingdom-dev/kingdom/pkg/clock"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/store"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// pgCluster is two hosts' envoys on one database and one Slack.
type pgCluster struct {
	t    *testing.T
	fake *slackfake.Server
	msgs *queue.Queue // the shared messages queue
	a, b *pgEnvoy
}

type pgEnvoy struct {
	host  string
	st    *pg.Store
	e     *Envoy
	lease store.Lease
}

func newPGCluster(t *testing.T, console bool) *pgCluster {
	t.Helper()
	t.Setenv(config.EnvDefaultChannel, "")
	dsn := pgtest.DB(t)
	c := &pgCluster{t: t}
	bot := ""
	if !console {
		c.fake = slackfake.New()
		t.Cleanup(c.fake.Close)
		bot = "xoxb-test-bot-token"
	}
	// The fake's ts count up from this time: a look-up in Slack since a
	// record's started_at must see them, as real ts are real times.
	clk := clock.NewFake(time.Unix(1700000000, 0))
	mk := func(host string) *pgEnvoy {
		st, err := pg.Open(context.Background(), dsn, host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		l := layout.New(t.TempDir())
		if err := l.Ensure(); err != nil {
			t.Fatal(err)
		}
		cfg := config.DefaultEnvoy()
		cfg.Slack.DefaultChannel = "CDEFAULT"
		if c.fake != nil {
			cfg.Slack.APIURL = c.fake.APIURL()
		}
		e, err := New(Options{Layout: l, Config: cfg, Clock: clk, BotToken: bot, Store: st, Host: host,
			Stdout: &strings.Builder{}, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
		if err != nil {
			t.Fatal(err)
		}
		return &pgEnvoy{host: host, st: st, e: e}
	}
	c.a, c.b = mk("host-a"), mk("host-b")
	c.msgs = queue.OnStore(c.a.st, layout.New(t.TempDir()), layout.QMessages, nil, "test")
	return c
}

// lead makes h the envoy's leader (what the runner does on that host).
func (c *pgCluster) lead(h *pgEnvoy) {
	c.t.Helper()
	l, err := h.st.Lead(context.Background(), "envoy")
	if err != nil {
		c.t.Fatalf("%s lead: %v", h.host, err)
	}
	h.lease = l
	c.t.Cleanup(func() { l.Release() })
	h.e.UseLease(l)
}

// handOver moves the leadership from one host to the other, as a failover
// does: the old lease goes, the other host leads with the next epoch.
func (c *pgCluster) handOver(from, to *pgEnvoy) {
	c.t.Helper()
	if err := from.lease.Release(); err != nil {
		c.t.Fatal(err)
	}
	c.lead(to)
}

func (c *pgCluster) put(m map[string]any) {
	c.t.Helper()
	seq++
	m["created_at"] = doc.FormatTime(t0.Add(time.Duration(seq) * time.Second))
	if err := c.msgs.Put(layout.Pending, m["id"].(string), m); err != nil {
		c.t.Fatal(err)
	}
}

func (c *pgCluster) state(id string) string {
	s, _ := c.msgs.Find(id)
	return s
}

// posts returns the chat.postMessage calls whose text names message id.
func (c *pgCluster) posts(id string) []slackfake.Call {
	var out []slackfake.Call
	for _, call := range c.fake.Calls("chat.postMessage") {
		if strings.Contains(call.Form.Get("text"), "content of "+id) {
			out = append(out, call)
		}
	}
	return out
}

func (c *pgCluster) records() map[string][]byte {
	c.t.Helper()
	v, err := c.a.st.Values(context.Background(), store.NSDeliveries)
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}

const pgTask = "task-20261121-007"

// A thread's start, update and final notification: leadership moves to
// the other host right after the update was posted and recorded, before
// it left pending/. The deposed envoy's later writes are refused; the new
// leader finishes the update without posting it again, posts the final
// into the same thread, and each message reaches Slack exactly once.
func TestPG_PostedOnceWhenLeadershipMovesBetweenPosts(t *testing.T) {
	c := newPGCluster(t, false)
	start, update, final := "msg-007-start", "msg-007-update", "msg-007-final"
	c.put(message(start, "thread_start", pgTask))
	c.put(message(update, "thread_update", pgTask))
	fin := message(final, "notification", pgTask)
	fin["final"] = "done"
	c.put(fin)

	c.lead(c.a)
	c.a.e.afterStep = func(step, id string) {
		if step == "recorded" && id == update {
			c.handOver(c.a, c.b)
		}
	}
	err := c.a.e.Tick(context.Background())
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed envoy's tick: %v, want store.ErrFenced", err)
	}
	if s := c.state(update); s != layout.Pending {
		t.Fatalf("the update in %q after its envoy was deposed, want pending", s)
	}
	if n := len(c.posts(final)); n != 0 {
		t.Fatalf("the deposed envoy posted the final (%d posts)", n)
	}

	if err := c.b.e.Tick(context.Background()); err != nil {
		t.Fatalf("new leader's tick: %v", err)
	}
	startTS := ""
	for _, id := range []string{start, update, final} {
		posts := c.posts(id)
		if len(posts) != 1 {
			t.Fatalf("%s posted %d times, want once", id, len(posts))
		}
		if s := c.state(id); s != layout.Sent {
			t.Errorf("%s in %q, want sent", id, s)
		}
		if id == start {
			startTS = c.sentTS(id)
			continue
		}
		if got := posts[0].Form.Get("thread_ts"); got != startTS {
			t.Errorf("%s posted in thread %q, want the start's %q", id, got, startTS)
		}
	}
	if startTS == "" {
		t.Fatal("the start's ts is not in its sent document")
	}
	// Everything settled: no delivery record is left, and the final
	// cleared the task's thread mapping.
	if recs := c.records(); len(recs) != 0 {
		t.Errorf("delivery records left: %v", recKeys(recs))
	}
	var mappings map[string]ThreadMapping
	if err := kv.GetJSON(context.Background(), kv.OnStore(c.a.st), kv.NSEnvoy, kv.KeyMappings, &mappings); err != nil && !errors.Is(err, kv.ErrNotFound) {
		t.Fatal(err)
	}
	if _, ok := mappings[pgTask]; ok {
		t.Errorf("thread mapping of %s left after its final: %v", pgTask, mappings)
	}
}

// sentTS is the Slack ts recorded in message id's sent document.
func (c *pgCluster) sentTS(id string) string {
	c.t.Helper()
	b, err := c.msgs.Read(layout.Sent, id)
	if err != nil {
		c.t.Fatal(err)
	}
	var raw struct {
		Slack struct{ TS string } `json:"slack"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		c.t.Fatal(err)
	}
	return raw.Slack.TS
}

func recKeys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A leader dies mid-post: its record says "posting", with no ts. The post
// did reach Slack: the new leader finds it in the thread
// (conversations.replies) and does not post again.
func TestPG_PostInDoubtFoundInSlackIsNotPostedAgain(t *testing.T) {
	c := newPGCluster(t, false)
	start, final := "msg-008-start", "msg-008-final"
	c.put(message(start, "thread_start", pgTask))
	fin := message(final, "notification", pgTask)
	fin["final"] = "done"
	c.put(fin)

	c.lead(c.a)
	// Deposed between the begin record and the post: the post still goes
	// out (Slack knows no leases), its record cannot be written.
	c.a.e.afterStep = func(step, id string) {
		if step == "begun" && id == final {
			c.handOver(c.a, c.b)
		}
	}
	if err := c.a.e.Tick(context.Background()); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed envoy's tick: %v, want store.ErrFenced", err)
	}
	if n := len(c.posts(final)); n != 1 {
		t.Fatalf("final posted %d times before the failover, want 1", n)
	}
	var rec deliveryRecord
	if err := json.Unmarshal(c.records()[final], &rec); err != nil || rec.State != recPosting || rec.TS != "" || rec.Host != "host-a" {
		t.Fatalf("record of the final = %+v (%v), want host-a's posting record without ts", rec, err)
	}

	if err := c.b.e.Tick(context.Background()); err != nil {
		t.Fatalf("new leader's tick: %v", err)
	}
	if n := len(c.posts(final)); n != 1 {
		t.Fatalf("final posted %d times, want once", n)
	}
	if len(c.fake.Calls("conversations.replies")) == 0 {
		t.Error("the new leader did not look in the thread")
	}
	if s := c.state(final); s != layout.Sent {
		t.Fatalf("final in %q, want sent", s)
	}
	if got, want := c.sentTS(final), c.posts(final)[0]; got == "" {
		t.Errorf("sent document of the final has no ts (post %v)", want.Form)
	}
	if recs := c.records(); len(recs) != 0 {
		t.Errorf("delivery records left: %v", recKeys(recs))
	}
}

// A leader died after its begin record but before the post left: Slack
// has nothing, so the new leader posts it, once.
func TestPG_PostInDoubtMissingFromSlackIsPostedOnce(t *testing.T) {
	c := newPGCluster(t, false)
	id := "msg-009-report"
	c.put(message(id, "report", ""))
	c.lead(c.a)
	rec := `{"host":"host-a","epoch":1,"started_at":"` + doc.FormatTime(time.Unix(1700000000, 0)) + `","state":"posting"}`
	if err := c.a.st.Update(context.Background(), func(tx store.Tx) error {
		tx.Fence(c.a.lease)
		return tx.Set(store.NSDeliveries, id, []byte(rec))
	}); err != nil {
		t.Fatal(err)
	}
	c.handOver(c.a, c.b)
	if err := c.b.e.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(c.posts(id)); n != 1 {
		t.Fatalf("posted %d times, want once", n)
	}
	if len(c.fake.Calls("conversations.history")) == 0 {
		t.Error("the new leader did not look in the channel before posting")
	}
	if s := c.state(id); s != layout.Sent {
		t.Fatalf("in %q, want sent", s)
	}
	if recs := c.records(); len(recs) != 0 {
		t.Errorf("delivery records left: %v", recKeys(recs))
	}
	// The new leader's next tick posts nothing more.
	if err := c.b.e.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(c.fake.Calls("chat.postMessage")); n != 1 {
		t.Errorf("postMessage calls = %d, want 1", n)
	}
}

// Where Slack cannot be asked (console mode), a post in doubt is not
// repeated: the message is finished as sent, delivery unknown.
func TestPG_PostInDoubtUnknowableIsNotRepeated(t *testing.T) {
	c := newPGCluster(t, true)
	id := "msg-010-report"
	c.put(message(id, "report", ""))
	c.lead(c.b)
	rec := `{"host":"host-a","epoch":1,"started_at":"` + doc.FormatTime(time.Unix(1700000000, 0)) + `","state":"posting"}`
	if err := c.b.st.Update(context.Background(), func(tx store.Tx) error {
		return tx.Set(store.NSDeliveries, id, []byte(rec))
	}); err != nil {
		t.Fatal(err)
	}
	out := c.b.e.poster.(*consolePoster).out.(*strings.Builder)
	if err := c.b.e.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "content of "+id) {
		t.Errorf("a post in doubt was repeated on the console:\n%s", out)
	}
	b, err := c.msgs.Read(layout.Sent, id)
	if err != nil {
		t.Fatalf("not in sent: %v", err)
	}
	if !strings.Contains(string(b), `"delivery": "unknown"`) {
		t.Errorf("sent document does not say the delivery is unknown:\n%s", b)
	}
	if recs := c.records(); len(recs) != 0 {
		t.Errorf("delivery records left: %v", recKeys(recs))
	}
}

// Nothing of the messages queue or the envoy's documents is written
// under the host's base dir in PostgreSQL mode.
func TestPG_NoStateFilesOnTheHost(t *testing.T) {
	c := newPGCluster(t, false)
	c.put(message("msg-011-start", "thread_start", pgTask))
	c.lead(c.a)
	if err := c.a.e.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := c.state("msg-011-start"); s != layout.Sent {
		t.Fatalf("in %q, want sent", s)
	}
	l := c.a.e.l
	for _, dir := range []string{l.QueueState(layout.QMessages, layout.Sent), l.RoleStateDir(layout.RoleEnvoy)} {
		ents, _ := os.ReadDir(dir)
		for _, de := range ents {
			if de.IsDir() {
				continue
			}
			t.Errorf("file written on the host: %s/%s", dir, de.Name())
		}
	}
}
