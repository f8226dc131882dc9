package store

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
)

func TestUnreachable_NetworkErrorsOnly(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{ErrNotFound, false},
		{ErrFenced, false},
		{errors.New("syntax error at or near"), false},
		{fmt.Errorf("open: %w", refused), true},
		{fmt.Errorf("list: %w", syscall.ECONNRESET), true},
		{fmt.Errorf("x: %w", ErrUnreachable), true},
	} {
		if got := Unreachable(tc.err); got != tc.want {
			t.Errorf("Unreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
