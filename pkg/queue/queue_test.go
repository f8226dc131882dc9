package queue_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/eventlog"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/queue"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
)

// The test binary doubles as a helper process: KINGDOM_QUEUE_HELPER selects
// the role it plays.
func TestMain(m *testing.M) {
	switch os.Getenv("KINGDOM_QUEUE_HELPER") {
	case "claim":
		helperClaim()
		return
	case "writer":
		helperWriter()
		return
	}
	os.Exit(pgtest.Main(m))
}

// newTree returns a fresh files store's tasks queue.
func newTree(t testing.TB) (layout.Layout, *queue.Queue) {
	t.Helper()
	l := layout.New(t.TempDir())
	return l, onFiles(t, l, layout.QTasks)
}

// onFiles returns the queue of kind in the files store of l, closed with
// the test.
func onFiles(t testing.TB, l layout.Layout, kind string) *queue.Queue {
	t.Helper()
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return queue.OnStore(st, l, kind, eventlog.NewStoreEmitter(st, "test"), "test-host")
}

// helperQueue is the queue of kind a helper process opens.
func helperQueue(kind string) *queue.Queue {
	l := layout.New(os.Getenv("KINGDOM_BASE_DIR"))
	st, err := files.Open(l, "test-host")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return queue.OnStore(st, l, kind, nil, "test-host")
}

type item struct {
	ID        string `json:"id"`
	Priority  string `json:"priority"`
	CreatedAt string `json:"created_at"`
}

// MarshalJSON writes item as a schema-valid task (List rejects anything
// else), defaulting what the test leaves empty.
func (it item) MarshalJSON() ([]byte, error) {
	t := doc.Task{ID: it.ID, EventID: "evt-test", TargetGeneral: "gen-test", Type: "test",
		Priority: it.Priority, CreatedAt: it.CreatedAt, Status: doc.TaskPending}
	if t.Priority == "" {
		t.Priority = doc.PriorityNormal
	}
	if t.CreatedAt == "" {
		t.CreatedAt = "2026-11-21T10:00:00Z"
	}
	return json.Marshal(t)
}

func helperClaim() {
	q := helperQueue(layout.QTasks)
	var won []string
	for {
		idl, err := q.IDs(layout.Pending)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if len(idl) == 0 {
			break
		}
		for _, id := range idl {
			err := q.Claim(layout.Pending, layout.InProgress, id)
			switch {
			case err == nil:
				won = append(won, id)
			case errors.Is(err, queue.ErrTaken):
			default:
				fmt.Fprintln(os.Stderr, "unexpected:", err)
				os.Exit(1)
			}
		}
	}
	fmt.Println(strings.Join(won, "\n"))
}

func TestQueue_ClaimIsExclusiveAcrossProcesses(t *testing.T) {
	l, q := newTree(t)
	const n = 400
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("task-20261121-%04d", i)
		if err := q.PutOnce(layout.Pending, id, item{ID: id, Priority: "normal"}); err != nil {
			t.Fatal(err)
		}
	}
	const procs = 8
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*strings.Builder, procs)
	for i := range cmds {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), "KINGDOM_QUEUE_HELPER=claim", "KINGDOM_BASE_DIR="+l.Base)
		outs[i] = &strings.Builder{}
		c.Stdout = outs[i]
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = c
	}
	seen := map[string]int{}
	winners := 0
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("claimer %d: %v", i, err)
		}
		got := 0
		for _, id := range strings.Fields(outs[i].String()) {
			seen[id]++
			got++
		}
		if got > 0 {
			winners++
		}
	}
	if len(seen) != n {
		t.Fatalf("claimed %d distinct ids, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("%s claimed %d times", id, c)
		}
	}
	if got := q.Count(layout.InProgress); got != n {
		t.Errorf("in_progress has %d files, want %d", got, n)
	}
	if got := q.Count(layout.Pending); got != 0 {
		t.Errorf("pending has %d files left", got)
	}
	t.Logf("%d of %d processes won at least one claim", winners, procs)
}

func TestQueue_ClaimLoserGetsErrTaken(t *testing.T) {
	_, q := newTree(t)
	q.PutOnce(layout.Pending, "task-1", item{ID: "task-1"})
	if err := q.Claim(layout.Pending, layout.InProgress, "task-1"); err != nil {
		t.Fatal(err)
	}
	err := q.Claim(layout.Pending, layout.InProgress, "task-1")
	if !errors.Is(err, queue.ErrTaken) {
		t.Fatalf("second claim: got %v, want ErrTaken", err)
	}
}

func TestQueue_PutOnceRefusesIDInAnyState(t *testing.T) {
	_, q := newTree(t)
	if err := q.PutOnce(layout.Completed, "task-9", item{ID: "task-9"}); err != nil {
		t.Fatal(err)
	}
	err := q.PutOnce(layout.Pending, "task-9", item{ID: "task-9"})
	if !errors.Is(err, queue.ErrExists) {
		t.Fatalf("got %v, want ErrExists", err)
	}
	if q.Exists(layout.Pending, "task-9") {
		t.Fatal("pending copy was written")
	}
}

func TestQueue_ListOrdersByPriorityThenAge(t *testing.T) {
	_, q := newTree(t)
	base := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	put := func(id, prio string, age int) {
		q.PutOnce(layout.Pending, id, item{ID: id, Priority: prio, CreatedAt: base.Add(time.Duration(age) * time.Minute).Format(time.RFC3339)})
	}
	put("task-20261121-007", "low", 0)
	put("task-20261121-006", "normal", 5)
	put("task-20261121-002", "high", 9)
	put("task-20261121-003", "normal", 1)
	put("task-20261121-001", "high", 2)
	put("task-20261121-005", "normal", 3)
	put("task-20261121-004", "normal", 3)
	es, err := q.List(layout.Pending)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.ID)
	}
	want := []string{"task-20261121-001", "task-20261121-002", "task-20261121-003", "task-20261121-004", "task-20261121-005", "task-20261121-006", "task-20261121-007"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("order\n got %v\nwant %v", got, want)
	}
}

func TestQueue_PoisonFilesAreRejectedAndQueueFlows(t *testing.T) {
	l, q := newTree(t)
	dir := q.Dir(layout.Pending)
	os.WriteFile(filepath.Join(dir, "broken.json"), []byte("{not json"), 0o600)
	os.WriteFile(filepath.Join(dir, "bad id!.json"), []byte(`{"id":"x"}`), 0o600)
	os.WriteFile(filepath.Join(dir, "html.json"), []byte("<html><body>502</body></html>"), 0o600)
	os.WriteFile(filepath.Join(dir, ".tmp-x-1-ab"), []byte("partial"), 0o600)
	big := make([]byte, queue.DefaultMaxSize+10)
	for i := range big {
		big[i] = ' '
	}
	copy(big, `{"id":"big"}`)
	os.WriteFile(filepath.Join(dir, "big.json"), big, 0o600)
	q.PutOnce(layout.Pending, "task-20261121-100", item{ID: "task-20261121-100", Priority: "normal"})

	es, err := q.List(layout.Pending)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].ID != "task-20261121-100" {
		t.Fatalf("listed %v, want only the good task", es)
	}
	rej := q.Dir(layout.Rejected)
	for name, want := range map[string]string{
		"broken.json": "not valid JSON", "bad id!.json": "unsafe id", "html.json": "not valid JSON", "big.json": "too large",
	} {
		if _, err := os.Stat(filepath.Join(rej, name)); err != nil {
			t.Errorf("%s not in rejected/: %v", name, err)
			continue
		}
		reason, err := os.ReadFile(filepath.Join(rej, name+".reason"))
		if err != nil || !strings.Contains(string(reason), want) {
			t.Errorf("%s reason = %q, %v; want it to mention %q", name, reason, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".tmp-x-1-ab")); err != nil {
		t.Error("dot-temp should be ignored, not moved")
	}
	// system.file_rejected emitted for each.
	b, _ := os.ReadFile(l.EventsLog())
	if got := strings.Count(string(b), "system.file_rejected"); got != 4 {
		t.Errorf("system.file_rejected lines = %d, want 4", got)
	}
	// The queue keeps flowing.
	if err := q.Claim(layout.Pending, layout.InProgress, "task-20261121-100"); err != nil {
		t.Fatal(err)
	}
}

func TestQueue_UnsafeIDNeverBecomesAPath(t *testing.T) {
	_, q := newTree(t)
	for _, id := range []string{"../escape", "a/b", "", ".hidden", "a..b", strings.Repeat("x", 201), "sp ace"} {
		if err := q.PutOnce(layout.Pending, id, item{}); err == nil {
			t.Errorf("PutOnce(%q) accepted", id)
		}
		if err := q.Claim(layout.Pending, layout.InProgress, id); err == nil {
			t.Errorf("Claim(%q) accepted", id)
		}
	}
}

// helperWriter writes queue files in a loop until killed.
func helperWriter() {
	q := helperQueue(layout.QEvents)
	payload := strings.Repeat("x", 64<<10) // 64 KiB: writes take a while
	fmt.Println("writing")
	for i := 0; ; i++ {
		id := fmt.Sprintf("evt-%d-%d", os.Getpid(), i)
		if q.Put(layout.Pending, id, doc.Event{ID: id, Type: "test", Source: doc.SourceInbox, Payload: map[string]any{"text": payload},
			Priority: doc.PriorityNormal, CreatedAt: "2026-11-21T10:00:00Z", Status: doc.EventPending}) == nil && i == 0 {
			fmt.Println("wrote")
		}
	}
}

func TestQueue_SIGKILLedWriterLeavesNoPartialFile(t *testing.T) {
	l := layout.New(t.TempDir())
	q := onFiles(t, l, layout.QEvents)
	kills := 100
	if testing.Short() {
		kills = 20
	}
	for i := 0; i < kills; i++ {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), "KINGDOM_QUEUE_HELPER=writer", "KINGDOM_BASE_DIR="+l.Base)
		out, _ := c.StdoutPipe()
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill only once the writer is writing, at a varying moment after
		// that (real time is the point: the kill must land mid-write).
		buf := make([]byte, 8)
		if _, err := io.ReadAtLeast(out, buf, 7); err != nil {
			t.Fatalf("writer never started: %v", err)
		}
		if i == 0 {
			// The first writer is killed only after a whole file, so the
			// run proves something however slow the machine is.
			if _, err := io.ReadAtLeast(out, buf[:6], 6); err != nil {
				t.Fatalf("the first writer never wrote a file: %v", err)
			}
		}
		time.Sleep(time.Duration(1+(i*7)%20) * time.Millisecond)
		c.Process.Signal(syscall.SIGKILL)
		c.Wait()
	}
	ents, _ := os.ReadDir(q.Dir(layout.Pending))
	var temps, whole int
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			temps++
			continue
		}
		b, err := os.ReadFile(filepath.Join(q.Dir(layout.Pending), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if len(b) == 0 || json.Unmarshal(b, &v) != nil {
			t.Fatalf("partial or empty file visible: %s (%d bytes)", e.Name(), len(b))
		}
		whole++
	}
	es, err := q.List(layout.Pending)
	if err != nil || len(es) != whole {
		t.Fatalf("List = %d entries, %v; want %d", len(es), err, whole)
	}
	if q.Count(layout.Rejected) != 0 {
		t.Fatal("a file was rejected: a partial write became visible")
	}
	// Dead writers' temps are swept by age.
	swept, _ := atomicfile.SweepOldTemps(q.Dir(layout.Pending), 0, time.Now().Add(time.Second))
	if swept != temps {
		t.Errorf("swept %d temps, want %d", swept, temps)
	}
	t.Logf("%d kills: %d whole files, %d leftover temps swept", kills, whole, temps)
	if whole == 0 {
		t.Fatal("no file was ever written: the kills proved nothing")
	}
}

func TestQueue_FIFOAndSymlinkAreRejectedNotFollowed(t *testing.T) {
	_, q := newTree(t)
	dir := q.Dir(layout.Pending)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret.json")
	os.WriteFile(secret, []byte(`{"id":"secret"}`), 0o600)
	os.Symlink(secret, filepath.Join(dir, "link.json"))
	q.PutOnce(layout.Pending, "task-20261121-100", item{ID: "task-20261121-100"})
	es, err := q.List(layout.Pending) // must not block on the FIFO
	if err != nil || len(es) != 1 || es[0].ID != "task-20261121-100" {
		t.Fatalf("List = %v, %v; want only good", es, err)
	}
	for _, n := range []string{"fifo.json", "link.json"} {
		if _, err := os.Lstat(filepath.Join(q.Dir(layout.Rejected), n)); err != nil {
			t.Errorf("%s not rejected: %v", n, err)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != `{"id":"secret"}` {
		t.Error("the symlink target was touched")
	}
}
