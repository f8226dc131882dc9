package sessions

import (
	"encoding/json"
	"os"
	"sort"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Rebuild derives the registry from what is true on disk when sessions.json
// does not decode (a truncated write, a disk that filled): every task in
// queue/tasks/in_progress/ whose state/results/<task>-soldier-id names a
// soldier gets an entry {soldier, task, its target_general, the id file's
// mtime}. A live soldier is so never called an orphan (and killed, and its
// side effects repeated) because the registry lost its line; an entry
// whose session is gone is pruned as usual.
func Rebuild(l layout.Layout) []Entry {
	dir := l.QueueState(layout.QTasks, layout.InProgress)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []Entry
	for _, de := range ents {
		task, ok := strings.CutSuffix(de.Name(), ".json")
		if !ok || atomicfile.IsTemp(de.Name()) || !ids.Valid(task) || !de.Type().IsRegular() {
			continue
		}
		idPath := l.ResultSoldierID(task)
		b, err := os.ReadFile(idPath)
		if err != nil {
			continue
		}
		sid := strings.TrimSpace(string(b))
		if !ids.Valid(sid) || !strings.HasPrefix(sid, "soldier-") {
			continue
		}
		var head struct {
			TargetGeneral string `json:"target_general"`
		}
		tb, err := os.ReadFile(dir + "/" + de.Name())
		if err != nil || json.Unmarshal(tb, &head) != nil || !ids.ValidGeneral(head.TargetGeneral) {
			continue
		}
		e := Entry{ID: sid, TaskID: task, General: head.TargetGeneral}
		if fi, err := os.Stat(idPath); err == nil {
			e.StartedAt = fi.ModTime().UTC()
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
