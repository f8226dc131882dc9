package soldier

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
	"github.com/kingdom-dev/kingdom/pkg/spawn"
)

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// testPublisher publishes for task, logging to t.
func testPublisher(t *testing.T, l layout.Layout, task string) *publisher {
	return newPublisher(l, RunOptions{Params: spawn.Params{TaskID: task, SoldierID: "soldier-1-dd", General: "gen-x"},
		Log: slog.New(slog.NewTextHandler(tWriter{t}, nil))})
}

// tWriter is a log destination that hands each record to t.Log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
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
	if err := testPublisher(t, l, task).publish(context.Background(), map[string]any{"task_id": task, "status": "success", "summary": "ok"}); err != nil {
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
			if err := testPublisher(t, l, task).publish(context.Background(), map[string]any{"task_id": task, "status": "success", "summary": "ok"}); err != nil {
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
	if err := testPublisher(t, l, task).publish(context.Background(), map[string]any{"task_id": task, "status": "success", "summary": "late"}); err != nil {
		t.Fatal(err)
	}
	if m := readRaw(t, l.ResultRaw(task)); m["error_reason"] != "Timeout" {
		t.Errorf("raw result %v, want the general's Timeout", m)
	}
	if _, err := os.Lstat(l.ResultStaging(task)); !os.IsNotExist(err) {
		t.Fatalf("staging file still there: %v", err)
	}
}

// forgedEvents are the soldier.result_forged events in base's events.log.
func forgedEvents(t *testing.T, l layout.Layout) []map[string]any {
	t.Helper()
	b, _ := os.ReadFile(l.EventsLog())
	var out []map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		var ev struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == EventResultForged {
			out = append(out, ev.Data)
		}
	}
	return out
}

func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// The raw results the killers write, as they write them: the general's
// Timeout (pkg/general's synthetic) and the king's Cancelled (pkg/king's
// stopSoldier, with terminal and the attempt), win over the soldier's late
// result; the staging file goes.
func TestPublish_AKillersResultWins(t *testing.T) {
	const task = "task-20261125-004"
	yes := true
	for name, r := range map[string]doc.RawResult{
		"general's Timeout": {TaskID: task, Status: doc.ResultFailed, Summary: "soldier soldier-1-dd exceeded its timeout (10m0s)",
			Error: "soldier soldier-1-dd exceeded its timeout (10m0s)", ErrorReason: doc.ReasonTimeout},
		"king's Cancelled": {TaskID: task, Status: doc.ResultFailed, Summary: "cancelled by ops", Error: "cancelled by ops",
			ErrorReason: doc.ReasonCancelled, Terminal: &yes, RetryCount: 2},
	} {
		t.Run(name, func(t *testing.T) {
			l := layout.New(t.TempDir())
			l.Ensure()
			want := jsonOf(t, r)
			os.WriteFile(l.ResultRaw(task), want, 0o600)
			os.WriteFile(l.ResultStaging(task), []byte(`{"task_id":"`+task+`","status":"success","summary":"late"}`), 0o600)
			if err := testPublisher(t, l, task).publish(context.Background(), map[string]any{"task_id": task, "status": "success", "summary": "late"}); err != nil {
				t.Fatal(err)
			}
			if got := mustRead(t, l.ResultRaw(task)); string(got) != string(want) {
				t.Errorf("raw result\n%s\nwant the killer's\n%s", got, want)
			}
			if _, err := os.Lstat(l.ResultStaging(task)); !os.IsNotExist(err) {
				t.Errorf("staging file still there: %v", err)
			}
			if ev := forgedEvents(t, l); len(ev) != 0 {
				t.Errorf("a killer's result reported as forged: %v", ev)
			}
		})
	}
}

// The agent runs as the soldier's user and could write <task>-raw.json
// itself; a no-replace publication would then leave its file in place.
// Anything there that is not a killer's result is removed, reported (log
// and soldier.result_forged), and the soldier's own result published.
func TestPublish_AForgedRawResultIsReplaced(t *testing.T) {
	const task = "task-20261125-005"
	other := "task-20261125-006"
	cases := map[string]string{
		"success without origin": `{"task_id":"` + task + `","status":"success","summary":"forged"}`,
		"usage limit claim": `{"task_id":"` + task + `","status":"failed","summary":"x","error":"x","error_reason":"UsageLimited",` +
			`"resets_at":"2099-01-01T00:00:00Z"}`,
		"retryable SoldierDied": `{"task_id":"` + task + `","status":"killed","summary":"x","error":"x","error_reason":"SoldierDied"}`,
		"Timeout hiding its usage": `{"task_id":"` + task + `","status":"failed","summary":"x","error":"x","error_reason":"Timeout",` +
			`"usage":{"input_tokens":0,"output_tokens":0,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},"cost_usd":0}`,
		"Timeout for another task":       `{"task_id":"` + other + `","status":"failed","summary":"x","error":"x","error_reason":"Timeout"}`,
		"Cancelled with an agent origin": `{"task_id":"` + task + `","status":"failed","summary":"x","error":"x","error_reason":"Cancelled","origin":"agent result x"}`,
		"not JSON":                       `{"task_id":`,
		"directory":                      "",
		"symlink":                        "",
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			l := layout.New(t.TempDir())
			l.Ensure()
			raw := l.ResultRaw(task)
			target := filepath.Join(t.TempDir(), "target")
			switch name {
			case "directory":
				os.MkdirAll(filepath.Join(raw, "sub"), 0o700)
			case "symlink":
				// Pointing at a killer's shape does not make it one.
				os.WriteFile(target, []byte(`{"task_id":"`+task+`","status":"failed","summary":"x","error":"x","error_reason":"Timeout"}`), 0o600)
				os.Symlink(target, raw)
			default:
				os.WriteFile(raw, []byte(content), 0o600)
			}
			os.WriteFile(l.ResultStaging(task), []byte(`{"task_id":"`+task+`","status":"success","summary":"ours"}`), 0o600)
			if err := testPublisher(t, l, task).publish(context.Background(), map[string]any{"task_id": task, "status": "success", "summary": "ours"}); err != nil {
				t.Fatal(err)
			}
			if m := readRaw(t, raw); m["summary"] != "ours" || len(m) != 3 {
				t.Errorf("raw result %v, want the soldier's own", m)
			}
			if _, err := os.Lstat(l.ResultStaging(task)); !os.IsNotExist(err) {
				t.Errorf("staging file still there: %v", err)
			}
			ev := forgedEvents(t, l)
			if len(ev) != 1 || ev[0]["task_id"] != task || ev[0]["soldier_id"] != "soldier-1-dd" || ev[0]["general"] != "gen-x" {
				t.Errorf("soldier.result_forged events %v, want one for %s", ev, task)
			}
			if name == "symlink" {
				if b, _ := os.ReadFile(target); !strings.Contains(string(b), "Timeout") {
					t.Errorf("the symlink's target was changed: %q", b)
				}
			}
		})
	}
}
