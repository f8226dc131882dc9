package app

import (
	"slices"
	"strings"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/kv"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// In postgres mode no file event fires for shared state, so a role would
// see new work only at its next poll. The store announces each committed
// change instead ("<queue>/<state>", "kv/<ns>"; "*" when announcements may
// have been missed), and a role is woken by the ones that can mean work
// for it. A role with none (the sentinel's inbox is a local directory;
// the chamberlain runs on its interval) gets no listener.
var (
	kingWakes = []string{
		q(layout.QEvents, layout.Pending), q(layout.QEvents, layout.Petitioning),
		"kv/" + kv.NSResults, "kv/" + kv.NSControl,
		q(layout.QTasks, layout.Pending), q(layout.QTasks, layout.InProgress),
	}
	generalWakes = []string{q(layout.QTasks, layout.Pending), "kv/" + kv.NSCancelled, "kv/" + kv.NSPauses}
	envoyWakes   = []string{q(layout.QMessages, layout.Pending)}
)

func q(queue, state string) string { return queue + "/" + state }

// wakesRole reports whether a store notification's payload should wake
// role.
func wakesRole(role, payload string) bool {
	var want []string
	switch {
	case role == layout.RoleKing:
		want = kingWakes
	case strings.HasPrefix(role, "gen-"):
		want = generalWakes
	case role == layout.RoleEnvoy:
		want = envoyWakes
	default:
		return false
	}
	return payload == "*" || slices.Contains(want, payload)
}

// storeWakes returns a channel that receives a wake for each notification
// of st that concerns role (nil when none can, or st is no lazy store).
func storeWakes(st store.Store, role string) <-chan struct{} {
	ls, ok := st.(*lazyStore)
	if !ok || !wakesRole(role, "*") {
		return nil
	}
	return ls.wakes(func(p string) bool { return wakesRole(role, p) })
}

// wakeSub is one subscriber of a lazyStore's notifications.
type wakeSub struct {
	match func(payload string) bool
	ch    chan struct{}
}

// wakes subscribes match; the first subscriber starts the process's one
// listener.
func (s *lazyStore) wakes(match func(string) bool) <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.subs = append(s.subs, wakeSub{match: match, ch: ch})
	if !s.listening {
		s.listening = true
		go s.listen()
	}
	return ch
}

// listen opens the store (retrying each second while it cannot: Run must
// not wait for the database, its poll covers the gap), listens while the
// store is open, and wakes every subscriber a payload matches. A wake
// that finds one pending is dropped: the tick it causes rescans anyway.
func (s *lazyStore) listen() {
	var src <-chan string
	for src == nil {
		st, err := s.open(s.life)
		if err == nil {
			if src = st.Changes(s.life); src == nil {
				return // the files store: inotify wakes the roles
			}
			break
		}
		t := time.NewTimer(time.Second)
		select {
		case <-s.life.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	for p := range src {
		s.mu.Lock()
		subs := s.subs
		s.mu.Unlock()
		for _, sub := range subs {
			if sub.match(p) {
				select {
				case sub.ch <- struct{}{}:
				default:
				}
			}
		}
	}
}
