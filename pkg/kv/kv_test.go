package kv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store/files"
	"github.com/kingdom-dev/kingdom/pkg/store/pg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The files store keeps every value in the file the roles always used.
func TestFilesStore_Paths(t *testing.T) {
	l := layout.New(t.TempDir())
	st, err := files.Open(l, "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := kv.OnStore(st)
	ctx := t.Context()
	cases := []struct{ ns, key, path string }{
		{kv.NSPauses, kv.KeyKingdom, "state/king/paused.json"},
		{kv.NSPauses, kv.KeyEngines, "state/king/engine-pause.json"},
		{kv.NSCancelled, "task-20261121-001", "state/king/cancelled/task-20261121-001.json"},
		{kv.NSControl, "ctl-1-ab", "state/king/control/ctl-1-ab.json"},
		{kv.NSReplies, "ctl-1-ab", "state/king/control/replies/ctl-1-ab.json"},
		{kv.NSSequences, kv.KeyTaskSeq, "state/king/task-seq"},
		{kv.NSSequences, kv.KeyMsgSeq, "state/king/msg-seq"},
		{kv.NSEnvoy, kv.KeyMappings, "state/envoy/thread-mappings.json"},
		{kv.NSEnvoy, kv.KeyAwaiting, "state/envoy/awaiting-responses.json"},
		{kv.NSEnvoy, kv.KeyConversations, "state/envoy/conversation-threads.json"},
		{kv.NSEnvoy, kv.KeyDeliveries, "state/envoy/deliveries.json"},
		{"spend-2026-11-21", "ab12", "state/king/spend/2026-11-21/ab12.json"},
		{kv.NSResults, "task-20261121-001", "state/results/task-20261121-001.json"},
		{kv.NSCheckpoints, "task-20261121-001", "state/results/task-20261121-001-checkpoint.json"},
		{kv.NSWaits, kv.KeyKing, "state/king/waits.json"},
	}
	for _, c := range cases {
		v := []byte(c.ns + "/" + c.key + "\n")
		if err := s.Put(ctx, c.ns, c.key, v); err != nil {
			t.Fatalf("put %s/%s: %v", c.ns, c.key, err)
		}
		path := filepath.Join(l.Base, c.path)
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(b, v) {
			t.Fatalf("%s/%s: file %s holds %q, %v; want %q", c.ns, c.key, c.path, b, err, v)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", c.path, fi.Mode().Perm())
		}
	}
	// A reply is not a request, nor an attempt's raw result a final one.
	os.WriteFile(l.ResultRaw("task-20261121-001"), []byte("{}"), 0o600)
	for ns, want := range map[string]int{kv.NSControl: 1, kv.NSReplies: 1, kv.NSResults: 1, kv.NSCheckpoints: 1, kv.NSPauses: 2, kv.NSEnvoy: 4} {
		m, err := s.List(ctx, ns)
		if err != nil || len(m) != want {
			t.Errorf("list %s: %d entries (%v), want %d", ns, len(m), err, want)
		}
	}
	for _, bad := range [][2]string{{"../x", "x"}, {kv.NSControl, "../x"}, {kv.NSPauses, ""}} {
		if err := s.Put(ctx, bad[0], bad[1], []byte("x")); err == nil {
			t.Errorf("put %s/%s accepted", bad[0], bad[1])
		}
	}
	// A key the roles' files have no place for, or another namespace,
	// lives under state/store/kv/.
	if err := s.Put(ctx, "other", "x", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(l.Base, "state/store/kv/other/x")); err != nil {
		t.Errorf("another namespace: %v", err)
	}
}

func TestFilesStore_Contract(t *testing.T) { contract(t, kv.OnStore(openFiles(t))) }

func TestPostgres_Contract(t *testing.T) { contract(t, kv.OnStore(openPG(t, pgtest.DB(t)))) }

// Two writers of task-seq each take 200 numbers: all 400 are distinct.
func TestFilesStore_ConcurrentUpdate(t *testing.T) {
	l := layout.New(t.TempDir())
	open := func() kv.KV {
		st, err := files.Open(l, "test-host")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return kv.OnStore(st)
	}
	concurrent(t, open(), open())
}

func TestPostgres_ConcurrentUpdate(t *testing.T) {
	dsn := pgtest.DB(t)
	concurrent(t, kv.OnStore(openPG(t, dsn)), kv.OnStore(openPG(t, dsn)))
}

func openFiles(t *testing.T) *files.Store {
	st, err := files.Open(layout.New(t.TempDir()), "test-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func openPG(t *testing.T, dsn string) *pg.Store {
	st, err := pg.Open(t.Context(), dsn, "host-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func contract(t *testing.T, s kv.KV) {
	ctx := t.Context()
	ns, key := kv.NSCancelled, "task-20261121-001"
	if _, err := s.Get(ctx, ns, key); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("get of a missing key: %v, want ErrNotFound", err)
	}
	for _, v := range []string{"one", "two"} {
		if err := s.Put(ctx, ns, key, []byte(v)); err != nil {
			t.Fatal(err)
		}
		if b, err := s.Get(ctx, ns, key); err != nil || string(b) != v {
			t.Fatalf("get after put %q: %q, %v", v, b, err)
		}
	}
	if err := s.PutAll(ctx, ns, map[string][]byte{"task-20261121-002": []byte("b"), "task-20261121-003": []byte("c")}); err != nil {
		t.Fatal(err)
	}
	m, err := s.List(ctx, ns)
	if err != nil || len(m) != 3 || string(m["task-20261121-003"]) != "c" || string(m[key]) != "two" {
		t.Fatalf("list: %q, %v", m, err)
	}
	if err := s.Delete(ctx, ns, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, ns, key); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := s.Delete(ctx, ns, key); err != nil {
		t.Fatalf("delete of a missing key: %v", err)
	}
	if err := s.Put(ctx, ns, "../x", []byte("x")); err == nil {
		t.Fatal("an unsafe key was accepted")
	}

	// Update: create, change, refuse (nothing changes), delete.
	seq := kv.NSSequences
	var saw [][]byte
	step := func(v []byte, ferr error) error {
		return s.Update(ctx, seq, kv.KeyTaskSeq, func(old []byte) ([]byte, error) {
			saw = append(saw, old)
			return v, ferr
		})
	}
	if err := step([]byte("20261121:1\n"), nil); err != nil {
		t.Fatal(err)
	}
	if err := step([]byte("20261121:2\n"), nil); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := step([]byte("lost"), boom); !errors.Is(err, boom) {
		t.Fatalf("update whose fn fails: %v", err)
	}
	if b, _ := s.Get(ctx, seq, kv.KeyTaskSeq); string(b) != "20261121:2\n" {
		t.Fatalf("a failed update changed the value to %q", b)
	}
	if err := step(nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, seq, kv.KeyTaskSeq); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("update returning nil did not delete: %v", err)
	}
	want := []string{"", "20261121:1\n", "20261121:2\n", "20261121:2\n"}
	if len(saw) != len(want) {
		t.Fatalf("update saw %q", saw)
	}
	for i := range want {
		if string(saw[i]) != want[i] {
			t.Fatalf("update %d saw %q, want %q", i, saw[i], want[i])
		}
	}

	// JSON helpers write what atomicfile.WriteJSON always wrote.
	if err := kv.PutJSON(ctx, s, kv.NSPauses, kv.KeyKingdom, map[string]string{"by": "alice"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.Get(ctx, kv.NSPauses, kv.KeyKingdom); string(b) != "{\n  \"by\": \"alice\"\n}\n" {
		t.Fatalf("PutJSON wrote %q", b)
	}
	var got map[string]string
	if err := kv.GetJSON(ctx, s, kv.NSPauses, kv.KeyKingdom, &got); err != nil || got["by"] != "alice" {
		t.Fatalf("GetJSON: %v, %v", got, err)
	}
}

// concurrent runs two writers (separate KVs: separate open directories,
// separate connection pools) that increment task-seq 200 times each.
func concurrent(t *testing.T, a, b kv.KV) {
	const each = 200
	ctx := t.Context()
	var (
		mu   sync.Mutex
		seen = map[int]bool{}
		wg   sync.WaitGroup
		errs = make(chan error, 2)
	)
	for _, s := range []kv.KV{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				var n int
				err := s.Update(ctx, kv.NSSequences, kv.KeyTaskSeq, func(old []byte) ([]byte, error) {
					n = 0
					if old != nil {
						_, num, _ := strings.Cut(strings.TrimSpace(string(old)), ":")
						var err error
						if n, err = strconv.Atoi(num); err != nil {
							return nil, fmt.Errorf("task-seq %q: %w", old, err)
						}
					}
					n++
					return fmt.Appendf(nil, "20261121:%d\n", n), nil
				})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if seen[n] {
					errs <- fmt.Errorf("number %d issued twice", n)
				}
				seen[n] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != 2*each {
		t.Fatalf("%d distinct numbers, want %d", len(seen), 2*each)
	}
	if v, err := a.Get(context.Background(), kv.NSSequences, kv.KeyTaskSeq); err != nil || string(v) != "20261121:400\n" {
		t.Fatalf("task-seq ends at %q (%v), want 20261121:400", v, err)
	}
}
