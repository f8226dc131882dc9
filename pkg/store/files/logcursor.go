package files

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/kingdom-dev/kingdom/pkg/eventlog"
)

// logPos is a place in logs/events.log: the inode of the file being read
// and the byte offset just past the last complete line consumed. A store
// cursor is a logPos as JSON, so it survives the daily split.
type logPos struct {
	Inode  uint64 `json:"inode"`
	Offset int64  `json:"offset"`
}

// logCursor reads logs/events.log incrementally. It returns only complete
// lines, skips a corrupt line alone, and when events.log has been renamed
// (daily split) it finishes the old file, found by inode, before moving to
// the new one. A file found shorter than the offset (truncated in place)
// is read again from its start.
type logCursor struct {
	path string // logs/events.log
	pos  logPos
	f    *os.File // open file at pos.Inode
	buf  []byte   // read buffer, kept across polls
}

func (c *logCursor) close() error {
	if c.f != nil {
		err := c.f.Close()
		c.f = nil
		return err
	}
	return nil
}

func inodeOf(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// open positions c.f on the file named by c.pos (by inode), or on the current
// events.log when that file is gone.
func (c *logCursor) open() error {
	if c.f != nil {
		return nil
	}
	if c.pos.Inode != 0 {
		if f := c.findByInode(c.pos.Inode); f != nil {
			c.f = f
			return nil
		}
	}
	f, err := os.Open(c.path)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	ino := inodeOf(fi)
	if ino != c.pos.Inode {
		// The saved file is gone (deleted by retention): start the current one.
		c.pos = logPos{Inode: ino}
	}
	c.f = f
	return nil
}

// findByInode looks for the file with inode ino among events*.log in the log
// directory (the current file or a daily split).
func (c *logCursor) findByInode(ino uint64) *os.File {
	dir := filepath.Dir(c.path)
	names := []string{filepath.Base(c.path)}
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			n := e.Name()
			if strings.HasPrefix(n, "events") && n != names[0] {
				names = append(names, n)
			}
		}
	}
	for _, n := range names {
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			continue
		}
		fi, err := f.Stat()
		if err == nil && inodeOf(fi) == ino {
			return f
		}
		f.Close()
	}
	return nil
}

// poll reads every complete line after the position, calling fn for each
// valid event. A line that is not a JSON object with a type is skipped.
// fn returning an error stops the poll; the position then stays before
// that line. poll returns the number of events delivered.
func (c *logCursor) poll(fn func(eventlog.Event) error) (int, error) {
	if err := c.open(); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	total := 0
	for {
		n, err := c.drain(fn)
		total += n
		if err != nil {
			return total, err
		}
		// At EOF of the open file: has events.log been replaced?
		cur, serr := os.Stat(c.path)
		if serr != nil || inodeOf(cur) == c.pos.Inode {
			return total, nil
		}
		// Rotated. Drain the old file once more (a writer may have finished a
		// line after our read), then switch to the new file.
		n, err = c.drain(fn)
		total += n
		if err != nil {
			return total, err
		}
		c.f.Close()
		c.f = nil
		nf, oerr := os.Open(c.path)
		if oerr != nil {
			return total, nil
		}
		fi, ferr := nf.Stat()
		if ferr != nil {
			nf.Close()
			return total, nil
		}
		c.f = nf
		c.pos = logPos{Inode: inodeOf(fi)}
	}
}

const readChunk = 1 << 20

// drain reads the open file from pos.Offset to EOF.
func (c *logCursor) drain(fn func(eventlog.Event) error) (int, error) {
	if fi, err := c.f.Stat(); err == nil {
		if c.pos.Inode == 0 {
			c.pos.Inode = inodeOf(fi)
		}
		if fi.Size() < c.pos.Offset {
			// Truncated in place (by hand, or a copytruncate tool): the
			// saved offset points past the end. Start over from the top
			// rather than wait, then resume mid-line and skip everything
			// written in between.
			c.pos.Offset = 0
		}
	}
	n := 0
	if len(c.buf) == 0 {
		c.buf = make([]byte, readChunk)
	}
	// buf[:carry] holds the start of a line whose newline is not read yet;
	// each read appends after it, and the complete lines are parsed straight
	// from buf (parseLine copies what it keeps), so the bytes are copied
	// once, not once per read.
	carry := 0
	off := c.pos.Offset
	for {
		if carry == len(c.buf) {
			// One line longer than the buffer: grow it.
			c.buf = append(c.buf, make([]byte, len(c.buf))...)
		}
		m, err := c.f.ReadAt(c.buf[carry:], off)
		if m > 0 {
			off += int64(m)
			data := c.buf[:carry+m]
			for {
				i := bytes.IndexByte(data, '\n')
				if i < 0 {
					break
				}
				line := data[:i]
				if len(bytes.TrimSpace(line)) > 0 {
					ev, ok := parseLine(line)
					if ok {
						if ferr := fn(ev); ferr != nil {
							return n, ferr
						}
						n++
					}
				}
				c.pos.Offset += int64(i + 1)
				data = data[i+1:]
			}
			carry = copy(c.buf, data)
		}
		if err == io.EOF || m == 0 {
			// A partial last line stays unconsumed until its newline arrives.
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// parseLine decodes one events.log line: a JSON object with a non-empty
// string type. gjson validates it and one pass over its top-level members
// extracts the four fields without building the document (the cursor's
// hot path: a chamberlain starting from zero reads every line).
func parseLine(line []byte) (eventlog.Event, bool) {
	if !gjson.ValidBytes(line) {
		return eventlog.Event{}, false
	}
	// One copy of the line; every field below is a substring of it, so an
	// event costs one allocation (Data shares the copy: callers only read it).
	r := gjson.Parse(string(line))
	if !r.IsObject() {
		return eventlog.Event{}, false
	}
	var ev eventlog.Event
	typed := false
	r.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "type":
			typed = v.Type == gjson.String && v.Str != ""
			ev.Type = v.Str
		case "ts":
			ev.TS = v.String()
		case "actor":
			ev.Actor = v.String()
		case "data":
			ev.Data = json.RawMessage(unsafe.Slice(unsafe.StringData(v.Raw), len(v.Raw)))
		}
		return true
	})
	if !typed {
		return eventlog.Event{}, false
	}
	return ev, true
}
