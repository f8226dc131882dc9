package proctree

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// sweepRounds bounds how often Sweep looks again: a process it missed
// may have forked while the others were being killed, and the next look
// finds the child (it inherits the environment).
const sweepRounds = 8

// Sweep SIGKILLs every process of this user whose environment carries all
// of vars (name → value), except this process, and returns how many it
// killed. A soldier's engine runs with KINGDOM_TASK_ID and
// KINGDOM_BASE_DIR, and everything the agent starts inherits them: a
// child that left the engine's process group and session (`setsid cmd &`)
// is reparented away from the tree, but not away from its environment.
// Only a process that cleared its own environment escapes. A process is
// held by a pidfd while its environment is read, so a pid reused meanwhile
// is never signalled.
func Sweep(vars map[string]string) int {
	if len(vars) == 0 {
		return 0 // every process would match
	}
	want := make([][]byte, 0, len(vars))
	for k, v := range vars {
		want = append(want, []byte(k+"="+v))
	}
	// A process killed in one round may still be exiting in the next
	// (its environment still readable): it is not counted twice.
	killed := map[Identity]bool{}
	for round := 0; round < sweepRounds; round++ {
		if sweepOnce(want, killed) == 0 {
			break
		}
	}
	return len(killed)
}

// sweepOnce kills the matching processes seen in one listing of /proc.
func sweepOnce(want [][]byte, killed map[Identity]bool) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self, uid := os.Getpid(), uint32(os.Getuid())
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		id, ok := Identify(pid)
		if !ok || killed[id] {
			continue
		}
		if killIfMatches(pid, uid, want) {
			killed[id] = true
			n++
		}
	}
	return n
}

// killIfMatches opens a pidfd on pid, then checks owner and environment,
// then signals through the pidfd: if pid died and was reused in between,
// the signal goes nowhere (ESRCH).
func killIfMatches(pid int, uid uint32, want [][]byte) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	st, err := os.Stat(dir)
	if err != nil {
		return false
	}
	if s, ok := st.Sys().(*syscall.Stat_t); !ok || s.Uid != uid {
		return false
	}
	env, err := os.ReadFile(filepath.Join(dir, "environ"))
	if err != nil || !hasAll(env, want) {
		return false
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}

// hasAll reports whether the NUL-separated environment env holds every
// entry of want exactly (a whole NAME=value, not a prefix of a longer
// value).
func hasAll(env []byte, want [][]byte) bool {
	for _, w := range want {
		found := false
		for rest := env; len(rest) > 0; {
			entry := rest
			if i := bytes.IndexByte(rest, 0); i >= 0 {
				entry, rest = rest[:i], rest[i+1:]
			} else {
				rest = nil
			}
			if bytes.Equal(entry, w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
