package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Error is one configuration problem. Loaders return it (or several of them
// joined with errors.Join) so that callers can print file:line and key.
type Error struct {
	File string // path of the file, as given to the loader; empty from Validate
	Line int    // 1-based line in File, 0 when unknown
	Key  string // dotted key path, e.g. "retry.max_attempts" or "schedules[0].cron"
	Msg  string // what was expected and what was found
	Err  error  // underlying error, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	switch {
	case e.Msg != "" && e.Err != nil:
		b.WriteString(e.Msg)
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	case e.Msg != "":
		b.WriteString(e.Msg)
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Errors returns the *Error values inside err (a single *Error or a tree of
// joined errors), in order. Other errors in the tree are skipped.
func Errors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if e, ok := err.(*Error); ok {
			out = append(out, e)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var e *Error
		if errors.As(err, &e) {
			out = append(out, e)
		}
	}
	walk(err)
	return out
}

// join turns problems into one error, ordered by file and line, or nil.
func join(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	slices.SortStableFunc(errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
	if len(errs) == 1 {
		return errs[0]
	}
	list := make([]error, len(errs))
	for i, e := range errs {
		list[i] = e
	}
	return errors.Join(list...)
}

// problems collects validation errors by key path.
type problems []*Error

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (p problems) err() error { return join(p) }
