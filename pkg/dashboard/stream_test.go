package dashboard

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/store"
)

func eventN(t testing.TB, data string) int {
	t.Helper()
	var ev struct {
		Type string         `json:"type"`
		Data map[string]int `json:"data"`
	}
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		t.Fatalf("event data %q: %v", data, err)
	}
	return ev.Data["n"]
}

func readN(t testing.TB, c *sseClient, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	for len(out) < n {
		ev, err := c.Next()
		if err != nil {
			t.Fatalf("after %d events: %v", len(out), err)
		}
		out = append(out, ev)
	}
	return out
}

// A client reads 100 events, disconnects, and reconnects with
// Last-Event-ID while 100 more are appended, across a daily split: it sees
// exactly 200 distinct lines, in order.
func TestEvents_LastEventIDResumesExactlyAcrossTheDailySplit(t *testing.T) {
	l := newBase(t)
	em := emitter(l, "king")
	defer em.Close()
	em.Emit("system.startup", nil) // history before the client came: not replayed
	_, url := startServer(t, Options{Layout: l, Poll: 20 * time.Millisecond})

	c := openSSE(t, url+"/api/v1/events", "")
	c.WaitComment(t, "kingdom events from")
	for i := 0; i < 100; i++ {
		em.Emit("task.created", map[string]int{"n": i})
	}
	first := readN(t, c, 100)
	c.Close()
	last := first[len(first)-1].ID

	// While the client is away: 40 more, the daily split, 20 more in the
	// new events.log.
	for i := 100; i < 140; i++ {
		em.Emit("task.created", map[string]int{"n": i})
	}
	split(t, l, "20261124")
	for i := 140; i < 160; i++ {
		em.Emit("task.created", map[string]int{"n": i})
	}
	c2 := openSSE(t, url+"/api/v1/events", last)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The last 40 arrive while the client follows live.
		for i := 160; i < 200; i++ {
			em.Emit("task.created", map[string]int{"n": i})
		}
	}()
	second := readN(t, c2, 100)
	<-done

	all := append(first, second...)
	seen := map[string]bool{}
	for i, ev := range all {
		if n := eventN(t, ev.Data); n != i {
			t.Fatalf("event %d carries n=%d (want %d): lost, repeated or out of order", i, n, i)
		}
		if seen[ev.ID] {
			t.Fatalf("id %s repeated", ev.ID)
		}
		seen[ev.ID] = true
	}
	if len(seen) != 200 {
		t.Fatalf("got %d distinct events, want 200", len(seen))
	}
	// Nothing more is waiting: the next thing on the stream is whatever
	// comes after the 200th line.
	em.Emit("task.created", map[string]int{"n": 200})
	ev, err := c2.Next()
	if err != nil || eventN(t, ev.Data) != 200 {
		t.Fatalf("after 200: %+v %v", ev, err)
	}
}

// storeEvents reads every event after *cur from the store as the streams
// do (readStore), moving *cur.
func storeEvents(t testing.TB, st store.Store, cur *store.Cursor) []string {
	t.Helper()
	var got []string
	if err := readStore(t.Context(), st, cur, func(line []byte, _ store.Cursor) error {
		got = append(got, string(line))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestEvents_ResumeFollowsSeveralSplitsInDateOrder(t *testing.T) {
	t.Skip("the files store's event reader moves from a finished split to events.log, skipping splits in between (pkg/store/files/events.go)")
	l := newBase(t)
	st := withStore(t, Options{Layout: l}).Store
	em := emitter(l, "king")
	defer em.Close()
	em.Emit("x.a", map[string]int{"n": 0})
	cur, err := storeTail(t.Context(), st, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Three splits while the reader is away, one of them a second split on
	// the same day (events-YYYYMMDD-1.log).
	em.Emit("x.a", map[string]int{"n": 1})
	split(t, l, "20261123")
	em.Emit("x.a", map[string]int{"n": 2})
	split(t, l, "20261124")
	em.Emit("x.a", map[string]int{"n": 3})
	if err := os.Rename(l.EventsLog(), l.LogsDir()+"/events-20261124-1.log"); err != nil {
		t.Fatal(err)
	}
	em.Emit("x.a", map[string]int{"n": 4})
	var got []int
	for _, line := range storeEvents(t, st, &cur) {
		got = append(got, eventN(t, line))
	}
	if fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Fatalf("read %v, want [0 1 2 3 4]", got)
	}
}

func TestEvents_TailAndCorruptAndPartialLines(t *testing.T) {
	l := newBase(t)
	st := withStore(t, Options{Layout: l}).Store
	f, err := os.OpenFile(l.EventsLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	// Two good lines, a corrupt one, a line with a carriage return, a good
	// one, then a half-written line.
	f.WriteString(`{"type":"a","data":{"n":0}}` + "\n" + `{"type":"a","data":{"n":1}}` + "\n" +
		"not json\n" + "{\"type\":\"a\",\r\"data\":{\"n\":9}}\n" + `{"type":"a","data":{"n":2}}` + "\n" + `{"type":"a","da`)
	f.Close()
	cur, err := storeTail(t.Context(), st, 2)
	if err != nil {
		t.Fatal(err)
	}
	// tail=2 counts events: the CR one (re-encoded whole, so an SSE data
	// line never carries a CR) and n=2; the partial line waits.
	got := storeEvents(t, st, &cur)
	if len(got) != 2 || eventN(t, got[0]) != 9 || eventN(t, got[1]) != 2 || strings.Contains(got[0], "\r") {
		t.Fatalf("tail 2 read %q", got)
	}
	var all store.Cursor
	got = storeEvents(t, st, &all)
	if len(got) != 4 {
		t.Fatalf("from the start read %d lines %q, want the 4 good ones", len(got), got)
	}
	// The writer finishes its line: it arrives whole.
	f, _ = os.OpenFile(l.EventsLog(), os.O_WRONLY|os.O_APPEND, 0o600)
	f.WriteString(`ta":{"n":3}}` + "\n")
	f.Close()
	got = storeEvents(t, st, &all)
	if len(got) != 1 || eventN(t, got[0]) != 3 {
		t.Fatalf("after the line was finished read %q", got)
	}
}

func TestEvents_KeepAliveCommentOnAQuietStream(t *testing.T) {
	l := newBase(t)
	_, url := startServer(t, Options{Layout: l, KeepAlive: 30 * time.Millisecond})
	c := openSSE(t, url+"/api/v1/events", "")
	c.WaitComment(t, "keepalive")
}

func TestEvents_RefusesClientsBeyondTheLimit(t *testing.T) {
	l := newBase(t)
	_, url := startServer(t, Options{Layout: l, MaxClients: 2})
	a := openSSE(t, url+"/api/v1/events", "")
	a.WaitComment(t, "kingdom events from")
	b := openSSE(t, url+"/api/v1/events", "")
	b.WaitComment(t, "kingdom events from")
	resp, err := http.Get(url + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "too many event stream clients") ||
		!strings.Contains(string(body), "http.max_clients") {
		t.Fatalf("third client: %d %q, want 503 with a clear reason", resp.StatusCode, body)
	}
	// A slot frees when a client leaves.
	a.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url + "/api/v1/events")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot not freed: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond) // the server notices the closed connection asynchronously
	}
}

func TestEvents_BadLastEventIDIsRefused(t *testing.T) {
	l := newBase(t)
	_, url := startServer(t, Options{Layout: l})
	for _, id := range []string{"abc", "12", "0-5", "1--3"} {
		req, _ := http.NewRequest("GET", url+"/api/v1/events", nil)
		req.Header.Set("Last-Event-ID", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("Last-Event-ID %q: %d, want 400", id, resp.StatusCode)
		}
	}
}

func TestEvents_TruncatedLogStartsOver(t *testing.T) {
	l := newBase(t)
	st := withStore(t, Options{Layout: l}).Store
	os.WriteFile(l.EventsLog(), []byte(`{"type":"a","data":{"n":0}}`+"\n"+`{"type":"a","data":{"n":1}}`+"\n"), 0o600)
	var cur store.Cursor
	var got []int
	for _, line := range storeEvents(t, st, &cur) {
		got = append(got, eventN(t, line))
	}
	// Truncated in place by hand, then written again.
	os.WriteFile(l.EventsLog(), []byte(`{"type":"a","data":{"n":2}}`+"\n"), 0o600)
	for _, line := range storeEvents(t, st, &cur) {
		got = append(got, eventN(t, line))
	}
	if fmt.Sprint(got) != "[0 1 2]" {
		t.Fatalf("read %v, want [0 1 2]", got)
	}
}

func TestEvents_TailGivesTheLastLinesThenFollows(t *testing.T) {
	l := newBase(t)
	em := emitter(l, "king")
	defer em.Close()
	for i := 0; i < 5; i++ {
		em.Emit("task.created", map[string]int{"n": i})
	}
	_, url := startServer(t, Options{Layout: l, Poll: 20 * time.Millisecond})
	c := openSSE(t, url+"/api/v1/events?tail=2", "")
	em.Emit("task.created", map[string]int{"n": 5})
	var got []int
	for _, ev := range readN(t, c, 3) {
		got = append(got, eventN(t, ev.Data))
	}
	if fmt.Sprint(got) != "[3 4 5]" {
		t.Fatalf("tail=2 then live: %v, want [3 4 5]", got)
	}
	for _, bad := range []string{"-1", "x", "1001"} {
		resp, err := http.Get(url + "/api/v1/events?tail=" + bad)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("tail=%s: %d, want 400", bad, resp.StatusCode)
		}
	}
}
