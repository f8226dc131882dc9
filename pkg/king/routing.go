package king

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/config"
)

// Router maps event types to generals from the manifests' subscribes
// (SPEC §4.4). An exact type beats any wildcard; among wildcards the one
// with more literal segments wins; a remaining tie goes to the first
// manifest by name.
type Router struct {
	manifests []*config.Manifest // sorted by name
	byName    map[string]*config.Manifest
	exact     map[string]string
	wild      []wildRoute
	// Warnings lists the conflicts found at load.
	Warnings []string
}

type wildRoute struct {
	pattern []string
	literal int
	general string
}

// NewRouter builds the routing table of ms (any order).
func NewRouter(ms []*config.Manifest) *Router {
	sorted := append([]*config.Manifest(nil), ms...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	r := &Router{manifests: sorted, byName: map[string]*config.Manifest{}, exact: map[string]string{}}
	wildOwner := map[string]string{}
	for _, m := range sorted {
		r.byName[m.Name] = m
		for _, s := range m.Subscribes {
			if !strings.Contains(s, "*") {
				if prev, ok := r.exact[s]; ok {
					if prev != m.Name {
						r.Warnings = append(r.Warnings, fmt.Sprintf("event type %s is subscribed by %s and %s; %s wins (manifest name order)", s, prev, m.Name, prev))
					}
					continue
				}
				r.exact[s] = m.Name
				continue
			}
			if prev, ok := wildOwner[s]; ok {
				if prev != m.Name {
					r.Warnings = append(r.Warnings, fmt.Sprintf("pattern %s is subscribed by %s and %s; %s wins (manifest name order)", s, prev, m.Name, prev))
				}
				continue
			}
			wildOwner[s] = m.Name
			segs := strings.Split(s, ".")
			lit := 0
			for _, p := range segs {
				if p != "*" {
					lit++
				}
			}
			r.wild = append(r.wild, wildRoute{pattern: segs, literal: lit, general: m.Name})
		}
	}
	// Stable: equal specificity keeps manifest name order.
	sort.SliceStable(r.wild, func(i, j int) bool { return r.wild[i].literal > r.wild[j].literal })
	return r
}

// Route returns the general for an event type.
func (r *Router) Route(typ string) (string, bool) {
	if g, ok := r.exact[typ]; ok {
		return g, true
	}
	segs := strings.Split(typ, ".")
	for _, w := range r.wild {
		if matchPattern(w.pattern, segs) {
			return w.general, true
		}
	}
	return "", false
}

// Manifest returns the manifest of a general, or nil.
func (r *Router) Manifest(name string) *config.Manifest { return r.byName[name] }

// Manifests returns the manifests sorted by name.
func (r *Router) Manifests() []*config.Manifest { return r.manifests }

// matchPattern: a "*" segment matches exactly one segment, except as the
// last segment, where it matches one or more ("github.*" covers
// github.pr.review_requested; "*" alone matches every type).
func matchPattern(pat, segs []string) bool {
	for i, p := range pat {
		if i >= len(segs) {
			return false
		}
		if p == "*" {
			if i == len(pat)-1 {
				return true
			}
			continue
		}
		if p != segs[i] {
			return false
		}
	}
	return len(pat) == len(segs)
}

// manifestSignature names every manifest file with its size and mtime, so a
// change (edit, install, uninstall) is seen with one directory read.
func manifestSignature(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "err:" + err.Error()
	}
	var b strings.Builder
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || filepath.Ext(name) != ".yaml" {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s:%d:%d;", name, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

// reloadManifests rebuilds the router when config/generals changed. A
// manifest that fails to load is left out (and logged once per change);
// the others keep routing.
func (k *King) reloadManifests() {
	dir := k.l.GeneralsConfigDir()
	sig := manifestSignature(dir)
	if sig == k.mfSig && k.routes != nil {
		return
	}
	k.mfSig = sig
	ms, err := config.LoadManifests(dir)
	if err != nil {
		k.log.Error("some manifests did not load; routing without them", "err", err)
	}
	k.routes = NewRouter(ms)
	for _, w := range k.routes.Warnings {
		k.log.Warn("routing conflict: " + w)
	}
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		names = append(names, m.Name)
	}
	k.log.Info("routing table loaded", "generals", strings.Join(names, ","))
}
