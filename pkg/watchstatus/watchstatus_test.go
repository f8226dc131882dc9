package watchstatus

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRecord_CountsFailuresInARowAndASuccessResets(t *testing.T) {
	t.Setenv("GH_TOKEN", "ghp_secretsecretsecretsecret")
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	var f File
	if !f.Record("github", nil, now) {
		t.Fatal("a first success is not saved")
	}
	if f.Record("github", nil, now.Add(time.Minute)) {
		t.Fatal("a success after a success asks for a save")
	}
	bad := errors.New("401 Bad credentials for ghp_secretsecretsecretsecret")
	for i := 1; i <= FailingAfter; i++ {
		if !f.Record("github", bad, now.Add(time.Duration(i)*time.Minute)) {
			t.Fatal("a failure is not saved")
		}
		if got := f.Watchers["github"].Failing(); got != (i >= FailingAfter) {
			t.Fatalf("after %d failures Failing = %v", i, got)
		}
	}
	if strings.Contains(f.Watchers["github"].LastError, "ghp_secret") {
		t.Fatalf("the error keeps a secret: %q", f.Watchers["github"].LastError)
	}
	path := filepath.Join(t.TempDir(), "watchers.json")
	if err := Save(path, f); err != nil {
		t.Fatal(err)
	}
	g, err := Load(path)
	if err != nil || g.Watchers["github"].ConsecutiveFailures != FailingAfter {
		t.Fatalf("Load = %+v, %v", g, err)
	}
	if !f.Record("github", nil, now.Add(time.Hour)) || f.Watchers["github"].Failing() {
		t.Fatal("a success does not end the streak")
	}
	if m, err := Load(filepath.Join(t.TempDir(), "none.json")); err != nil || m.Watchers != nil {
		t.Fatalf("a missing file: %+v, %v", m, err)
	}
}
