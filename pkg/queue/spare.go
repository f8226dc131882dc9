package queue

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
)

// Spares recycles the inodes of queue files a role would otherwise free
// (issue #17). On ext4 without a journal, creating a file costs 0.3–1 ms
// of kernel CPU, most of it spent skipping every inode of its block group
// freed in the last minute (the kernel's recently_deleted check), so a busy
// kingdom makes each create dearer; rewriting an existing inode costs
// ~0.1 ms. A role that both frees and writes queue files (the king: a
// dispatched event's pending copy, the copy its own rewrite replaces) keeps
// those inodes in a private directory instead, and writes its next files
// into them: write, fsync, rename into place. It is atomicfile's
// write-then-rename with a recycled inode for the temp, so a reader still
// sees every file whole or not at all, and a file is durable before the
// caller marks its input done.
//
// A spare is written only when it has no other name (link count 1), is a
// regular file of this process's user, and has rested MinSpareAge in the
// pool (a reader that opened the file before it was replaced has long
// finished reading it).
type Spares struct {
	dir string
	// fresh is where new files are created (spare_dir.go).
	fresh string
	dev   uint64
	uid   int

	mu   sync.Mutex
	pool []spare // by rest start, oldest first
	n    uint64  // name counter
	// loaded: the directory's files from a previous run are listed.
	loaded bool
	// prefix makes this pool's new names unique: s-<pid>-<start ns>-
	prefix string
	max    int
	now    func() time.Time
	stats  SpareStats // spare_export.go
}

type spare struct {
	name string
	at   time.Time
	// dir, when set, still holds a name for this inode on disk: the entry
	// was renamed away, swapped or replaced, but dir was not fsynced since.
	// Until it is, a power loss can bring that name back pointing at this
	// inode, so take syncs dir before it writes anything into the inode.
	dir string
}

// MinSpareAge is how long a kept inode rests before it is rewritten: a
// file still reachable under its name (one a rewrite replaced) may be in
// a reader's hands. A queue whose removed files nobody acts on once their
// name is gone (UseSpares' removedRest) may reuse those at once.
const MinSpareAge = time.Second

// DefaultMaxSpares bounds a pool (beyond it, files are freed as before).
const DefaultMaxSpares = 1024

// NewSpares opens the pool in dir (created 0700), which must be on the
// filesystem of every path in sameFS (renames do not cross filesystems).
// Files already in dir (a previous run's pool) are reusable at once; they
// are listed on first use, so a role that builds its pool before taking
// its leader lock lists them only once it leads (one writer per pool).
func NewSpares(dir string, sameFS ...string) (*Spares, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return nil, err
	}
	for _, p := range sameFS {
		var o syscall.Stat_t
		if err := syscall.Stat(p, &o); err != nil {
			return nil, err
		}
		if o.Dev != st.Dev {
			return nil, fmt.Errorf("spares %s: %s is on another filesystem", dir, p)
		}
	}
	fresh, err := freshDir(dir)
	if err != nil {
		return nil, err
	}
	if err := probeNoReplace(fresh); err != nil {
		return nil, fmt.Errorf("spares %s: no-replace rename unsupported: %w", dir, err)
	}
	s := &Spares{dir: dir, fresh: fresh, dev: uint64(st.Dev), uid: os.Getuid(), max: DefaultMaxSpares, now: time.Now,
		prefix: "s-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"}
	return s, nil
}

// load lists a previous run's pool on first use (s.mu held).
func (s *Spares) load() {
	if s.loaded {
		return
	}
	s.loaded = true
	for _, dir := range []string{s.dir, s.fresh} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.Type().IsRegular() || atomicfile.IsTemp(e.Name()) {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if len(s.pool) >= s.max {
				os.Remove(p)
				s.stats.Freed++
				continue
			}
			s.pool = append(s.pool, spare{name: p})
		}
	}
}

// Len is the number of files in the pool.
func (s *Spares) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.load()
	return len(s.pool)
}

// newName is a new name in the pool (s.mu held).
func (s *Spares) newName() string { return s.nameIn(s.dir) }

// nameIn is a new spare name in dir, the pool or its fresh directory.
func (s *Spares) nameIn(dir string) string {
	s.n++
	return filepath.Join(dir, s.prefix+strconv.FormatUint(s.n, 10))
}

// add puts sp into the pool in order of its rest start (s.mu held).
func (s *Spares) add(sp spare) {
	i := sort.Search(len(s.pool), func(i int) bool { return s.pool[i].at.After(sp.at) })
	s.pool = slices.Insert(s.pool, i, sp)
}

// keep moves path into the pool instead of unlinking it, to rest rest
// before reuse. false: the pool is full or the rename failed (the caller
// unlinks as before); a missing path is kept trivially (true).
func (s *Spares) keep(path string, rest time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.load()
	if len(s.pool) >= s.max {
		return false, nil
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		return errors.Is(err, fs.ErrNotExist), nil
	}
	name := s.newName()
	if err := os.Rename(path, name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return true, nil
		}
		return false, err
	}
	// A file rests from at; one kept with a shorter rest counts as older.
	s.add(spare{name: name, at: s.now().Add(rest - MinSpareAge), dir: filepath.Dir(path)})
	s.stats.Kept++
	return true, nil
}

// keepLink gives the pool a second name for path's inode, just before a
// rename replaces path (the inode is then the pool's alone), to rest rest.
// A failure only means the inode is freed as before.
func (s *Spares) keepLink(path string, rest time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.load()
	if len(s.pool) >= s.max {
		return
	}
	name := s.newName()
	if os.Link(path, name) == nil {
		s.add(spare{name: name, at: s.now().Add(rest - MinSpareAge), dir: filepath.Dir(path)})
		s.stats.Kept++
	}
}

// take opens a rested spare for rewriting (at offset 0, its old bytes
// still there: stage cuts them after writing, so a small file keeps its
// block and nothing is freed), or creates a fresh temp in the pool's
// directory when none is ready. It returns the file's length too.
func (s *Spares) take() (*os.File, string, int64, error) {
	s.mu.Lock()
	s.load()
	now := s.now()
	for len(s.pool) > 0 && now.Sub(s.pool[0].at) >= MinSpareAge {
		sp := s.pool[0]
		s.pool = s.pool[1:]
		if sp.dir != "" {
			if err := atomicfile.SyncDir(sp.dir); err != nil {
				os.Remove(sp.name) // cannot make its old name's end durable: free it
				s.stats.Freed++
				continue
			}
			s.synced(sp.dir)
		}
		f, err := os.OpenFile(sp.name, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			os.Remove(sp.name)
			s.stats.Freed++
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG ||
			st.Nlink != 1 || int(st.Uid) != s.uid || uint64(st.Dev) != s.dev {
			// Another name still points at it (a replace that failed), or
			// it is not ours to write: never write into it.
			f.Close()
			os.Remove(sp.name)
			s.stats.Freed++
			continue
		}
		if openElsewhere(f) {
			// Someone still holds it open (a producer that renamed an
			// inbox file in and kept writing, a reader of a queue file):
			// its late bytes or reads must never meet another file's.
			f.Close()
			os.Remove(sp.name)
			s.stats.Freed++
			continue
		}
		if st.Mode&0o777 != 0o600 {
			f.Chmod(0o600)
		}
		s.stats.Reused++
		s.mu.Unlock()
		return f, sp.name, st.Size, nil
	}
	name := s.nameIn(s.fresh)
	s.stats.Created++
	s.mu.Unlock()
	start := time.Now()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	d := time.Since(start)
	s.mu.Lock()
	s.stats.CreateTime += d
	s.mu.Unlock()
	if err != nil {
		return nil, "", 0, err
	}
	return f, name, 0, nil
}

// giveBack returns name to the pool, to rest rest: a written spare that
// was not renamed into place (dir ""), or the inode an exchange swapped out
// of dir.
func (s *Spares) giveBack(name string, rest time.Duration, dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pool) >= s.max {
		os.Remove(name)
		s.stats.Freed++
		return
	}
	if filepath.Dir(name) == s.fresh {
		// A file born in the fresh directory rests in the pool directory
		// with the others (its inode stays where it was born).
		if to := s.newName(); os.Rename(name, to) == nil {
			name = to
		}
	}
	s.add(spare{name: name, at: s.now().Add(rest - MinSpareAge), dir: dir})
}

// synced records that dir was fsynced: no spare waits on it any more.
// (s.mu held.)
func (s *Spares) synced(dir string) {
	for i := range s.pool {
		if s.pool[i].dir == dir {
			s.pool[i].dir = ""
		}
	}
}

// Synced is synced for a caller that fsynced dir itself (Batch.Commit, the
// envoy's checkpoint).
func (s *Spares) Synced(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced(dir)
}

// placeMode is how a staged spare takes its target's name.
type placeMode uint8

const (
	// placeReplace: the target is new or replaced (Put). Most are new: a
	// no-replace rename first, an exchange where a file is there.
	placeReplace placeMode = iota
	// placeCreate: only where nothing is (PutOnce, Create).
	placeCreate
	// placeRewrite: the target is expected to exist (Rewrite): the
	// exchange first, a no-replace rename where it is gone.
	placeRewrite
)

// spareItem is one file written into a spare, waiting for its rename.
type spareItem struct {
	pool *Spares
	path string
	mode placeMode
	// rest is how long the inode the write replaces rests in the pool.
	rest time.Duration
	tmp  string
	f    *os.File
	// seq orders the opening of the staged files (syncClose: the batch's
	// first-opened file carries its syncfs).
	seq uint64
	err error
}

// stage writes data into a spare for path (not yet synced); the inode it
// replaces, if any, will rest rest in the pool.
func (s *Spares) stage(path string, data []byte, mode placeMode, rest time.Duration) (*spareItem, error) {
	f, tmp, size, err := s.take()
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	seq := openSeq.Add(1)
	_, err = f.Write(data)
	if err == nil && size > int64(len(data)) {
		err = f.Truncate(int64(len(data))) // cut the old tail
	}
	if err != nil {
		f.Close()
		s.giveBack(tmp, MinSpareAge, "")
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &spareItem{pool: s, path: path, mode: mode, rest: rest, tmp: tmp, f: f, seq: seq}, nil
}

// syncItems makes the staged files not yet synced durable and closes them,
// all at once (syncClose: one syncfs, or fdatasyncs in parallel).
func syncItems(items []*spareItem) error {
	var files []*os.File
	var paths []string
	first, firstSeq := 0, uint64(0)
	for _, it := range items {
		if it.f != nil {
			if len(files) == 0 || it.seq < firstSeq {
				first, firstSeq = len(files), it.seq
			}
			files, paths = append(files, it.f), append(paths, it.path)
			it.f = nil
		}
	}
	if len(files) == 0 {
		return nil
	}
	return syncClose(files, paths, first)
}

// place renames a synced spare into place: replacing path (its old inode
// joins the pool, to rest it.rest) or, with placeCreate, only where
// nothing is (ErrExists in it.err, and the spare goes back to the pool).
// A replaced file is swapped with the spare in one renameat2
// (RENAME_EXCHANGE): readers see the old or the new file whole, and the
// old inode stays in the pool under the spare's name. Where the exchange
// fails, the pool links the old inode before a rename replaces it.
func (s *Spares) place(it *spareItem) error {
	var err error
	if it.mode == placeCreate {
		err = renameNoReplace(it.tmp, it.path)
		if errors.Is(err, unix.EEXIST) {
			s.giveBack(it.tmp, MinSpareAge, "")
			it.tmp = ""
			it.err = fmt.Errorf("create %s: %w", it.path, atomicfile.ErrExists)
			return nil
		}
	} else {
		// A rewrite's target is there: the exchange first. A put's is
		// mostly new: a no-replace rename first.
		swapped := it.mode == placeRewrite && exchange(it.tmp, it.path) == nil
		if !swapped {
			err = renameNoReplace(it.tmp, it.path)
			swapped = errors.Is(err, unix.EEXIST) && exchange(it.tmp, it.path) == nil
		}
		if swapped {
			s.giveBack(it.tmp, it.rest, filepath.Dir(it.path)) // the name now holds the replaced inode
			it.tmp = ""
			return nil
		}
		if err != nil {
			s.keepLink(it.path, it.rest)
			err = os.Rename(it.tmp, it.path)
		}
	}
	if err != nil {
		s.giveBack(it.tmp, MinSpareAge, "")
		it.tmp = ""
		it.err = fmt.Errorf("write %s: %w", it.path, err)
		return it.err
	}
	it.tmp = ""
	return nil
}

// renameNoReplace is renameat2(RENAME_NOREPLACE) alone: unlike
// atomicfile's, no link+unlink fallback, since the pool needs the real
// call (and RENAME_EXCHANGE beside it; NewSpares probes for it).
func renameNoReplace(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}

func exchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// abortItems returns staged spares to their pools.
func abortItems(items []*spareItem) {
	for _, it := range items {
		if it.f != nil {
			it.f.Close()
			it.f = nil
		}
		if it.tmp != "" {
			it.pool.giveBack(it.tmp, MinSpareAge, "")
			it.tmp = ""
		}
	}
}

// write is one durable file through a spare: stage, fsync, rename, then
// the target directory's fsync. The pool's directory is not synced: a
// crash that brings back the spare's old name leaves an inode with two
// names, which take never writes into (link count check).
func (s *Spares) write(path string, data []byte, mode placeMode, rest time.Duration) error {
	it, err := s.stage(path, data, mode, rest)
	if err != nil {
		return err
	}
	if err := syncItems([]*spareItem{it}); err != nil {
		abortItems([]*spareItem{it})
		return err
	}
	if err := s.place(it); err != nil {
		return err
	}
	if it.err != nil {
		return it.err
	}
	if atomicfile.SyncDir(filepath.Dir(path)) == nil {
		s.Synced(filepath.Dir(path))
	}
	return nil
}

// UseSpares makes q write its files through the pool and keep the files
// Remove and Put's replacements would free (nil: plain files again).
// Removed files rest removedRest before reuse (at most MinSpareAge; 0
// where a reader that read a removed file's name acts on nothing but that
// name, which is gone), replaced ones MinSpareAge.
func (q *Queue) UseSpares(s *Spares, removedRest time.Duration) {
	q.UseSparesRest(s, removedRest, MinSpareAge)
}

// UseSparesRest is UseSpares where the files q's writes replace rest
// replacedRest (at most MinSpareAge): 0 for a queue whose files nobody
// reads but the process that rewrites them (the envoy's messages), which
// is done reading a file before it replaces it.
func (q *Queue) UseSparesRest(s *Spares, removedRest, replacedRest time.Duration) {
	q.spares = s
	q.removedRest = min(removedRest, MinSpareAge)
	q.replacedRest = min(replacedRest, MinSpareAge)
}

// probeNoReplace checks that dir's filesystem has renameat2's
// RENAME_NOREPLACE (the spares' renames rely on it).
func probeNoReplace(dir string) error {
	a := filepath.Join(dir, ".probe-"+strconv.Itoa(os.Getpid()))
	f, err := os.OpenFile(a, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	defer os.Remove(a)
	b := a + "-b"
	if err := renameNoReplace(a, b); err != nil {
		return err
	}
	return os.Rename(b, a)
}

// openElsewhere reports whether another descriptor has f's file open: a
// write lease is granted only to the sole opener (fcntl F_SETLEASE), and
// is dropped at once. Where leases are unsupported it reports false.
func openElsewhere(f *os.File) bool {
	fd := int(f.Fd())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		return errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EBUSY)
	}
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK)
	return false
}
