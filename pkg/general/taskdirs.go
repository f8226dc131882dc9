package general

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Recycled task dirs (issue #17). A task dir holds the same few files for
// every task (CLAUDE.md, AGENTS.md, .kingdom-task.json, repo/ and, without
// a repo, repo/AGENTS.md); making them anew and removing them again costs
// five or six inode allocations and as many frees per task, and on this
// kind of disk (ext4 without a journal) every allocation scans past the
// inodes freed in the last minute. So a finished task's dir is emptied of
// everything else and kept in workspace/<general>/spare/; the next task
// renames one into place and writeTaskFiles rewrites the files in place.
//
// Nothing of one task reaches the next: everything but those files (which
// are rewritten whole) is removed when the dir is kept AND again when it
// is taken (a process of the old soldier still writing into its cwd), and
// a kept file that is not a regular file with one name is replaced, never
// written through. Where anything fails the dir is removed and made anew
// as before. One difference remains: a process that escaped the soldier's
// session (daemonised out of it, so the kill missed it) and still writes
// into its old cwd writes into a later task's repo/, where before its
// writes failed in a removed directory; what it wrote before that task
// started is removed when the dir is taken.

// maxSpareTaskDirs bounds the pool (beyond it, task dirs are removed).
const maxSpareTaskDirs = 32

type taskDirPool struct {
	mu     sync.Mutex
	loaded bool
	dirs   []string
	n      uint64
}

// load lists a previous run's pool once (p.mu held).
func (p *taskDirPool) load(dir string) {
	if p.loaded {
		return
	}
	p.loaded = true
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.IsDir() && len(p.dirs) < maxSpareTaskDirs {
			p.dirs = append(p.dirs, filepath.Join(dir, e.Name()))
		} else {
			_ = removeTree(filepath.Join(dir, e.Name()))
		}
	}
}

// keepTaskDir empties the task dir dir and moves it into the pool. false:
// the pool is full or something failed (the caller removes dir).
func (g *General) keepTaskDir(dir string) bool {
	p, spares := &g.taskDirs, g.o.Layout.TaskDirSpares(g.name)
	p.mu.Lock()
	p.load(spares)
	full := len(p.dirs) >= maxSpareTaskDirs
	p.mu.Unlock()
	if full {
		return false
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return false
	}
	if emptyTaskDir(dir) != nil {
		return false
	}
	if err := os.Mkdir(spares, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	name := filepath.Join(spares, strconv.Itoa(os.Getpid())+"-"+strconv.FormatUint(p.n, 10))
	if os.Rename(dir, name) != nil {
		return false
	}
	p.dirs = append(p.dirs, name)
	return true
}

// takeTaskDir moves a kept task dir to dir (which must not hold anything),
// emptied and dated now. withRepo: repo/ is there (a task without a
// repo); else it is not (git makes it). false: no dir was placed.
func (g *General) takeTaskDir(dir string, withRepo bool) bool {
	p := &g.taskDirs
	p.mu.Lock()
	p.load(g.o.Layout.TaskDirSpares(g.name))
	if len(p.dirs) == 0 {
		p.mu.Unlock()
		return false
	}
	name := p.dirs[len(p.dirs)-1]
	p.dirs = slices.Delete(p.dirs, len(p.dirs)-1, len(p.dirs))
	p.mu.Unlock()
	if err := os.Rename(name, dir); err != nil {
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			// Something is at dir: the spare is fine, the caller decides.
			p.mu.Lock()
			p.dirs = append(p.dirs, name)
			p.mu.Unlock()
		} else {
			_ = removeTree(name)
		}
		return false
	}
	repo := filepath.Join(dir, "repo")
	err := emptyTaskDir(dir)
	if err == nil && !withRepo {
		err = removeTree(repo)
	}
	if err == nil && withRepo {
		if fi, lerr := os.Lstat(repo); lerr != nil || !fi.IsDir() {
			err = os.Mkdir(repo, 0o700)
		}
	}
	if err == nil {
		// The chamberlain's task-dir retention counts from the dir's
		// mtime, which files rewritten in place do not move.
		now := time.Now()
		err = os.Chtimes(dir, now, now)
	}
	if err != nil {
		g.log.Warn("recycled task dir not usable; making a new one", "dir", dir, "err", err)
		_ = removeTree(dir)
		return false
	}
	return true
}

// emptyTaskDir removes from a task dir everything but Kingdom's own files
// (kingdomFiles, regular files only) and repo/, and from repo/ everything
// but a regular AGENTS.md. Directories are made 0700 first (an agent may
// have made them read-only).
func emptyTaskDir(dir string) error {
	return emptyDirBut(dir, func(p string, e os.DirEntry) (bool, error) {
		switch {
		case slices.Contains(kingdomFiles, e.Name()) && e.Type().IsRegular():
			return true, nil
		case e.Name() == "repo" && e.IsDir(): // a symlink is not IsDir here
			return true, emptyDirBut(p, func(_ string, e os.DirEntry) (bool, error) {
				return e.Name() == "AGENTS.md" && e.Type().IsRegular(), nil
			})
		}
		return false, nil
	})
}

// emptyDirBut makes dir 0700 and removes every entry keep does not keep.
func emptyDirBut(dir string, keep func(path string, e os.DirEntry) (bool, error)) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		kept, err := keep(p, e)
		if err != nil {
			return err
		}
		if kept {
			continue
		}
		if err := removeTree(p); err != nil {
			return err
		}
	}
	return nil
}
