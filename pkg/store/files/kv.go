package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// place is where a key-value namespace lives on disk: one fixed file per
// key (fixed), or a directory of <key><suffix> files (dir) of which keep
// selects the keys. Every namespace the roles have always kept in a file
// of their own stays exactly there (SPEC §2, §12.1), a day of the spend
// ledger ("spend-<date>") is the directory state/king/spend/<date>/, and
// any other namespace is a directory under state/store/kv/.
type place struct {
	fixed  map[string]string
	dir    string
	suffix string
	keep   func(key string) bool
}

func (s *Store) place(ns string) place {
	l := s.l
	if date, ok := strings.CutPrefix(ns, "spend-"); ok {
		// A day of the spend ledger (pkg/spend): one file per attempt.
		return place{dir: filepath.Join(l.SpendDir(), date), suffix: ".json"}
	}
	switch ns {
	case kv.NSPauses:
		return place{fixed: map[string]string{kv.KeyKingdom: l.KingPaused(), kv.KeyEngines: l.EnginePause()}}
	case kv.NSSequences:
		return place{fixed: map[string]string{kv.KeyTaskSeq: l.KingTaskSeq(), kv.KeyMsgSeq: l.KingMsgSeq()}}
	case kv.NSWaits:
		return place{fixed: map[string]string{kv.KeyKing: filepath.Join(l.RoleStateDir(layout.RoleKing), "waits.json")}}
	case kv.NSCancelled:
		return place{dir: l.KingCancelledDir(), suffix: ".json"}
	case kv.NSControl:
		return place{dir: l.KingControlDir(), suffix: ".json"}
	case kv.NSReplies:
		return place{dir: l.KingControlReplies(), suffix: ".json"}
	case kv.NSEnvoy:
		return place{dir: l.RoleStateDir(layout.RoleEnvoy)}
	case kv.NSResults:
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
		}}
	case kv.NSCheckpoints:
		return place{dir: l.ResultsDir(), suffix: "-checkpoint.json", keep: func(key string) bool {
			return strings.HasPrefix(key, "task-")
		}}
	}
	return place{dir: filepath.Join(s.dir, "kv", ns)}
}

// kvPath checks ns and key and returns the key's file.
func (s *Store) kvPath(ns, key string) (string, error) {
	if err := store.CheckKey(ns, key); err != nil {
		return "", err
	}
	p := s.place(ns)
	if p.fixed != nil {
		if path, ok := p.fixed[key]; ok {
			return path, nil
		}
	} else if p.keep == nil || p.keep(key) {
		return filepath.Join(p.dir, key+p.suffix), nil
	}
	// A key the roles' files have no place for.
	return filepath.Join(s.dir, "kv", ns, key), nil
}

func (s *Store) readKV(ns, key string) ([]byte, error) {
	path, err := s.kvPath(ns, key)
	if err != nil {
		return nil, err
	}
	return readValue(ns, key, path)
}

func readValue(ns, key, path string) ([]byte, error) {
	b, err := atomicfile.ReadLimited(path, MaxDocSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("value %s/%s: %w", ns, key, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", ns, key, err)
	}
	return b, nil
}

// values reads every entry of ns: its own files, then any key kept under
// state/store/kv/<ns>/.
func (s *Store) values(ns string) (map[string][]byte, error) {
	out, err := s.placeValues(ns, s.place(ns))
	if err != nil {
		return nil, err
	}
	other := place{dir: filepath.Join(s.dir, "kv", ns)}
	if other.dir == s.place(ns).dir {
		return out, nil
	}
	more, err := s.placeValues(ns, other)
	for k, v := range more {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out, err
}

func (s *Store) placeValues(ns string, p place) (map[string][]byte, error) {
	out := map[string][]byte{}
	if p.fixed != nil {
		for key, path := range p.fixed {
			b, err := readValue(ns, key, path)
			if errors.Is(err, store.ErrNotFound) {
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
		return nil, fmt.Errorf("values %s: %w", ns, err)
	}
	for _, e := range ents {
		key, ok := strings.CutSuffix(e.Name(), p.suffix)
		// Dot-files are writers' temps; sub-directories are other
		// namespaces (control/replies).
		if !ok || !e.Type().IsRegular() || atomicfile.IsTemp(e.Name()) || !ids.Valid(key) || (p.keep != nil && !p.keep(key)) {
			continue
		}
		b, err := readValue(ns, key, filepath.Join(p.dir, e.Name()))
		if errors.Is(err, store.ErrNotFound) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, err
		}
		out[key] = b
	}
	return out, nil
}
