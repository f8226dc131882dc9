package app

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// OwnerError refuses a command that would write into a runtime tree owned
// by another user: every file it created (a fresh system.log, a lock, a
// state dir) would belong to the wrong user, and the kingdom could no
// longer write or read it.
type OwnerError struct {
	Base  string
	Owner string // the base dir's owner
	Self  string // the effective user of this process
	Argv  []string
}

func (e *OwnerError) Error() string {
	return fmt.Sprintf("%s belongs to %s, but this runs as %s: run it as %s: runuser -u %s -- %s (or sudo -u %s …)",
		e.Base, e.Owner, e.Self, e.Owner, e.Owner, strings.Join(e.Argv, " "), e.Owner)
}

// ForeignOwner returns the owner's name when base exists and belongs to a
// user other than the effective one ("" otherwise, and when base is
// missing: whoever creates it owns it).
func ForeignOwner(base string) string {
	fi, err := os.Stat(base)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == os.Geteuid() {
		return ""
	}
	return UserName(int(st.Uid))
}

// UserName is uid's login name, or the number when it has none.
func UserName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}

// CheckOwner refuses (OwnerError) a command that writes into base when
// base belongs to another user than the effective one.
func CheckOwner(base string) error {
	if owner := ForeignOwner(base); owner != "" {
		return ownerError(base, owner)
	}
	return nil
}

// ownerError is the refusal for this process and base.
func ownerError(base, owner string) *OwnerError {
	argv := append([]string{}, os.Args...)
	if exe, err := os.Executable(); err == nil && len(argv) > 0 {
		argv[0] = exe
	}
	return &OwnerError{Base: base, Owner: owner, Self: UserName(os.Geteuid()), Argv: argv}
}
