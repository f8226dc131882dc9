package lockfile

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLeader_PidContentHeldAndRelease(t *testing.T) {
	p := filepath.Join(t.TempDir(), "leader.lock")
	l, err := TryLeader(p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Fatalf("lock file holds %q, want <pid>\\n (SPEC §9.27)", b)
	}
	if held, pid := Held(p); !held || pid != os.Getpid() {
		t.Fatalf("Held = %v, %d", held, pid)
	}
	// A second holder (another open file description) is refused, naming us.
	_, err = TryLeader(p)
	var he *HeldError
	if !errors.As(err, &he) || he.PID != os.Getpid() || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Fatalf("second TryLeader: %v", err)
	}
	l.Release()
	if held, _ := Held(p); held {
		t.Fatal("still held after Release")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal("the lock file must stay (a new inode would admit a second holder)")
	}
}
