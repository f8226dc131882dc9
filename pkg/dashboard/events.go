package dashboard

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// notifier wakes every stream when the events log may have grown: on
// inotify writes and renames in logs/, and every poll interval regardless
// (inotify only shortens the wait; re-reading is the truth).
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func newNotifier() *notifier { return &notifier{ch: make(chan struct{})} }

// wait returns a channel closed by the next broadcast. Taking it before
// reading means an append during the read still wakes the reader.
func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

func (n *notifier) broadcast() {
	n.mu.Lock()
	close(n.ch)
	n.ch = make(chan struct{})
	n.mu.Unlock()
}

func (n *notifier) run(ctx context.Context, l layout.Layout, poll time.Duration, log *slog.Logger) {
	var events chan fsnotify.Event
	if w, err := fsnotify.NewWatcher(); err != nil {
		log.Warn("dashboard: inotify unavailable, polling the events log", "err", err)
	} else {
		defer w.Close()
		if err := w.Add(l.LogsDir()); err != nil {
			log.Warn("dashboard: cannot watch the logs dir, polling the events log", "err", err)
		} else {
			events = w.Events
		}
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			n.broadcast()
			return
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if strings.HasPrefix(filepath.Base(ev.Name), "events") {
				n.broadcast()
			}
		case <-t.C:
			n.broadcast()
		}
	}
}

// slot takes an event-stream client slot; false when all are taken.
func (s *Server) slot() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clients >= s.o.MaxClients {
		return false
	}
	s.clients++
	return true
}

func (s *Server) unslot() {
	s.mu.Lock()
	s.clients--
	s.mu.Unlock()
}

// maxTail bounds ?tail= (the page asks for a few dozen lines of backlog).
const maxTail = 1000

// handleEvents streams the internal events as SSE: every event is one SSE
// event whose id is its resumable place, the store cursor just past it
// (storestream.go). Last-Event-ID resumes exactly after that
// event; without it the stream starts at the end of the log, or ?tail=N
// events before it. A comment line every KeepAlive keeps proxies and
// clients from timing a quiet stream out.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	tail := 0
	if v := r.URL.Query().Get("tail"); v != "" && r.Header.Get("Last-Event-ID") == "" {
		t, err := strconv.Atoi(v)
		if err != nil || t < 0 || t > maxTail {
			http.Error(w, fmt.Sprintf("bad tail %q: expected 0..%d", v, maxTail), http.StatusBadRequest)
			return
		}
		tail = t
	}
	st := s.o.Store
	var cur store.Cursor
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		c, err := checkCursor(id)
		if err == nil {
			// The store judges its own cursors: ask it once now.
			_, err = st.Events(r.Context(), c, 1)
		}
		if err != nil {
			http.Error(w, "bad Last-Event-ID: "+err.Error(), http.StatusBadRequest)
			return
		}
		cur = c
	} else {
		c, err := storeTail(r.Context(), st, tail)
		if err != nil {
			http.Error(w, "read event log: "+err.Error(), http.StatusInternalServerError)
			return
		}
		cur = c
	}
	if !s.slot() {
		w.Header().Set("Retry-After", "30")
		http.Error(w, fmt.Sprintf("too many event stream clients: %d already connected (http.max_clients); close one or raise the limit", s.o.MaxClients), http.StatusServiceUnavailable)
		return
	}
	defer s.unslot()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	// A client that stops reading is dropped instead of holding a slot.
	flush := func() error {
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if err := bw.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	fmt.Fprintf(bw, "retry: 2000\n: kingdom events from store cursor %s\n\n", cur)
	if err := flush(); err != nil {
		return
	}
	keep := time.NewTicker(s.o.KeepAlive)
	defer keep.Stop()
	ctx := r.Context()
	for {
		wake := s.notify.wait()
		// A burst larger than bw writes through before flush: bound it too.
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		n := 0
		err := readStore(ctx, st, &cur, func(line []byte, after store.Cursor) error {
			n++
			bw.WriteString("id: ")
			bw.WriteString(string(after))
			bw.WriteString("\ndata: ")
			bw.Write(line)
			_, err := bw.WriteString("\n\n")
			return err
		})
		if err != nil && ctx.Err() == nil {
			s.log.Warn("dashboard: read events log", "err", err)
		}
		if n > 0 {
			if flush() != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-keep.C:
			fmt.Fprintf(bw, ": keepalive %s\n\n", s.clk.Now().UTC().Format(time.RFC3339))
			if flush() != nil {
				return
			}
		}
	}
}
