package logging

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestLogger_SeedLineFormatStdoutAndFile(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	log := New(Options{Role: "king", Stdout: &out, SystemLog: filepath.Join(dir, "system.log"), RotateLock: filepath.Join(dir, ".rotate.lock")})
	log.Info("task created", "task", "task-20261121-001", "general", "gen-pr")
	log.Warn("heartbeat missed", "cat", "HEARTBEAT", "target", "sentinel")
	log.Error("tick failed", "err", "boom here")
	file, _ := os.ReadFile(filepath.Join(dir, "system.log"))
	if out.String() != string(file) {
		t.Fatalf("stdout and system.log differ:\n%s\n---\n%s", out.String(), file)
	}
	lines := strings.Split(strings.TrimSpace(string(file)), "\n")
	re := regexp.MustCompile(`^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\] \[([A-Z]+)\] \[king\] (.*)$`)
	wantCat := []string{"INFO", "HEARTBEAT", "ERROR"}
	for i, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil || m[1] != wantCat[i] {
			t.Fatalf("line %d %q: want category %s in the seed format", i, l, wantCat[i])
		}
	}
	if !strings.Contains(lines[0], "task=task-20261121-001 general=gen-pr") || !strings.Contains(lines[2], `err="boom here"`) {
		t.Fatalf("attributes not rendered: %v", lines)
	}
	st, _ := os.Stat(filepath.Join(dir, "system.log"))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("system.log mode %v", st.Mode().Perm())
	}
}

func TestLogger_FollowsRotation(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "system.log")
	log := New(Options{Role: "envoy", Stdout: &bytes.Buffer{}, SystemLog: p, RotateLock: filepath.Join(dir, ".rotate.lock")})
	log.Info("before")
	if err := os.Rename(p, p+".old"); err != nil {
		t.Fatal(err)
	}
	log.Info("after")
	old, _ := os.ReadFile(p + ".old")
	cur, _ := os.ReadFile(p)
	if !strings.Contains(string(old), "before") || strings.Contains(string(old), "after") || !strings.Contains(string(cur), "after") {
		t.Fatalf("old=%q new=%q: the write after rotation must land in a new file", old, cur)
	}
}

func TestRedact_SecretsNeverReachALine(t *testing.T) {
	t.Setenv("JIRA_API_TOKEN", "plain-jira-secret-123")
	var out bytes.Buffer
	log := New(Options{Role: "sentinel", Stdout: &out})
	log.Info("calling", "auth", "Authorization: Bearer ghp_abcdefghijklmnopqrstuvwxyz0123", "slack", "xoxb-1234-5678-abcdef",
		"app", "xapp-1-A0-123-abc", "url", "https://x.invalid/?token=s3cr3t&x=1", "jira", "plain-jira-secret-123",
		"key", "sk-ant-api03-abcdefghijklmnop")
	log.Error("request", slog.String("hdr", "Basic Ym90QGtpbmdkb206c2VjcmV0"))
	s := out.String()
	for _, secret := range []string{"ghp_abcdefghijklmnopqrstuvwxyz0123", "xoxb-1234", "xapp-1-A0", "s3cr3t", "plain-jira-secret-123", "sk-ant-api03", "Ym90QGtpbmdkb206c2VjcmV0"} {
		if strings.Contains(s, secret) {
			t.Errorf("secret %q leaked:\n%s", secret, s)
		}
	}
	if !strings.Contains(s, "[REDACTED]") {
		t.Fatalf("no redaction marker:\n%s", s)
	}
}
