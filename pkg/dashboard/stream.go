package dashboard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/tidwall/gjson"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Pos is a resumable place in the internal event stream: the inode of an
// events log file and the byte offset just past the last line delivered from
// it. The inode survives the daily split (a rename), so a position taken in
// events.log stays valid once that file is events-YYYYMMDD.log. Its text
// form, "<inode>-<offset>", is the SSE id.
type Pos struct {
	Inode  uint64
	Offset int64
}

func (p Pos) String() string {
	return strconv.FormatUint(p.Inode, 10) + "-" + strconv.FormatInt(p.Offset, 10)
}

// ParsePos reads a position written by Pos.String (a Last-Event-ID).
func ParsePos(s string) (Pos, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	ino, err1 := strconv.ParseUint(a, 10, 64)
	off, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || ino == 0 || off < 0 {
		return Pos{}, fmt.Errorf("event id %q is not <inode>-<offset>", s)
	}
	return Pos{Inode: ino, Offset: off}, nil
}

// logFile is one events log on disk.
type logFile struct {
	path  string
	inode uint64
}

func inodeOf(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// splitKey orders the daily splits: events-YYYYMMDD.log, then
// events-YYYYMMDD-1.log, -2 … (a second split on the same day).
func splitKey(name string) (day string, n int, ok bool) {
	s, ok := strings.CutPrefix(name, "events-")
	if !ok {
		return "", 0, false
	}
	s, ok = strings.CutSuffix(s, ".log")
	if !ok {
		return "", 0, false
	}
	day, suffix, has := strings.Cut(s, "-")
	if len(day) != 8 {
		return "", 0, false
	}
	if _, err := strconv.Atoi(day); err != nil {
		return "", 0, false
	}
	if has {
		v, err := strconv.Atoi(suffix)
		if err != nil || v < 0 {
			return "", 0, false
		}
		n = v
	}
	return day, n, true
}

// logFiles lists the events logs oldest first: the daily splits in date
// order, then the current events.log (when it exists).
func logFiles(l layout.Layout) []logFile {
	type split struct {
		logFile
		day string
		n   int
	}
	var splits []split
	ents, _ := os.ReadDir(l.LogsDir())
	for _, e := range ents {
		day, n, ok := splitKey(e.Name())
		if !ok {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		splits = append(splits, split{logFile{filepath.Join(l.LogsDir(), e.Name()), inodeOf(fi)}, day, n})
	}
	sort.Slice(splits, func(i, j int) bool {
		if splits[i].day != splits[j].day {
			return splits[i].day < splits[j].day
		}
		return splits[i].n < splits[j].n
	})
	out := make([]logFile, 0, len(splits)+1)
	for _, s := range splits {
		out = append(out, s.logFile)
	}
	if fi, err := os.Stat(l.EventsLog()); err == nil {
		out = append(out, logFile{l.EventsLog(), inodeOf(fi)})
	}
	return out
}

// reader follows the events logs from a position: to the end of its file,
// then, once that file has been split away, on through the newer files in
// order, so nothing between a saved position and now is lost or repeated.
type reader struct {
	l     layout.Layout
	pos   Pos
	f     *os.File
	chunk []byte
	buf   []byte
}

func newReader(l layout.Layout, p Pos) *reader {
	return &reader{l: l, pos: p}
}

func (r *reader) close() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
}

// open opens the file of r.pos. A zero inode means "the start of the current
// events.log"; an inode no longer on disk (removed by retention) falls back
// to the start of the oldest file still there.
func (r *reader) open() (bool, error) {
	if r.f != nil {
		return true, nil
	}
	files := logFiles(r.l)
	if len(files) == 0 {
		return false, nil
	}
	pick := -1
	if r.pos.Inode == 0 {
		last := files[len(files)-1]
		if last.path != r.l.EventsLog() {
			return false, nil // no events.log yet: wait for it
		}
		pick = len(files) - 1
	} else {
		for i, f := range files {
			if f.inode == r.pos.Inode {
				pick = i
				break
			}
		}
		if pick < 0 {
			pick = 0
			r.pos = Pos{Inode: files[0].inode}
		}
	}
	f, err := os.Open(files[pick].path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil // renamed or removed in between: next round
		}
		return false, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return false, err
	}
	if inodeOf(fi) != r.pos.Inode && r.pos.Inode != 0 {
		f.Close()
		return false, nil // renamed in between: next round finds it again
	}
	r.pos.Inode = inodeOf(fi)
	r.f = f
	return true, nil
}

// next returns the file that follows the open one, once the open file is
// no longer the current events.log; "" while it still is.
func (r *reader) next() (Pos, bool) {
	// The common case, cheaply: our file is still events.log.
	if fi, err := os.Stat(r.l.EventsLog()); err == nil && inodeOf(fi) == r.pos.Inode {
		return Pos{}, false
	}
	files := logFiles(r.l)
	for i, f := range files {
		if f.inode != r.pos.Inode {
			continue
		}
		if f.path == r.l.EventsLog() || i+1 >= len(files) {
			return Pos{}, false
		}
		return Pos{Inode: files[i+1].inode}, true
	}
	// Our file is gone from the list (removed): continue with the oldest.
	if len(files) > 0 {
		return Pos{Inode: files[0].inode}, true
	}
	return Pos{}, false
}

// read delivers every complete line after r.pos, each with the position
// just past it, and moves r.pos along. It returns at the end of the current
// events.log. Lines that are not JSON objects are passed over. An error from
// fn stops the read with r.pos before that line.
func (r *reader) read(fn func(line []byte, after Pos) error) error {
	for {
		ok, err := r.open()
		if err != nil || !ok {
			return err
		}
		if err := r.drain(fn); err != nil {
			return err
		}
		np, moved := r.next()
		if !moved {
			return nil
		}
		// The open file has been split away: no writer appends to it any
		// more (the split holds the rotation lock), so after one more drain
		// it is complete and the next file starts at offset 0.
		if err := r.drain(fn); err != nil {
			return err
		}
		r.close()
		r.pos = np
	}
}

const readChunk = 256 << 10

func (r *reader) drain(fn func(line []byte, after Pos) error) error {
	if r.chunk == nil {
		r.chunk = make([]byte, readChunk)
	}
	r.buf = r.buf[:0]
	off := r.pos.Offset
	for {
		m, err := r.f.ReadAt(r.chunk, off)
		if m > 0 {
			off += int64(m)
			r.buf = append(r.buf, r.chunk[:m]...)
			for {
				i := bytes.IndexByte(r.buf, '\n')
				if i < 0 {
					break
				}
				line := r.buf[:i]
				after := Pos{Inode: r.pos.Inode, Offset: r.pos.Offset + int64(i) + 1}
				if deliverable(line) {
					if ferr := fn(line, after); ferr != nil {
						return ferr
					}
				}
				r.pos = after
				r.buf = r.buf[i+1:]
			}
		}
		if err == io.EOF || m == 0 {
			if off == r.pos.Offset {
				// Nothing at our offset: was the file truncated in place?
				// Then start over rather than wait forever.
				if fi, serr := r.f.Stat(); serr == nil && fi.Size() < r.pos.Offset {
					r.pos.Offset, off = 0, 0
					r.buf = r.buf[:0]
					continue
				}
			}
			return nil // a partial last line waits for its newline
		}
		if err != nil {
			return err
		}
	}
}

// deliverable: a JSON object on one line. A carriage return would end the
// line early for an SSE parser, so such a line is passed over too.
func deliverable(line []byte) bool {
	if len(line) == 0 || line[0] != '{' || bytes.IndexByte(line, '\r') >= 0 {
		return false
	}
	return gjson.ValidBytes(line)
}

// tailPos is the position n complete lines before the end of the current
// events.log (n = 0: its end). A missing events.log gives the zero Pos,
// which starts at the beginning of the file once it appears.
func tailPos(l layout.Layout, n int) (Pos, error) {
	f, err := os.Open(l.EventsLog())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Pos{}, nil
		}
		return Pos{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Pos{}, err
	}
	ino, size := inodeOf(fi), fi.Size()
	// Walk back from the end: skip a partial last line, then n newlines.
	need := n + 1 // the newline that ends the last complete line, then n more
	end := size
	const step = 64 << 10
	buf := make([]byte, step)
	for end > 0 {
		start := max(end-step, 0)
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil && err != io.EOF {
			return Pos{}, err
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != '\n' {
				continue
			}
			need--
			if need == 0 {
				return Pos{Inode: ino, Offset: start + int64(i) + 1}, nil
			}
		}
		end = start
	}
	return Pos{Inode: ino, Offset: 0}, nil // fewer than n lines: all of them
}
