package kv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// maxValue bounds a value read from a file another process wrote.
const maxValue = 16 << 20

// files keeps each namespace where the roles always kept it.
type files struct {
	l layout.Layout
}

// Files returns the file-mode KV rooted at l.
func Files(l layout.Layout) KV { return files{l: l} }

// place is where a namespace lives: one fixed file per key (fixed), or a
// directory of <key><suffix> files (dir) of which keep selects the keys.
type place struct {
	fixed  map[string]string
	dir    string
	suffix string
	keep   func(key string) bool
}

func (f files) place(ns string) (place, error) {
	l := f.l
	switch ns {
	case NSPauses:
		return place{fixed: map[string]string{KeyKingdom: l.KingPaused(), KeyEngines: l.EnginePause()}}, nil
	case NSSequences:
		return place{fixed: map[string]string{KeyTaskSeq: l.KingTaskSeq(), KeyMsgSeq: l.KingMsgSeq()}}, nil
	case NSWaits:
		return place{fixed: map[string]string{KeyKing: filepath.Join(l.RoleStateDir(layout.RoleKing), "waits.json")}}, nil
	case NSCancelled:
		return place{dir: l.KingCancelledDir(), suffix: ".json"}, nil
	case NSControl:
		return place{dir: l.KingControlDir(), suffix: ".json"}, nil
	case NSReplies:
		return place{dir: l.KingControlReplies(), suffix: ".json"}, nil
	case NSEnvoy:
		return place{dir: l.RoleStateDir(layout.RoleEnvoy)}, nil
	case NSSpend:
		return place{dir: l.SpendDir(), suffix: ".json"}, nil
	case NSResults:
		// state/results also holds each attempt's raw, staging,
		// checkpoint and heartbeat files: only task-….json is a final
		// result.
		return place{dir: l.ResultsDir(), suffix: ".json", keep: func(key string) bool {
			if !strings.HasPrefix(key, "task-") {
				return false
			}
			for _, s := range []string{"-raw", "-result", "-checkpoint"} {
				if strings.HasSuffix(key, s) {
					return false
				}
			}
			return true
		}}, nil
	case NSCheckpoints:
		return place{dir: l.ResultsDir(), suffix: "-checkpoint.json", keep: func(key string) bool {
			return strings.HasPrefix(key, "task-")
		}}, nil
	}
	return place{}, fmt.Errorf("kv: no namespace %q", ns)
}

// path checks ns and key and returns the key's file.
func (f files) path(ns, key string) (string, error) {
	p, err := f.place(ns)
	if err != nil {
		return "", err
	}
	if err := ids.Check(key); err != nil {
		return "", fmt.Errorf("key in %s: %w", ns, err)
	}
	if p.fixed != nil {
		path, ok := p.fixed[key]
		if !ok {
			return "", fmt.Errorf("kv: no key %q in %s", key, ns)
		}
		return path, nil
	}
	if p.keep != nil && !p.keep(key) {
		return "", fmt.Errorf("kv: key %q is not one of %s", key, ns)
	}
	return filepath.Join(p.dir, key+p.suffix), nil
}

func (f files) Get(_ context.Context, ns, key string) ([]byte, error) {
	path, err := f.path(ns, key)
	if err != nil {
		return nil, err
	}
	return readFile(ns, key, path)
}

func readFile(ns, key, path string) ([]byte, error) {
	b, err := atomicfile.ReadLimited(path, maxValue)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s/%s: %w", ns, key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", ns, key, err)
	}
	return b, nil
}

func (f files) Put(_ context.Context, ns, key string, v []byte) error {
	path, err := f.path(ns, key)
	if err != nil {
		return err
	}
	if err := layout.EnsureDir(filepath.Dir(path)); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, v, 0o600)
}

func (f files) PutAll(_ context.Context, ns string, vs map[string][]byte) error {
	keys := make([]string, 0, len(vs))
	for k := range vs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var g atomicfile.Group
	for _, k := range keys {
		path, err := f.path(ns, k)
		if err == nil {
			err = layout.EnsureDir(filepath.Dir(path))
		}
		if err == nil {
			_, err = g.Write(path, vs[k], 0o600, false)
		}
		if err != nil {
			g.Abort()
			return err
		}
	}
	return g.Commit()
}

func (f files) Delete(_ context.Context, ns, key string) error {
	path, err := f.path(ns, key)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s/%s: %w", ns, key, err)
	}
	return nil
}

func (f files) List(_ context.Context, ns string) (map[string][]byte, error) {
	p, err := f.place(ns)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	if p.fixed != nil {
		for key, path := range p.fixed {
			b, err := readFile(ns, key, path)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[key] = b
		}
		return out, nil
	}
	ents, err := os.ReadDir(p.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", ns, err)
	}
	for _, e := range ents {
		key, ok := strings.CutSuffix(e.Name(), p.suffix)
		// Dot-files are writers' temps; sub-directories are other
		// namespaces (control/replies).
		if !ok || !e.Type().IsRegular() || atomicfile.IsTemp(e.Name()) || !ids.Valid(key) || (p.keep != nil && !p.keep(key)) {
			continue
		}
		b, err := readFile(ns, key, filepath.Join(p.dir, e.Name()))
		if errors.Is(err, ErrNotFound) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, err
		}
		out[key] = b
	}
	return out, nil
}

// Update holds an exclusive flock on the key's directory for the read and
// the write. flock locks belong to the open directory, so two goroutines
// of one process exclude each other as two processes do, and no lock file
// joins the tree.
func (f files) Update(ctx context.Context, ns, key string, fn func([]byte) ([]byte, error)) error {
	path, err := f.path(ns, key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := layout.EnsureDir(dir); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("update %s/%s: %w", ns, key, err)
	}
	defer d.Close()
	if err := flock(d); err != nil {
		return fmt.Errorf("update %s/%s: lock %s: %w", ns, key, dir, err)
	}
	old, err := readFile(ns, key, path)
	if errors.Is(err, ErrNotFound) {
		old, err = nil, nil
	}
	if err != nil {
		return err
	}
	v, err := fn(old)
	if err != nil {
		return err
	}
	if v == nil {
		return f.Delete(ctx, ns, key)
	}
	return atomicfile.WriteFile(path, v, 0o600)
}

// flock takes an exclusive lock on d, released when d is closed.
func flock(d *os.File) error {
	for {
		err := unix.Flock(int(d.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
