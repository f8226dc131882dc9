package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestApplySecrets_EnvironmentWinsThenStartThenEnvFile(t *testing.T) {
	dir := t.TempDir()
	startEnv, envFile := filepath.Join(dir, "start.env"), filepath.Join(dir, "kingdom.env")
	if err := os.WriteFile(startEnv, []byte("KT_B='from start'\nKT_C=from-start\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(envFile, []byte("KT_C=from-file\nKT_D=from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KT_A", "from-env")
	for _, k := range []string{"KT_B", "KT_C", "KT_D"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	isSecret := func(k string) bool { return k == "KT_A" }
	src, err := ApplySecrets(startEnv, envFile, isSecret)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"KT_A": {"from-env", SourceEnvironment},
		"KT_B": {"from start", SourceStart},
		"KT_C": {"from-start", SourceStart},
		"KT_D": {"from-file", SourceEnvFile},
	}
	for k, w := range want {
		if got := os.Getenv(k); got != w[0] {
			t.Errorf("%s = %q, want %q", k, got, w[0])
		}
		if src[k] != w[1] {
			t.Errorf("source of %s = %q, want %q", k, src[k], w[1])
		}
	}
	if got := FormatSources(map[string]string{"B": SourceEnvFile, "A": SourceStart}); got != "A (start's environment), B (kingdom.env)" {
		t.Errorf("FormatSources = %q", got)
	}
}

func TestStartSecrets_RoundTripsThroughTheEnvFileReader(t *testing.T) {
	for _, v := range []string{"plain", "has 'single' quotes", `has "double" quotes`, " spaced # not a comment "} {
		t.Setenv("KT_SECRET", v)
		b, err := StartSecrets(map[string]string{"KT_SECRET": SourceEnvironment, "KT_OTHER": SourceEnvFile})
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseEnv("start.env", b)
		if err != nil {
			t.Fatal(err)
		}
		if got["KT_SECRET"] != v || len(got) != 1 {
			t.Errorf("round trip of %q gave %q", v, got)
		}
	}
	t.Setenv("KT_SECRET", "both ' and \" quotes")
	if _, err := StartSecrets(map[string]string{"KT_SECRET": SourceEnvironment}); err == nil {
		t.Error("a value with both quote kinds was accepted")
	}
}
