package soldier

import (
	"os"
	"testing"
)

// The soldier's session asks for one processor, and the soldier gives its
// engine the GOMAXPROCS the session would have had: set, set empty, or
// unset.
func TestSoldierProcs_SessionGetsOneAndTheEngineTheOriginal(t *testing.T) {
	for _, c := range []struct {
		name string
		set  bool
		val  string
	}{{"unset", false, ""}, {"set", true, "3"}, {"set empty", true, ""}} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(envGOMAXPROCS, "x") // restored after the test
			if c.set {
				os.Setenv(envGOMAXPROCS, c.val)
			} else {
				os.Unsetenv(envGOMAXPROCS)
			}
			e := map[string]string{}
			soldierProcsEnv(e)
			if e[envGOMAXPROCS] != "1" {
				t.Fatalf("session env %v, want GOMAXPROCS=1", e)
			}
			// The soldier's process: the session's environment.
			t.Setenv(EnvSoldierProcs, e[EnvSoldierProcs])
			os.Setenv(envGOMAXPROCS, e[envGOMAXPROCS])
			RestoreEnv()
			v, ok := os.LookupEnv(envGOMAXPROCS)
			if ok != c.set || v != c.val {
				t.Errorf("GOMAXPROCS after RestoreEnv = %q (set %v), want %q (set %v)", v, ok, c.val, c.set)
			}
			if _, ok := os.LookupEnv(EnvSoldierProcs); ok {
				t.Error("the mark is still in the environment")
			}
		})
	}
	// A caller's own GOMAXPROCS for the session stands.
	e := map[string]string{envGOMAXPROCS: "4"}
	soldierProcsEnv(e)
	if e[envGOMAXPROCS] != "4" || e[EnvSoldierProcs] != "" {
		t.Errorf("session env %v, want the caller's GOMAXPROCS=4 and no mark", e)
	}
}
