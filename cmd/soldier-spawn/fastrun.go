package main

import (
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/soldier"
)

// fastRunParams reads the argv soldier.RunArgs builds — `run` then
// `--name value` pairs of taskFlags, each at most once — without the
// command tree: building it and parsing through it is a fixed cost of every
// task (issue #17). Anything else (help, an unknown or repeated flag, a
// positional word, a flag without its value) is not ok, and the full
// command line parser handles it with its usual messages.
func fastRunParams(args []string) (soldier.Params, bool) {
	if len(args) < 2 || args[1] != "run" {
		return soldier.Params{}, false
	}
	var p soldier.Params
	dst := map[string]*string{
		"base-dir": &p.BaseDir, "task": &p.TaskID, "general": &p.General, "prompt": &p.PromptFile,
		"workdir": &p.Workdir, "resume": &p.Resume, "engine": &p.Engine, "soldier-id": &p.SoldierID,
	}
	seen := map[string]bool{}
	rest := args[2:]
	for len(rest) > 0 {
		name, ok := strings.CutPrefix(rest[0], "--")
		if !ok {
			return soldier.Params{}, false
		}
		var val string
		if n, v, eq := strings.Cut(name, "="); eq {
			name, val, rest = n, v, rest[1:]
		} else if len(rest) >= 2 {
			val, rest = rest[1], rest[2:]
		} else {
			return soldier.Params{}, false
		}
		d := dst[name]
		if d == nil || seen[name] {
			return soldier.Params{}, false
		}
		seen[name] = true
		*d = val
	}
	p.BaseDir = layout.ResolveBase(p.BaseDir)
	return p, true
}
