package general

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// The claim rewrite goes through the general's pool of recycled inodes:
// the in-progress file is a spare swapped in (its own inode, one name,
// status in_progress), and the claimed file's first inode stays in
// state/<general>/spare/ with its old content and no other name.
func TestGeneral_ClaimRewriteRecyclesTheClaimedInode(t *testing.T) {
	e := newEnv(t)
	e.scenario("", map[string]any{"mode": "success"})
	id := "task-20260101-001"
	e.task(id)
	var pending syscall.Stat_t
	if err := syscall.Stat(filepath.Join(e.l.QueueState(layout.QTasks, layout.Pending), id+".json"), &pending); err != nil {
		t.Fatal(err)
	}
	g := e.start()
	e.final(id)

	var ip syscall.Stat_t
	p := filepath.Join(e.l.QueueState(layout.QTasks, layout.InProgress), id+".json")
	if err := syscall.Stat(p, &ip); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !strings.Contains(string(b), `"status": "in_progress"`) || ip.Ino == pending.Ino || ip.Nlink != 1 || ip.Mode&0o777 != 0o600 {
		t.Fatalf("in-progress file: ino %d (claimed %d) nlink %d mode %o\n%s", ip.Ino, pending.Ino, ip.Nlink, ip.Mode&0o777, b)
	}
	ents, err := os.ReadDir(g.spareDir())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, de := range ents {
		var st syscall.Stat_t
		sp := filepath.Join(g.spareDir(), de.Name())
		if syscall.Stat(sp, &st) != nil || st.Ino != pending.Ino {
			continue
		}
		found = true
		if b, _ := os.ReadFile(sp); st.Nlink != 1 || !strings.Contains(string(b), `"status": "pending"`) {
			t.Errorf("spare %s: nlink %d\n%s", de.Name(), st.Nlink, b)
		}
	}
	if !found {
		t.Errorf("the claimed file's inode %d is not in %s (%d files)", pending.Ino, g.spareDir(), len(ents))
	}
}
