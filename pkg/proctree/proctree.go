// Package proctree finds and kills a process's whole tree (Linux /proc),
// for cancelling a soldier: its engine runs in its own process group, and
// anything the agent started below it must go too.
//
//	tree := proctree.Descendants(panePID) // collect while the parents live
//	... kill the tmux session ...
//	proctree.Kill(tree)
package proctree

import (
	"golang.org/x/sys/unix"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is one process of a tree.
type Proc struct {
	PID, PGID int
}

// statFields returns the fields of /proc/<pid>/stat from the third on
// (state, ppid, pgrp, …): the command name before them is in parentheses
// and may contain spaces, so they start after the last ')'.
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	f := strings.Fields(s[i+1:])
	return f, len(f) >= 20 && len(f[0]) > 0
}

// stat reads the parent pid and process group of pid.
func stat(pid int) (ppid, pgid int, ok bool) {
	f, ok := statFields(pid)
	if !ok {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	return ppid, pgid, err1 == nil && err2 == nil
}

// Descendants returns root and every process below it, with their process
// groups, root first.
func Descendants(root int) []Proc {
	if root <= 1 {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	groups := map[int]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, pgid, ok := stat(pid)
		if !ok {
			continue
		}
		children[ppid] = append(children[ppid], pid)
		groups[pid] = pgid
	}
	if _, ok := groups[root]; !ok {
		return nil
	}
	var out []Proc
	queue := []int{root}
	seen := map[int]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, Proc{PID: p, PGID: groups[p]})
		queue = append(queue, children[p]...)
	}
	return out
}

// Kill sends SIGKILL to every process group of the tree other than the
// caller's own, then to every process (one that left its group is still
// found by pid). It never signals pid ≤ 1.
func Kill(tree []Proc) {
	self := syscall.Getpgrp()
	done := map[int]bool{}
	for _, p := range tree {
		if p.PGID > 1 && p.PGID != self && !done[p.PGID] {
			done[p.PGID] = true
			_ = syscall.Kill(-p.PGID, syscall.SIGKILL)
		}
	}
	for _, p := range tree {
		if p.PID > 1 && p.PID != os.Getpid() {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
}

// Alive reports whether pid still exists (a zombie counts as gone).
func Alive(pid int) bool {
	f, ok := statFields(pid)
	return ok && f[0][0] != 'Z'
}

// Identity names one process across pid reuse: its pid and its start time
// (clock ticks after boot, /proc/<pid>/stat field 22).
type Identity struct {
	PID   int
	Start uint64
}

// procStat reads pid's state letter and start time (field 22).
func procStat(pid int) (state byte, start uint64, ok bool) {
	f, ok := statFields(pid)
	if !ok {
		return 0, 0, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	return f[0][0], start, err == nil
}

// Identify returns pid's identity; ok is false when pid is already gone.
func Identify(pid int) (Identity, bool) {
	if pid <= 1 {
		return Identity{}, false
	}
	_, start, ok := procStat(pid)
	if !ok {
		return Identity{}, false
	}
	return Identity{PID: pid, Start: start}, true
}

// Exited reports whether the process id names has ended: no such pid, a
// zombie (ended, its parent not told yet), or the pid now names a later
// process.
func (id Identity) Exited() bool {
	state, start, ok := procStat(id.PID)
	return !ok || state == 'Z' || start != id.Start
}

// SelfCPU is this process's user+system CPU so far, every thread counted
// (getrusage RUSAGE_SELF); 0 when it cannot be read. Benchmarks report CPU
// beside wall time with it.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// WaitExit waits up to d for the process id names to end and reports
// whether it did. It sleeps on a pidfd (woken by the exit itself, no /proc
// polling); where pidfds are missing it looks at /proc every 2 ms.
func (id Identity) WaitExit(d time.Duration) bool {
	deadline := time.Now().Add(d)
	fd, err := unix.PidfdOpen(id.PID, 0)
	if err == nil {
		defer unix.Close(fd)
		// Opened after a reuse of the pid, the fd names another process:
		// the identity check after the open settles it.
		if id.Exited() {
			return true
		}
		for {
			ms := int(time.Until(deadline) / time.Millisecond)
			if ms <= 0 {
				return id.Exited()
			}
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
			if err == unix.EINTR {
				continue
			}
			// Readable once the process has ended (a zombie included).
			return (err == nil && n > 0) || id.Exited()
		}
	}
	if err == unix.ESRCH {
		return true
	}
	for !id.Exited() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}
