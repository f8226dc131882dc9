package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// The real daemon SIGKILLed again and again while it works through a
// backlog (console mode): every message ends in sent/ with its status, none
// is lost, a message is posted twice at most once per kill (a kill between
// its post and its record leaves a post in doubt, which the next envoy
// finds in the console log instead of posting it again), and each
// thread's update goes into the thread its start opened, across the kills
// (the mappings live through the delivery records).
func TestEnvoyBinary_SIGKILLDuringABacklogLosesNothing(t *testing.T) {
	bin := buildEnvoy(t)
	base := t.TempDir()
	l := layout.New(base)
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(l.ConfigFile("envoy.yaml"), []byte("slack:\n  default_channel: COPS\nintervals:\n  outbound_seconds: 60\n"), 0o600)
	const tasks = 150
	pending := l.QueueState(layout.QMessages, layout.Pending)
	put := func(i int, kind, typ string, at time.Time) {
		task := fmt.Sprintf("task-20261121-%03d", i)
		m := doc.Message{ID: "msg-" + task + "-" + kind, Type: typ, TaskID: &task, Urgency: "normal",
			Content: kind + " of " + task, CreatedAt: doc.FormatTime(at), Status: "pending"}
		b, _ := json.Marshal(m)
		tmp := filepath.Join(pending, ".tmp-test")
		os.WriteFile(tmp, b, 0o600)
		os.Rename(tmp, filepath.Join(pending, m.ID+".json"))
	}
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for i := range tasks {
		put(i, "start", doc.MessageThreadStart, t0.Add(time.Duration(2*i)*time.Second))
		put(i, "update", doc.MessageThreadUpdate, t0.Add(time.Duration(2*i+1)*time.Second))
	}
	posted := func() int {
		b, _ := os.ReadFile(l.EnvoyConsoleLog())
		return strings.Count(string(b), "(msg-task-")
	}
	left := func() int {
		ents, _ := os.ReadDir(pending)
		n := 0
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".json") {
				n++
			}
		}
		return n
	}
	env := append(os.Environ(), "SLACK_BOT_TOKEN=", "SLACK_APP_TOKEN=", "SLACK_DEFAULT_CHANNEL=", "KINGDOM_TMUX_SOCKET=kingdom-test-envoy-kill")
	kills := 0
	for round := 1; round <= 4 && left() > 0; round++ {
		cmd := exec.Command(bin, "--base-dir", base)
		cmd.Env = env
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Let it post a share of the backlog, then kill it mid-flight.
		target := posted() + 2*tasks/5
		deadline := time.Now().Add(20 * time.Second)
		for posted() < target && left() > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // polling the console log the daemon appends to
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		kills++
	}
	// A last run finishes whatever is left.
	out, err := exec.Command(bin, "--base-dir", base, "--once").CombinedOutput()
	if err != nil {
		t.Fatalf("envoy --once: %v\n%s", err, out)
	}
	// Each record in the console log: its message id, ts and thread.
	b, err := os.ReadFile(l.EnvoyConsoleLog())
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`#COPS(?: thread (\S+))? \S+ \S+ \((msg-\S+), ts (\S+)\)`)
	count := map[string]int{}
	ts := map[string][]string{}
	thread := map[string][]string{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		count[m[2]]++
		ts[m[2]] = append(ts[m[2]], m[3])
		thread[m[2]] = append(thread[m[2]], m[1])
	}
	twice := 0
	for i := range tasks {
		task := fmt.Sprintf("task-20261121-%03d", i)
		start, update := "msg-"+task+"-start", "msg-"+task+"-update"
		for _, id := range []string{start, update} {
			switch n := count[id]; {
			case n == 0:
				t.Errorf("%s never posted", id)
			case n > 2:
				t.Errorf("%s posted %d times", id, n)
			case n == 2:
				twice++
			}
			doc, err := os.ReadFile(filepath.Join(l.QueueState(layout.QMessages, layout.Sent), id+".json"))
			if err != nil || !strings.Contains(string(doc), `"status": "sent"`) {
				t.Errorf("%s not finished in sent/: %v %s", id, err, doc)
			}
		}
		// The update went into a thread the start opened.
		if len(thread[update]) > 0 && len(ts[start]) > 0 {
			ok := false
			for _, st := range ts[start] {
				ok = ok || thread[update][len(thread[update])-1] == st
			}
			if !ok {
				t.Errorf("%s posted into thread %q, its start has ts %v", update, thread[update], ts[start])
			}
		}
	}
	if twice > kills {
		t.Errorf("%d messages posted twice over %d kills (at most one per kill)", twice, kills)
	}
	if ents, _ := os.ReadDir(pending); len(ents) != 0 {
		names := []string{}
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("left in pending/: %v", names)
	}
	t.Logf("%d kills, %d messages posted twice", kills, twice)
}
