package start

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"syscall"
	"time"
)

// relayPerMinute bounds the lines of one role relayed per minute: a role
// failing every tick must not flood the journal.
const relayPerMinute = 20

// maxRelayLine cuts a relayed line (the whole line stays in system.log).
const maxRelayLine = 2000

// relayLine matches the system.log lines worth the journal: WARN, ERROR
// and ALERT of a role other than start (whose own lines are on stdout).
var relayLine = regexp.MustCompile(`^\[[^\]]*\] \[(WARN|ERROR|ALERT)\] \[([^\]]+)\] `)

// relay copies the WARN/ERROR lines other roles append to logs/system.log
// to start's stdout. Roles print to their tmux pane, which nothing under
// systemd reads; system.log is where every role's lines meet already, so
// tailing it needs no change in any role and follows rotation (the
// chamberlain renames the file: the rest of the old one is read first).
type relay struct {
	path    string
	out     io.Writer
	perMin  int
	f       *os.File
	ino     uint64
	partial []byte
	window  time.Time
	sent    map[string]int
	held    map[string]int
}

// newRelay starts at the end of the current system.log: history is not
// replayed into the journal.
func newRelay(path string, out io.Writer, perMin int) *relay {
	r := &relay{path: path, out: out, perMin: perMin, sent: map[string]int{}, held: map[string]int{}}
	if f, ino, err := openLog(path); err == nil {
		if _, err := f.Seek(0, io.SeekEnd); err == nil {
			r.f, r.ino = f, ino
		} else {
			f.Close()
		}
	}
	return r
}

func openLog(path string) (*os.File, uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	sys, _ := fi.Sys().(*syscall.Stat_t)
	if sys == nil {
		return f, 0, nil
	}
	return f, sys.Ino, nil
}

// step relays what was appended since the last step.
func (r *relay) step(now time.Time) {
	if now.Sub(r.window) >= time.Minute {
		r.flushHeld()
		r.window = now
	}
	if r.f != nil {
		r.drain(now)
	}
	// Rotated (another inode at the path) or not there at first: switch
	// to the new file, from its beginning.
	if f, ino, err := openLog(r.path); err == nil {
		if r.f != nil && ino == r.ino {
			f.Close()
			return
		}
		if r.f != nil {
			r.f.Close()
		}
		r.f, r.ino, r.partial = f, ino, nil
		r.drain(now)
	}
}

func (r *relay) drain(now time.Time) {
	b, err := io.ReadAll(r.f)
	if err != nil || len(b) == 0 {
		return
	}
	b = append(r.partial, b...)
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		r.line(b[:i])
		b = b[i+1:]
	}
	r.partial = append([]byte(nil), b...)
}

func (r *relay) line(l []byte) {
	m := relayLine.FindSubmatch(l)
	if m == nil || string(m[2]) == "start" {
		return
	}
	role := string(m[2])
	if r.sent[role] >= r.perMin {
		r.held[role]++
		return
	}
	r.sent[role]++
	if len(l) > maxRelayLine {
		l = append(l[:maxRelayLine:maxRelayLine], "…"...)
	}
	fmt.Fprintf(r.out, "%s\n", l)
}

// flushHeld notes, per role, the lines the last minute held back, and
// opens a new minute.
func (r *relay) flushHeld() {
	roles := make([]string, 0, len(r.held))
	for role := range r.held {
		roles = append(roles, role)
	}
	sort.Strings(roles)
	for _, role := range roles {
		fmt.Fprintf(r.out, "[start] … %d WARN/ERROR lines of %s held back (see logs/system.log)\n", r.held[role], role)
	}
	clear(r.held)
	clear(r.sent)
}
