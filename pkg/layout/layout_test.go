package layout

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEnsure_CreatesTheTree0700AndTightensLooseDirs(t *testing.T) {
	l := New(filepath.Join(t.TempDir(), "kingdom"))
	os.MkdirAll(l.Inbox(), 0o755) // an existing, too-open directory
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	if err := l.Ensure(); err != nil { // idempotent
		t.Fatal(err)
	}
	for _, d := range append(l.Dirs(), l.QueueState(QTasks, InProgress), l.SeenDir()) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatalf("%s missing: %v", d, err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s mode %v, want 0700", d, fi.Mode().Perm())
		}
	}
}

func TestResolveBase_FlagThenEnvThenDefault(t *testing.T) {
	t.Setenv(EnvBase, "/srv/from-env")
	if got := ResolveBase("/srv/from-flag"); got != "/srv/from-flag" {
		t.Errorf("flag: %s", got)
	}
	if got := ResolveBase(""); got != "/srv/from-env" {
		t.Errorf("env: %s", got)
	}
	t.Setenv(EnvBase, "")
	if got := ResolveBase(""); got != DefaultBase {
		t.Errorf("default: %s", got)
	}
	if got := RepoDirName("acme/web"); got != "acme__web" {
		t.Errorf("RepoDirName = %s", got)
	}
}

func TestHostLease_InStartsStateDir(t *testing.T) {
	l := New("/srv/k")
	if got, want := l.HostLease(), "/srv/k/state/start/host-lease"; got != want {
		t.Fatalf("HostLease = %s, want %s (start's state dir, beside its leader lock)", got, want)
	}
	if filepath.Dir(l.HostLease()) != filepath.Dir(l.LeaderLock(RoleStart)) {
		t.Fatal("host-lease is not beside start's leader lock")
	}
}
