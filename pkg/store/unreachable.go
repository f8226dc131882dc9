package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// ErrUnreachable marks an error of a store that could not be reached (a
// database that is down, a cut link, a server that does not answer).
// A role waits such an error out with backoff (SPEC §12.2); it is never a
// reason to exit.
var ErrUnreachable = errors.New("store unreachable")

// Unreachable reports whether err means the store could not be reached:
// it wraps ErrUnreachable, a network error, a refused or reset
// connection, or a connection that ended mid-answer.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnreachable) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ETIMEDOUT) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	// A store call that ran out of its time: a server that accepts and
	// never answers, or one too slow to serve; either way, waited out.
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	// PostgreSQL's own words for "not now": class 08 (connection
	// exception), 57P01–57P03 (shut down, crashed, starting up).
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) {
		c := coded.SQLState()
		return strings.HasPrefix(c, "08") || c == "57P01" || c == "57P02" || c == "57P03"
	}
	return false
}
