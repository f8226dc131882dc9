package soldier

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func readRaw(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("raw result %s: %v\n%s", path, err, b)
	}
	return m
}

// The raw result is published whole and private (0600, whatever the
// agent's umask gave its staging file), and the staging file is gone.
func TestPublish_WholePrivateAndStagingRemoved(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	task := "task-20261125-001"
	staging := l.ResultStaging(task)
	// The agent's file, longer than the result and readable by others.
	os.WriteFile(staging, []byte(`{"task_id":"`+task+`","status":"success","summary":"a long summary that the raw result will not repeat whole ..........................."}`), 0o644)
	if err := publish(l, task, map[string]any{"task_id": task, "status": "success", "summary": "ok"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(staging); !os.IsNotExist(err) {
		t.Fatalf("staging file still there: %v", err)
	}
	st, _ := os.Stat(l.ResultRaw(task))
	if st.Mode().Perm() != 0o600 {
		t.Errorf("raw result mode %v, want 0600", st.Mode().Perm())
	}
	if m := readRaw(t, l.ResultRaw(task)); m["summary"] != "ok" || len(m) != 3 {
		t.Errorf("raw result %v, want exactly the published one", m)
	}
}

// A staging name the agent made a hard link or a symlink to another file
// is not written through: the other file keeps its content, and the raw
// result is a file of its own.
func TestPublish_NeverWritesThroughALinkTheAgentMade(t *testing.T) {
	for _, kind := range []string{"hard link", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			l := layout.New(t.TempDir())
			l.Ensure()
			task := "task-20261125-002"
			other := filepath.Join(t.TempDir(), "precious")
			os.WriteFile(other, []byte("precious"), 0o600)
			link := os.Link
			if kind == "symlink" {
				link = os.Symlink
			}
			if err := link(other, l.ResultStaging(task)); err != nil {
				t.Fatal(err)
			}
			if err := publish(l, task, map[string]any{"task_id": task, "status": "success", "summary": "ok"}); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(other); string(b) != "precious" {
				t.Fatalf("the linked file now holds %q", b)
			}
			if inode(t, l.ResultRaw(task)) == inode(t, other) {
				t.Fatal("the raw result is the linked file")
			}
			if m := readRaw(t, l.ResultRaw(task)); m["summary"] != "ok" {
				t.Errorf("raw result %v", m)
			}
			if _, err := os.Lstat(l.ResultStaging(task)); !os.IsNotExist(err) {
				t.Fatalf("staging name still there: %v", err)
			}
		})
	}
}

// A raw result the general wrote first (Timeout) wins over the soldier's,
// and the staging file is removed.
func TestPublish_NeverReplacesTheGeneralsResult(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	task := "task-20261125-003"
	os.WriteFile(l.ResultRaw(task), []byte(`{"task_id":"`+task+`","status":"failed","error_reason":"Timeout"}`), 0o600)
	os.WriteFile(l.ResultStaging(task), []byte(`{"task_id":"`+task+`","status":"success","summary":"late"}`), 0o600)
	if err := publish(l, task, map[string]any{"task_id": task, "status": "success", "summary": "late"}); err != nil {
		t.Fatal(err)
	}
	if m := readRaw(t, l.ResultRaw(task)); m["error_reason"] != "Timeout" {
		t.Errorf("raw result %v, want the general's Timeout", m)
	}
	if _, err := os.Lstat(l.ResultStaging(task)); !os.IsNotExist(err) {
		t.Fatalf("staging file still there: %v", err)
	}
}
