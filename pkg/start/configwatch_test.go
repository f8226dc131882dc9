package start

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

func TestConfigWatch_AChangedFileNamesTheRolesToRestartOnce(t *testing.T) {
	l := layout.New(t.TempDir())
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	write := func(p, body string, mod time.Time) {
		t.Helper()
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, mod, mod)
	}
	t0 := time.Now().Add(-time.Hour)
	kingYAML := l.ConfigFile(config.KingFile)
	write(kingYAML, "retry:\n  max_attempts: 3\n", t0)
	write(l.ConfigFile(config.EnvoyFile), "slack: {}\n", t0)
	w := newConfigWatch(l)
	if got := w.changes(); len(got) != 0 {
		t.Fatalf("no change yet, got %v", got)
	}
	write(kingYAML, "retry:\n  max_attempts: 4\n", t0.Add(time.Minute))
	write(l.GeneralManifest("gen-new"), "name: gen-new\n", t0)
	got := w.changes()
	want := []string{l.GeneralManifest("gen-new"), kingYAML}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("changes = %v, want %v", got, want)
	}
	if again := w.changes(); len(again) != 0 {
		t.Fatalf("the same change reported twice: %v", again)
	}
	if e := w.effect(kingYAML, []string{"gen-a"}); strings.Join(e.restart, ",") != "king,gen-a" {
		t.Errorf("king.yaml: restart %v, want king and every general", e.restart)
	}
	if e := w.effect(l.ConfigFile(config.EnvoyFile), nil); len(e.restart) != 0 || e.applied == "" {
		t.Errorf("envoy.yaml: %+v, want applied by the envoy itself", e)
	}
	if e := w.effect(l.GeneralManifest("gen-new"), nil); strings.Join(e.restart, ",") != "gen-new" {
		t.Errorf("manifest: %+v", e)
	}

	// The watchdog says it in its log (the journal), once.
	var buf bytes.Buffer
	wd := &Watchdog{o: Options{Layout: l, Log: slog.New(slog.NewTextHandler(&buf, nil))}, cfg: w}
	write(l.ConfigFile(config.SentinelFile), "polling: {}\n", t0)
	wd.noticeConfig()
	wd.noticeConfig()
	if n := strings.Count(buf.String(), "config file changed"); n != 1 || !strings.Contains(buf.String(), "start restart sentinel") {
		t.Errorf("log (want one line naming `start restart sentinel`):\n%s", buf.String())
	}
}
