package chamberlain

import (
	"path/filepath"

	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/schema"
)

// borrowedTaskDirs are the task dirs that pending or running resume tasks
// run in (their workdir is <task dir>/repo of the task that asked, or of a
// kept conversation): retention keeps them whatever their age, since a
// resume may wait days for a usage limit to lift (SPEC §10.5, §10.8).
func (r *Role) borrowedTaskDirs() map[string]bool {
	out := map[string]bool{}
	for _, st := range []string{layout.Pending, layout.InProgress} {
		ids, err := r.tasks.IDs(st)
		if err != nil {
			continue
		}
		for _, id := range ids {
			var t schema.Task
			if r.tasks.ReadJSON(st, id, &t) != nil || t.Workdir == "" {
				continue
			}
			out[filepath.Dir(filepath.Clean(t.Workdir))] = true
		}
	}
	return out
}
