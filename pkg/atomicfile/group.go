package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Group commits many file writes at once: Write puts each file's data into
// a fresh temp beside its target (not yet synced, not yet visible); Commit
// fsyncs every temp (in parallel, so the filesystem can fold them into few
// journal commits), renames them into place in the order written, then
// fsyncs each directory once. The guarantees of WriteFile hold
// for every file: a reader sees it whole or not at all, and once Commit
// returns it survives a crash. A crash before the renames leaves only temps
// (swept at start); a crash among them leaves the first renames done. So a
// caller that marks its input done only after Commit never loses work.
//
// A Group is used by one goroutine and then discarded.
type Group struct {
	items []*GroupItem
	open  []*GroupItem // written, not yet synced
	// AfterRename, if set, runs after the i-th rename of Commit (tests: a
	// crash point inside a batch).
	AfterRename func(i int)
}

// GroupItem is one file of a Group.
type GroupItem struct {
	Path      string
	NoReplace bool
	// Err is set by Commit for this file alone: ErrExists when a no-replace
	// target already existed (the temp is removed, nothing else changes).
	Err error
	tmp string
	f   *os.File
}

// maxOpen bounds the temps held open between Write and Commit; beyond it
// the open ones are synced and closed early.
const maxOpen = 128

// syncWorkers fsync in parallel.
const syncWorkers = 8

// Len returns the number of files written so far.
func (g *Group) Len() int { return len(g.items) }

// Write stages data for path (mode perm). noReplace makes the commit a
// no-replace rename (put-once, SPEC §9.3).
func (g *Group) Write(path string, data []byte, perm os.FileMode, noReplace bool) (*GroupItem, error) {
	tmp := tempName(filepath.Dir(path))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	it := &GroupItem{Path: path, NoReplace: noReplace, tmp: tmp, f: f}
	g.items = append(g.items, it)
	g.open = append(g.open, it)
	if len(g.open) >= maxOpen {
		if err := g.syncOpen(); err != nil {
			return nil, err
		}
	}
	return it, nil
}

// syncOpen fsyncs and closes every open temp, in parallel.
func (g *Group) syncOpen() error {
	items := g.open
	g.open = nil
	files, paths := make([]*os.File, len(items)), make([]string, len(items))
	for i, it := range items {
		files[i], paths[i] = it.f, it.Path
		it.f = nil
	}
	return syncClose(files, paths)
}

// syncClose fsyncs and closes every file, syncWorkers at a time. An error
// names paths[i], the file's target.
func syncClose(files []*os.File, paths []string) error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(syncWorkers, len(files)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				err := files[i].Sync()
				if cerr := files[i].Close(); err == nil {
					err = cerr
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("write %s: %w", paths[i], err))
					mu.Unlock()
				}
			}
		}()
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// Commit makes every written file visible and durable (see Group). It
// returns an error when a temp could not be synced (nothing is renamed
// then) or a rename or directory sync failed; a no-replace conflict is not
// an error of the Group but of its item (GroupItem.Err).
func (g *Group) Commit() error { return g.CommitSteps(nil) }

// CommitSteps is Commit with steps between the renames, for a caller whose
// crash order puts other changes between its files (a removal between two
// writes): steps[i] run in order before the i-th rename (steps[Len()] after
// the last), once the renames before them are durable (their directories
// synced). A step's error stops the commit: the temps not yet renamed are
// removed and the error is returned.
func (g *Group) CommitSteps(steps map[int][]func() error) error {
	if err := g.syncOpen(); err != nil {
		g.Abort()
		return err
	}
	dirs := map[string]bool{}
	var order []string
	var errs []error
	syncDirs := func() {
		for _, d := range order {
			if err := SyncDir(d); err != nil {
				errs = append(errs, err)
			}
		}
		dirs, order = map[string]bool{}, nil
	}
	runSteps := func(i int) error {
		if len(steps[i]) == 0 {
			return nil
		}
		syncDirs()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		for _, step := range steps[i] {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	}
	for i, it := range g.items {
		if err := runSteps(i); err != nil {
			g.Abort()
			return err
		}
		if it.tmp == "" {
			continue
		}
		var err error
		if it.NoReplace {
			err = renameNoReplace(it.tmp, it.Path)
		} else {
			err = os.Rename(it.tmp, it.Path)
		}
		if err != nil {
			os.Remove(it.tmp)
			if errors.Is(err, ErrExists) {
				it.Err = fmt.Errorf("create %s: %w", it.Path, ErrExists)
			} else {
				it.Err = fmt.Errorf("write %s: %w", it.Path, err)
				errs = append(errs, it.Err)
			}
		} else if d := filepath.Dir(it.Path); !dirs[d] {
			dirs[d] = true
			order = append(order, d)
		}
		it.tmp = ""
		if g.AfterRename != nil {
			g.AfterRename(i)
		}
	}
	if err := runSteps(len(g.items)); err != nil {
		g.Abort()
		return err
	}
	syncDirs()
	g.items = nil
	return errors.Join(errs...)
}

// Abort removes every temp not yet committed.
func (g *Group) Abort() {
	for _, it := range g.items {
		if it.f != nil {
			it.f.Close()
			it.f = nil
		}
		if it.tmp != "" {
			os.Remove(it.tmp)
			it.tmp = ""
		}
	}
	g.items, g.open = nil, nil
}

// SyncDir fsyncs a directory (making renames and creates in it durable).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
