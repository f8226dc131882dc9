package chamberlain

import "github.com/kingdom-dev/kingdom/pkg/proctree"

// killHung SIGKILLs the process groups (and processes) of a hung role's
// pane process and everything below it. pid ≤ 1 is ignored.
func killHung(pid int) {
	if pid <= 1 {
		return
	}
	proctree.Kill(proctree.Descendants(pid))
}
