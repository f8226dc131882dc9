package queue

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

type spareFixture struct {
	t   *testing.T
	l   layout.Layout
	q   *Queue
	sp  *Spares
	now time.Time
}

func newSpareFixture(t *testing.T) *spareFixture {
	t.Helper()
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	sp, err := NewSpares(filepath.Join(l.Base, "state", "spare"), l.QueueState(layout.QTasks, layout.Pending))
	if err != nil {
		t.Fatal(err)
	}
	f := &spareFixture{t: t, l: l, q: New(l, layout.QTasks, nil), sp: sp, now: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	sp.now = func() time.Time { return f.now }
	f.q.UseSpares(sp, MinSpareAge)
	return f
}

func (f *spareFixture) ino(path string) uint64 {
	f.t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		f.t.Fatal(err)
	}
	return st.Ino
}

func (f *spareFixture) read(state, id string) string {
	f.t.Helper()
	var v map[string]any
	if err := f.q.ReadJSON(state, id, &v); err != nil {
		f.t.Fatal(err)
	}
	s, _ := v["v"].(string)
	return s
}

func (f *spareFixture) mode(path string) os.FileMode {
	f.t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		f.t.Fatal(err)
	}
	return st.Mode().Perm()
}

// A removed file's inode rests in the pool, then carries the next write:
// same inode, the new content whole, mode 0600, nothing left in the pool.
func TestSpares_RemovedInodeCarriesTheNextWriteAfterItRested(t *testing.T) {
	f := newSpareFixture(t)
	if err := f.q.Put(layout.Pending, "task-a", map[string]any{"id": "task-a", "v": "a long value that is longer than the next one"}); err != nil {
		t.Fatal(err)
	}
	old := f.ino(f.q.Path(layout.Pending, "task-a"))
	if err := f.q.Remove(layout.Pending, "task-a"); err != nil {
		t.Fatal(err)
	}
	if f.q.Exists(layout.Pending, "task-a") || f.sp.Len() != 1 {
		t.Fatalf("after Remove: exists %v, pool %d", f.q.Exists(layout.Pending, "task-a"), f.sp.Len())
	}

	// Too young: a fresh file, the spare stays.
	if err := f.q.PutOnce(layout.Pending, "task-b", map[string]any{"id": "task-b", "v": "b"}); err != nil {
		t.Fatal(err)
	}
	if f.ino(f.q.Path(layout.Pending, "task-b")) == old || f.sp.Len() != 1 {
		t.Fatal("a spare younger than MinSpareAge was rewritten")
	}

	f.now = f.now.Add(MinSpareAge)
	if err := f.q.PutOnce(layout.Pending, "task-c", map[string]any{"id": "task-c", "v": "c"}); err != nil {
		t.Fatal(err)
	}
	path := f.q.Path(layout.Pending, "task-c")
	if f.ino(path) != old {
		t.Error("the rested spare was not reused")
	}
	if got := f.read(layout.Pending, "task-c"); got != "c" {
		t.Errorf("content %q", got)
	}
	if m := f.mode(path); m != 0o600 {
		t.Errorf("mode %v", m)
	}
	if f.sp.Len() != 0 {
		t.Errorf("pool %d after reuse, want 0", f.sp.Len())
	}
}

// Put replacing a file keeps the replaced inode (the pool's alone now);
// PutOnce onto a taken id fails with ErrExists and keeps its spare.
func TestSpares_ReplaceKeepsTheOldInodeAndPutOnceRefuses(t *testing.T) {
	f := newSpareFixture(t)
	f.q.Put(layout.InProgress, "task-a", map[string]any{"id": "task-a", "v": "1"})
	first := f.ino(f.q.Path(layout.InProgress, "task-a"))
	if err := f.q.Put(layout.InProgress, "task-a", map[string]any{"id": "task-a", "v": "2"}); err != nil {
		t.Fatal(err)
	}
	if got := f.read(layout.InProgress, "task-a"); got != "2" {
		t.Fatalf("content %q", got)
	}
	if f.sp.Len() != 1 {
		t.Fatalf("pool %d, want the replaced inode", f.sp.Len())
	}
	var st syscall.Stat_t
	syscall.Stat(f.sp.pool[0].name, &st)
	if st.Ino != first || st.Nlink != 1 {
		t.Errorf("pool holds ino %d nlink %d, want %d with one name", st.Ino, st.Nlink, first)
	}

	f.now = f.now.Add(MinSpareAge)
	err := f.q.PutOnce(layout.Pending, "task-a", map[string]any{"id": "task-a", "v": "3"})
	if !errors.Is(err, ErrExists) {
		t.Fatalf("PutOnce of a taken id: %v", err)
	}
	if f.sp.Len() != 1 {
		t.Errorf("pool %d after a refused PutOnce, want 1", f.sp.Len())
	}
	if got := f.read(layout.InProgress, "task-a"); got != "2" {
		t.Errorf("the taken file changed: %q", got)
	}
}

// A spare that still has another name (a replace whose rename failed) is
// never written into: the file behind the other name stays intact.
func TestSpares_NeverWritesASpareWithAnotherName(t *testing.T) {
	f := newSpareFixture(t)
	f.q.Put(layout.Pending, "task-live", map[string]any{"id": "task-live", "v": "live"})
	f.sp.keepLink(f.q.Path(layout.Pending, "task-live"), MinSpareAge) // as if the rename after it failed
	f.now = f.now.Add(time.Hour)
	if err := f.q.PutOnce(layout.Pending, "task-new", map[string]any{"id": "task-new", "v": "new"}); err != nil {
		t.Fatal(err)
	}
	if got := f.read(layout.Pending, "task-live"); got != "live" {
		t.Fatalf("a file with two names was rewritten: %q", got)
	}
	if f.ino(f.q.Path(layout.Pending, "task-new")) == f.ino(f.q.Path(layout.Pending, "task-live")) {
		t.Fatal("the new file shares the live file's inode")
	}
	var st syscall.Stat_t
	syscall.Stat(f.q.Path(layout.Pending, "task-live"), &st)
	if st.Nlink != 1 {
		t.Errorf("live file nlink %d, want 1 (the pool dropped its name)", st.Nlink)
	}
}

// A spare someone still holds open (a producer that renamed an inbox file
// in and kept its descriptor, a slow reader) is never written into: it is
// freed, and the next write gets a fresh inode. The holder's view of the
// old file is unchanged.
func TestSpares_NeverWritesASpareSomeoneHoldsOpen(t *testing.T) {
	f := newSpareFixture(t)
	f.q.Put(layout.Pending, "task-held", map[string]any{"id": "task-held", "v": "held"})
	held, err := os.Open(f.q.Path(layout.Pending, "task-held"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	var hs syscall.Stat_t
	if err := syscall.Fstat(int(held.Fd()), &hs); err != nil {
		t.Fatal(err)
	}
	if err := f.q.Remove(layout.Pending, "task-held"); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(time.Hour)
	if err := f.q.PutOnce(layout.Pending, "task-next", map[string]any{"id": "task-next", "v": "next"}); err != nil {
		t.Fatal(err)
	}
	if f.ino(f.q.Path(layout.Pending, "task-next")) == hs.Ino {
		t.Fatal("a spare held open elsewhere was written into")
	}
	b := make([]byte, 256)
	n, _ := held.ReadAt(b, 0)
	if !strings.Contains(string(b[:n]), `"held"`) {
		t.Errorf("the holder's file changed under it: %q", b[:n])
	}
	if st := f.sp.Stats(); st.Freed != 1 || st.Reused != 0 {
		t.Errorf("stats %+v, want the held spare freed, none reused", st)
	}
}

// A batch over a queue with spares recycles inodes too, commits every
// file whole, refuses a taken id per file and calls AfterRename in order.
func TestSpares_BatchRecyclesAndCommitsInOrder(t *testing.T) {
	f := newSpareFixture(t)
	var inos []uint64
	for _, id := range []string{"task-1", "task-2"} {
		f.q.Put(layout.Pending, id, map[string]any{"id": id})
		inos = append(inos, f.ino(f.q.Path(layout.Pending, id)))
		f.q.Remove(layout.Pending, id)
	}
	f.q.Put(layout.Pending, "task-taken", map[string]any{"id": "task-taken", "v": "theirs"})
	f.now = f.now.Add(MinSpareAge)

	b := NewBatch()
	var renamed []int
	b.AfterRename(func(i int) { renamed = append(renamed, i) })
	if err := b.Put(f.q, layout.InProgress, "task-x", map[string]any{"id": "task-x", "v": "x"}); err != nil {
		t.Fatal(err)
	}
	y, err := b.Create(f.q, layout.Pending, "task-y", map[string]any{"id": "task-y", "v": "y"})
	if err != nil {
		t.Fatal(err)
	}
	taken, _ := b.Create(f.q, layout.Pending, "task-taken", map[string]any{"id": "task-taken", "v": "mine"})
	if f.q.Exists(layout.InProgress, "task-x") {
		t.Fatal("visible before Commit")
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if y.Err() != nil || !errors.Is(taken.Err(), ErrExists) {
		t.Errorf("errs: y %v taken %v", y.Err(), taken.Err())
	}
	if f.read(layout.InProgress, "task-x") != "x" || f.read(layout.Pending, "task-y") != "y" || f.read(layout.Pending, "task-taken") != "theirs" {
		t.Error("committed contents wrong")
	}
	if f.ino(f.q.Path(layout.InProgress, "task-x")) != inos[0] || f.ino(f.q.Path(layout.Pending, "task-y")) != inos[1] {
		t.Error("the batch did not recycle the rested inodes in order")
	}
	if len(renamed) != 3 || renamed[0] != 0 || renamed[1] != 1 || renamed[2] != 2 {
		t.Errorf("AfterRename calls %v, want [0 1 2]", renamed)
	}
}

// A removed file of a queue whose removals need no rest is reused at once,
// ahead of a replaced file still resting.
func TestSpares_RemovedWithoutRestIsReusedFirst(t *testing.T) {
	f := newSpareFixture(t)
	f.q.UseSpares(f.sp, 0)
	f.q.Put(layout.InProgress, "task-a", map[string]any{"id": "task-a", "v": "1"})
	f.q.Put(layout.InProgress, "task-a", map[string]any{"id": "task-a", "v": "2"}) // its first inode rests
	f.q.Put(layout.Pending, "task-b", map[string]any{"id": "task-b"})
	removed := f.ino(f.q.Path(layout.Pending, "task-b"))
	f.q.Remove(layout.Pending, "task-b")
	if f.sp.Len() != 2 {
		t.Fatalf("pool %d, want 2", f.sp.Len())
	}
	f.q.PutOnce(layout.Pending, "task-c", map[string]any{"id": "task-c", "v": "c"})
	if f.ino(f.q.Path(layout.Pending, "task-c")) != removed {
		t.Error("the removed file was not reused at once")
	}
	if f.sp.Len() != 1 || f.read(layout.InProgress, "task-a") != "2" {
		t.Errorf("pool %d, task-a %q", f.sp.Len(), f.read(layout.InProgress, "task-a"))
	}
}

// A previous run's pool is listed on first use and reused at once.
func TestSpares_APreviousRunsPoolIsReused(t *testing.T) {
	f := newSpareFixture(t)
	f.q.Put(layout.Pending, "task-a", map[string]any{"id": "task-a"})
	old := f.ino(f.q.Path(layout.Pending, "task-a"))
	f.q.Remove(layout.Pending, "task-a")

	sp, err := NewSpares(f.sp.dir, f.l.QueueState(layout.QTasks, layout.Pending))
	if err != nil {
		t.Fatal(err)
	}
	q := New(f.l, layout.QTasks, nil)
	q.UseSpares(sp, MinSpareAge)
	if err := q.PutOnce(layout.Pending, "task-b", map[string]any{"id": "task-b", "v": "b"}); err != nil {
		t.Fatal(err)
	}
	if f.ino(q.Path(layout.Pending, "task-b")) != old {
		t.Error("the previous run's spare was not reused")
	}
	if sp.Len() != 0 {
		t.Errorf("pool %d, want 0", sp.Len())
	}
}

// poolInodes is the set of inodes in the pool's directory.
func (f *spareFixture) poolInodes() map[uint64]bool {
	f.t.Helper()
	out := map[uint64]bool{}
	for _, dir := range []string{f.sp.dir, f.sp.fresh} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, de := range ents {
			if de.Type().IsRegular() {
				out[f.ino(filepath.Join(dir, de.Name()))] = true
			}
		}
	}
	return out
}

// rewrite commits one batch rewriting each id of pending/ to v.
func (f *spareFixture) rewrite(v string, idl ...string) {
	f.t.Helper()
	b := NewBatch()
	var staged []*Staged
	for _, id := range idl {
		s, err := b.Rewrite(f.q, layout.Pending, id, map[string]any{"id": id, "v": v})
		if err != nil {
			f.t.Fatal(err)
		}
		staged = append(staged, s)
	}
	if err := b.Commit(); err != nil {
		f.t.Fatal(err)
	}
	for i, s := range staged {
		if s.Err() != nil {
			f.t.Fatalf("rewrite %s: %v", idl[i], s.Err())
		}
	}
}

// Rewrite swaps each file with a spare in one exchange: the new content
// whole under the same name, mode 0600, and the old inode in the pool
// with no other name. On a queue whose replaced files need no rest
// (UseSparesRest 0), the next rewrite reuses those inodes at once: after
// the first batch no file is created.
func TestSpares_RewriteSwapsAndAQueueWithoutRestReusesAtOnce(t *testing.T) {
	f := newSpareFixture(t)
	f.q.UseSparesRest(f.sp, 0, 0)
	idl := []string{"task-a", "task-b"}
	old := map[uint64]bool{}
	for _, id := range idl {
		if err := f.q.PutOnce(layout.Pending, id, map[string]any{"id": id, "v": "0"}); err != nil {
			t.Fatal(err)
		}
		old[f.ino(f.q.Path(layout.Pending, id))] = true
	}
	f.rewrite("1", idl...)
	pool := f.poolInodes()
	if len(pool) != 2 {
		t.Fatalf("pool %d after the first rewrite, want the 2 old inodes", len(pool))
	}
	for ino := range old {
		if !pool[ino] {
			t.Errorf("old inode %d not in the pool", ino)
		}
	}
	for _, id := range idl {
		p := f.q.Path(layout.Pending, id)
		if f.read(layout.Pending, id) != "1" || f.mode(p) != 0o600 {
			t.Errorf("%s: %q mode %v", id, f.read(layout.Pending, id), f.mode(p))
		}
		var st syscall.Stat_t
		syscall.Stat(p, &st)
		if old[st.Ino] || st.Nlink != 1 {
			t.Errorf("%s: ino %d nlink %d after the swap", id, st.Ino, st.Nlink)
		}
	}
	all := map[uint64]bool{}
	for ino := range pool {
		all[ino] = true
	}
	for _, id := range idl {
		all[f.ino(f.q.Path(layout.Pending, id))] = true
	}
	// Same clock: no rest needed.
	f.rewrite("2", idl...)
	f.rewrite("3", idl...)
	for _, id := range idl {
		if f.read(layout.Pending, id) != "3" {
			t.Errorf("%s: %q", id, f.read(layout.Pending, id))
		}
		if !all[f.ino(f.q.Path(layout.Pending, id))] {
			t.Errorf("%s: a new inode; the pool's were not reused", id)
		}
	}
	if n := len(f.poolInodes()); n != 2 {
		t.Errorf("pool %d after three rewrites, want 2", n)
	}
}

// On a queue with the default rest, a rewritten file's old inode rests
// MinSpareAge (a reader may hold it) before it carries another write.
func TestSpares_RewrittenInodeRestsByDefault(t *testing.T) {
	f := newSpareFixture(t)
	f.q.PutOnce(layout.Pending, "task-a", map[string]any{"id": "task-a", "v": "0"})
	old := f.ino(f.q.Path(layout.Pending, "task-a"))
	f.rewrite("1", "task-a")
	f.q.PutOnce(layout.Pending, "task-b", map[string]any{"id": "task-b", "v": "b"})
	if f.ino(f.q.Path(layout.Pending, "task-b")) == old {
		t.Fatal("a replaced inode was reused before it rested")
	}
	f.now = f.now.Add(MinSpareAge)
	f.q.PutOnce(layout.Pending, "task-c", map[string]any{"id": "task-c", "v": "c"})
	if f.ino(f.q.Path(layout.Pending, "task-c")) != old {
		t.Error("the rested inode was not reused")
	}
}

// A rewrite whose file is gone creates it; AfterRename runs once per file,
// in order, and a crash point after the first leaves it rewritten whole
// and the second as it was.
func TestSpares_RewriteOfAGoneFileCreatesItAndCrashPointsAreInOrder(t *testing.T) {
	f := newSpareFixture(t)
	f.q.UseSparesRest(f.sp, 0, 0)
	f.q.PutOnce(layout.Pending, "task-a", map[string]any{"id": "task-a", "v": "0"})
	f.q.PutOnce(layout.Pending, "task-b", map[string]any{"id": "task-b", "v": "0"})
	b := NewBatch()
	var renamed []int
	b.AfterRename(func(i int) {
		renamed = append(renamed, i)
		if i == 0 && f.read(layout.Pending, "task-b") != "0" {
			t.Error("the second file changed before its rename")
		}
	})
	for _, id := range []string{"task-a", "task-b", "task-gone"} {
		if _, err := b.Rewrite(f.q, layout.Pending, id, map[string]any{"id": id, "v": "1"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(renamed) != "[0 1 2]" {
		t.Errorf("AfterRename calls %v", renamed)
	}
	for _, id := range []string{"task-a", "task-b", "task-gone"} {
		if f.read(layout.Pending, id) != "1" {
			t.Errorf("%s: %q", id, f.read(layout.Pending, id))
		}
	}
}

// A queue without spares rewrites through the group commit: same outcome.
func TestBatch_RewriteWithoutSpares(t *testing.T) {
	f := newSpareFixture(t)
	f.q.UseSpares(nil, 0)
	f.q.PutOnce(layout.Pending, "task-a", map[string]any{"id": "task-a", "v": "0"})
	f.rewrite("1", "task-a")
	if f.read(layout.Pending, "task-a") != "1" || f.sp.Len() != 0 {
		t.Errorf("content %q, pool %d", f.read(layout.Pending, "task-a"), f.sp.Len())
	}
}

// The pool must share the queue's filesystem (an exchange cannot cross
// one): NewSpares refuses a directory on another.
func TestSpares_AnotherFilesystemIsRefused(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewSpares(filepath.Join(dir, "spares"), l.QueueState(layout.QMessages, layout.Pending)); err == nil {
		t.Fatal("a pool on another filesystem was accepted")
	}
}

// Queue.Rewrite swaps the new version in and keeps the old inode in the
// pool; without spares it is Put.
func TestQueue_RewriteThroughSparesAndWithout(t *testing.T) {
	f := newSpareFixture(t)
	f.q.PutOnce(layout.InProgress, "task-a", map[string]any{"id": "task-a", "v": "0"})
	old := f.ino(f.q.Path(layout.InProgress, "task-a"))
	if err := f.q.Rewrite(layout.InProgress, "task-a", map[string]any{"id": "task-a", "v": "1"}); err != nil {
		t.Fatal(err)
	}
	if f.read(layout.InProgress, "task-a") != "1" || !f.poolInodes()[old] {
		t.Errorf("content %q; old inode in the pool: %v", f.read(layout.InProgress, "task-a"), f.poolInodes()[old])
	}
	f.q.UseSpares(nil, 0)
	if err := f.q.Rewrite(layout.InProgress, "task-a", map[string]any{"id": "task-a", "v": "2"}); err != nil {
		t.Fatal(err)
	}
	if f.read(layout.InProgress, "task-a") != "2" || f.sp.Len() != 1 {
		t.Errorf("content %q, pool %d", f.read(layout.InProgress, "task-a"), f.sp.Len())
	}
	if err := f.q.Rewrite(layout.InProgress, "../x", map[string]any{}); err == nil {
		t.Error("unsafe id rewritten")
	}
}

// An inode whose old name's removal is not yet durable (Remove keeps it
// without a directory fsync; a deferred batch swaps it out) waits on that
// directory: take syncs it before writing into the inode, and a commit
// that synced the directory releases every spare waiting on it. Otherwise
// a power loss could bring the old name back pointing at new content.
func TestSpares_ReuseWaitsForTheOldNamesDirectorySync(t *testing.T) {
	f := newSpareFixture(t)
	pending := f.q.Dir(layout.Pending)
	if err := f.q.Put(layout.Pending, "task-a", map[string]any{"v": "a"}); err != nil {
		t.Fatal(err)
	}
	if err := f.q.Remove(layout.Pending, "task-a"); err != nil {
		t.Fatal(err)
	}
	waiting := func() int {
		f.sp.mu.Lock()
		defer f.sp.mu.Unlock()
		n := 0
		for _, s := range f.sp.pool {
			if s.dir == pending {
				n++
			}
		}
		return n
	}
	if waiting() != 1 {
		t.Fatalf("removed file's inode does not wait on %s", pending)
	}
	f.now = f.now.Add(MinSpareAge)
	if err := f.q.Put(layout.Pending, "task-b", map[string]any{"v": "b"}); err != nil {
		t.Fatal(err)
	}
	if waiting() != 0 {
		t.Error("a spare still waits after its directory was synced")
	}
	if got := f.read(layout.Pending, "task-b"); got != "b" {
		t.Errorf("task-b = %q", got)
	}
	// A batch that syncs the directory releases the spares waiting on it.
	if err := f.q.Put(layout.Pending, "task-c", map[string]any{"v": "c"}); err != nil {
		t.Fatal(err)
	}
	f.q.Remove(layout.Pending, "task-c")
	if waiting() != 1 {
		t.Fatal("second removal not waiting")
	}
	b := NewBatch()
	if err := b.Put(f.q, layout.Pending, "task-d", map[string]any{"v": "d"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if waiting() != 0 {
		t.Error("a committed batch's directory sync did not release the waiting spare")
	}
}
