package queue

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// setSyncfs sets the syncfs bounds for one test.
func setSyncfs(t *testing.T, minFiles int, perFile, maxDirty int64) {
	t.Helper()
	m, p, x := syncfsMinFiles, syncfsBytesPerFile, syncfsMaxDirty
	syncfsMinFiles, syncfsBytesPerFile, syncfsMaxDirty = minFiles, perFile, maxDirty
	t.Cleanup(func() { syncfsMinFiles, syncfsBytesPerFile, syncfsMaxDirty = m, p, x })
}

// A batch large enough, on a machine with little dirty page cache, is made
// durable with one syncfs; a small one, or one while too much is dirty, with
// an fdatasync per file. Either way every file is committed whole.
func TestBatch_SyncfsOrFdatasyncByBatchSizeAndDirtyBound(t *testing.T) {
	if _, ok := dirtyBytes(); !ok {
		t.Skip("no /proc/meminfo")
	}
	for _, c := range []struct {
		name            string
		minFiles        int
		maxDirty        int64
		files           int
		wantSyncfsFiles int64
	}{
		{"large batch, bound met", 4, 1 << 62, 6, 6},
		{"small batch", 8, 1 << 62, 6, 0},
		{"too much dirty", 4, -1, 6, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			setSyncfs(t, c.minFiles, 1<<40, c.maxDirty)
			f := newSpareFixture(t)
			_, before := SyncfsStats()
			b := NewBatch()
			for i := range c.files {
				id := fmt.Sprintf("task-%d", i)
				if _, err := b.Create(f.q, layout.Pending, id, map[string]any{"id": id, "v": id}); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			_, after := SyncfsStats()
			if got := after - before; got != c.wantSyncfsFiles {
				t.Errorf("files synced by syncfs %d, want %d", got, c.wantSyncfsFiles)
			}
			for i := range c.files {
				id := fmt.Sprintf("task-%d", i)
				if got := f.read(layout.Pending, id); got != id {
					t.Errorf("%s: %q", id, got)
				}
			}
		})
	}
}

// SyncBatches makes the files of several batches durable at once without
// showing any; each Commit then renames its own, in the order the caller
// commits them, and nothing is synced twice.
func TestSyncBatches_OneSyncThenCommitsInOrder(t *testing.T) {
	setSyncfs(t, 2, 1<<40, 1<<62)
	f := newSpareFixture(t)
	msgs := New(f.l, layout.QMessages, nil)
	msgs.UseSpares(f.sp, MinSpareAge)
	b1, b2 := NewBatch(), NewBatch()
	for _, id := range []string{"task-1", "task-2"} {
		if _, err := b1.Create(f.q, layout.Pending, id, map[string]any{"id": id, "v": id}); err != nil {
			t.Fatal(err)
		}
		if _, err := b2.Create(msgs, layout.Pending, "msg-"+id, map[string]any{"id": "msg-" + id}); err != nil {
			t.Fatal(err)
		}
	}
	calls, files := SyncfsStats()
	if err := SyncBatches(b1, b2); err != nil {
		t.Fatal(err)
	}
	c1, f1 := SyncfsStats()
	if c1-calls != 1 || f1-files != 4 {
		t.Errorf("SyncBatches: %d syncfs calls for %d files, want 1 for 4", c1-calls, f1-files)
	}
	if f.q.Exists(layout.Pending, "task-1") || msgs.Exists(layout.Pending, "msg-task-1") {
		t.Fatal("a file is visible before its batch's Commit")
	}
	if err := b1.Commit(); err != nil {
		t.Fatal(err)
	}
	if !f.q.Exists(layout.Pending, "task-2") || msgs.Exists(layout.Pending, "msg-task-1") {
		t.Fatal("the first Commit did not show exactly its own files")
	}
	if err := b2.Commit(); err != nil {
		t.Fatal(err)
	}
	if c2, _ := SyncfsStats(); c2 != c1 {
		t.Errorf("the Commits synced again (%d more syncfs calls)", c2-c1)
	}
	if !msgs.Exists(layout.Pending, "msg-task-2") || f.read(layout.Pending, "task-1") != "task-1" {
		t.Error("the second Commit lost a file")
	}
	// Nothing of the batches is left in the pool.
	if n := len(f.poolInodes()); n != 0 {
		t.Errorf("pool holds %d files after the commits, want 0", n)
	}
}

// An aborted batch after SyncBatches gives its spares back: nothing shows,
// and the pool reuses them.
func TestSyncBatches_AbortAfterSyncShowsNothing(t *testing.T) {
	f := newSpareFixture(t)
	b := NewBatch()
	b.Create(f.q, layout.Pending, "task-1", map[string]any{"id": "task-1"})
	if err := SyncBatches(b); err != nil {
		t.Fatal(err)
	}
	b.Abort()
	if f.q.Exists(layout.Pending, "task-1") {
		t.Error("an aborted file is visible")
	}
	if f.sp.Len() != 1 {
		t.Errorf("pool %d after the abort, want the staged spare back", f.sp.Len())
	}
}

// Keep takes any file of the filesystem (an inbox file) into the pool; it
// carries a queue write once it rested, and Stats counts what happened.
func TestSpares_KeepTakesAnyFileAndStatsCount(t *testing.T) {
	f := newSpareFixture(t)
	other := filepath.Join(f.l.Base, "inbox", "x.json")
	os.MkdirAll(filepath.Dir(other), 0o700)
	if err := os.WriteFile(other, []byte(`{"type":"demo.hello","payload":{"text":"a long inbox file"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ino := f.ino(other)
	if kept, err := f.sp.Keep(other, MinSpareAge); !kept || err != nil {
		t.Fatalf("Keep: %v %v", kept, err)
	}
	if _, err := os.Lstat(other); !os.IsNotExist(err) {
		t.Fatal("the kept file still has its name")
	}
	if err := f.q.PutOnce(layout.Pending, "task-young", map[string]any{"id": "task-young"}); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(MinSpareAge)
	if err := f.q.PutOnce(layout.Pending, "task-a", map[string]any{"id": "task-a", "v": "a"}); err != nil {
		t.Fatal(err)
	}
	path := f.q.Path(layout.Pending, "task-a")
	if f.ino(path) != ino || f.read(layout.Pending, "task-a") != "a" || f.mode(path) != 0o600 {
		t.Errorf("ino %d (want %d), content %q, mode %v", f.ino(path), ino, f.read(layout.Pending, "task-a"), f.mode(path))
	}
	if kept, _ := f.sp.Keep(filepath.Join(f.l.Base, "inbox", "gone.json"), 0); !kept {
		t.Error("a missing file is not counted as kept")
	}
	if st := f.sp.Stats(); st.Reused != 1 || st.Created != 1 || st.Kept != 1 || st.Freed != 0 || st.CreateTime <= 0 {
		t.Errorf("stats %+v, want 1 reused, 1 created (timed), 1 kept", st)
	}
}

// A pool creates its new files in its fresh directory, made beside the
// pool under a parent flagged top-directory where the filesystem has the
// flag (so the kernel places it in a block group of its own).
func TestSpares_NewFilesAreCreatedInTheFreshDirectory(t *testing.T) {
	f := newSpareFixture(t)
	if err := f.q.PutOnce(layout.Pending, "task-a", map[string]any{"id": "task-a"}); err != nil {
		t.Fatal(err)
	}
	f.q.Remove(layout.Pending, "task-a") // into the pool
	ents, err := os.ReadDir(f.sp.fresh)
	if err != nil || f.sp.fresh != f.sp.dir+"-fresh" {
		t.Fatalf("fresh directory %s: %v", f.sp.fresh, err)
	}
	if len(ents) != 0 {
		t.Errorf("fresh directory holds %v; the created file was renamed into place", ents)
	}
	if f.sp.Stats().Created != 1 || len(f.poolInodes()) != 1 {
		t.Errorf("stats %+v, pool %d", f.sp.Stats(), len(f.poolInodes()))
	}
	d, err := os.Open(filepath.Dir(f.sp.dir))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	flags, err := unix.IoctlGetUint32(int(d.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Skipf("no inode flags here: %v", err)
	}
	if flags&fsTopdirFL == 0 {
		// Wrong only where the filesystem keeps the flag: try it on a
		// directory of our own.
		probe := t.TempDir()
		setTopDir(probe)
		if pd, err := os.Open(probe); err == nil {
			pf, perr := unix.IoctlGetUint32(int(pd.Fd()), unix.FS_IOC_GETFLAGS)
			pd.Close()
			if perr == nil && pf&fsTopdirFL != 0 {
				t.Errorf("the pool's parent lacks FS_TOPDIR_FL (flags %#x) on a filesystem that keeps it", flags)
			}
		}
	}
	// A second pool on the same directory reuses the subdirectory.
	sp2, err := NewSpares(f.sp.dir)
	if err != nil || sp2.fresh != f.sp.fresh {
		t.Errorf("reopened pool: %v, fresh %q", err, sp2.fresh)
	}
}
