package proctree

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// orphanRounds bounds how often SweepOrphans looks again: each round kills
// one generation (what a killed orphan had started is reparented to us
// once it is reaped, and found by the next round).
const orphanRounds = 64

// AdoptOrphans makes this process a child subreaper (Linux
// PR_SET_CHILD_SUBREAPER): a process its descendants detach (`setsid cmd &`,
// a double fork) is reparented to it instead of to init, so SweepOrphans
// finds it among its own children without reading every process of the
// machine.
func AdoptOrphans() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// SweepOrphans SIGKILLs and reaps every child of this process whose
// environment carries all of vars (name → value), generation after
// generation, and returns how many it killed. With AdoptOrphans set, every
// process an engine detached is such a child once the engine's group is
// gone; a child this process started for another purpose lacks the vars
// and is left alone. Call it only when no child carrying vars is waited on
// elsewhere (it reaps what it kills).
func SweepOrphans(vars map[string]string) int {
	if len(vars) == 0 {
		return 0 // every child would match
	}
	want := make([][]byte, 0, len(vars))
	for k, v := range vars {
		want = append(want, []byte(k+"="+v))
	}
	n := 0
	for round := 0; round < orphanRounds; round++ {
		var killed []int
		for _, pid := range children() {
			env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
			// A zombie's environment reads empty: it matches nothing.
			if err != nil || !hasAll(env, want) {
				continue
			}
			// An unreaped child's pid cannot be reused: the kill reaches it.
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, pid)
			}
		}
		if len(killed) == 0 {
			break
		}
		for _, pid := range killed {
			// Reaping it is what hands its own children to us.
			for {
				_, err := unix.Wait4(pid, nil, 0, nil)
				if err != unix.EINTR {
					break
				}
			}
		}
		n += len(killed)
	}
	return n
}

// children lists this process's children, from each thread's
// /proc/self/task/<tid>/children (an orphan is handed to any thread of a
// subreaper).
func children() []int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "children"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				out = append(out, pid)
			}
		}
	}
	return out
}
