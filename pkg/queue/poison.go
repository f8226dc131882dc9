package queue

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// Poison is an entry no consumer can take: a directory,
// FIFO or symlink named <id>.json, a name that is not a safe id, a file too
// large, not JSON, failing its kind's schema, or whose "id" differs from its
// file name. List and Count move every such entry to rejected/ with a
// .reason the moment they meet it, so a poison entry can neither stall a
// consumer nor be counted as work in flight.

// stamp identifies one version of a file already found valid, so a file is
// read and validated once, not on every tick's Count.
type stamp struct {
	size  int64
	mtime int64
	ino   uint64
}

// validCache remembers, per state directory, the files found valid.
type validCache struct {
	mu    sync.Mutex
	state map[string]map[string]stamp
}

func stampOf(fi fs.FileInfo) stamp {
	s := stamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = st.Ino
	}
	return s
}

func (c *validCache) known(state, name string, s stamp) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.state[state][name]
	return ok && v == s
}

// keep replaces the state's cache with the files of one complete scan.
func (c *validCache) keep(state string, seen map[string]stamp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == nil {
		c.state = map[string]map[string]stamp{}
	}
	c.state[state] = seen
}

// kindSchema is the document kind of each queue's files.
var kindSchema = map[string]schema.Kind{
	layout.QEvents:   schema.KindEvent,
	layout.QTasks:    schema.KindTask,
	layout.QMessages: schema.KindMessage,
}

// CheckDocument validates data as a file of this queue named id: its kind's
// schema (the same decode every consumer uses) and an "id" equal to the
// file name. It returns the reason a consumer could not take it, or nil.
func (q *Queue) CheckDocument(id string, data []byte) error {
	var got string
	switch kindSchema[q.kind] {
	case schema.KindEvent:
		ev, err := schema.DecodeEvent(data)
		if err != nil {
			return fmt.Errorf("invalid event: %w", err)
		}
		got = ev.ID
	case schema.KindTask:
		t, err := schema.DecodeTask(data)
		if err != nil {
			return fmt.Errorf("invalid task: %w", err)
		}
		got = t.ID
	case schema.KindMessage:
		m, err := schema.DecodeMessage(data)
		if err != nil {
			return fmt.Errorf("invalid message: %w", err)
		}
		got = m.ID
	default:
		return nil
	}
	if got != id {
		return fmt.Errorf("id %q does not match the file name %s.json", got, id)
	}
	return nil
}

// poisonName returns why a directory entry name cannot be an entry of this
// queue, or "" when it names one (<safe id>.json). Dot-temps are not
// entries at all and are never poison.
func poisonName(name string) (id, reason string) {
	id, ok := strings.CutSuffix(name, ".json")
	if !ok {
		return "", "not a .json file"
	}
	if err := ids.Check(id); err != nil {
		return "", "unsafe id: " + err.Error()
	}
	return id, ""
}

// notRegular describes a non-regular entry for its .reason.
func notRegular(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "not a regular file (a directory)"
	case m&fs.ModeSymlink != 0:
		return "not a regular file (symlink)"
	case m&fs.ModeNamedPipe != 0:
		return "not a regular file (FIFO)"
	}
	return "not a regular file"
}

// Count returns the number of valid entries in state: what List would
// return, without ordering them. Poison entries met on the way are rejected
// (outside rejected/), so admission never counts a file no consumer can
// take. A file is read only when it is new or changed since the last count.
// In rejected/ it counts the rejected .json files.
func (q files) count(state string) int {
	dir := q.Dir(state)
	ents, err := readDirUnsorted(dir)
	if err != nil {
		return 0
	}
	n := 0
	if state == layout.Rejected {
		for _, de := range ents {
			if strings.HasSuffix(de.Name(), ".json") && !atomicfile.IsTemp(de.Name()) {
				n++
			}
		}
		return n
	}
	seen := make(map[string]stamp, len(ents))
	for _, de := range ents {
		name := de.Name()
		if atomicfile.IsTemp(name) {
			continue
		}
		id, reason := poisonName(name)
		if reason != "" {
			q.rejectFile(state, name, reason)
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue // vanished: normal
		}
		if !fi.Mode().IsRegular() {
			q.rejectFile(state, name, notRegular(fi.Mode()))
			continue
		}
		s := stampOf(fi)
		if !q.valid.known(state, name, s) {
			b, err := ReadLimited(filepath.Join(dir, name), q.MaxSize)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					q.rejectFile(state, name, err.Error())
				}
				continue
			}
			if err := q.CheckDocument(id, b); err != nil {
				q.rejectFile(state, name, err.Error())
				continue
			}
		}
		seen[name] = s
		n++
	}
	q.valid.keep(state, seen)
	return n
}
