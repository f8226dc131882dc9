package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeEnv(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config", EnvFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // WriteFile's mode is subject to umask
		t.Fatal(err)
	}
	return p
}

func TestLoadEnvFile_Parses(t *testing.T) {
	p := writeEnv(t, `# secrets
GH_TOKEN=ghp_abc

export SLACK_BOT_TOKEN="xoxb-1 2#3"
  SLACK_APP_TOKEN = 'xapp-$HOME'   # comment
EMPTY=
UNQUOTED=a b # trailing comment
HASH=a#b
EQUALS=x=y
`, 0o600)
	got, err := LoadEnvFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"GH_TOKEN":        "ghp_abc",
		"SLACK_BOT_TOKEN": "xoxb-1 2#3",
		"SLACK_APP_TOKEN": "xapp-$HOME",
		"EMPTY":           "",
		"UNQUOTED":        "a b",
		"HASH":            "a#b",
		"EQUALS":          "x=y",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestLoadEnvFile_RefusesOpenModes(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		text string
	}{{0o644, "0644"}, {0o640, "0640"}, {0o604, "0604"}, {0o400, "0400"}, {0o700, "0700"}} {
		t.Run(tc.text, func(t *testing.T) {
			p := writeEnv(t, "GH_TOKEN=secret-value\n", tc.mode)
			env, err := LoadEnvFile(p)
			if env != nil {
				t.Errorf("got values from a mode %s file", tc.text)
			}
			assertErr(t, err, p)
			want := p + ": mode " + tc.text + " is too open; secrets file must be 0600 (chmod 600 " + p + ")"
			if err.Error() != want {
				t.Errorf("got %q\nwant %q", err, want)
			}
			if strings.Contains(err.Error(), "secret-value") {
				t.Error("error leaks the value")
			}
		})
	}
}

func TestLoadEnvFile_MissingIsNil(t *testing.T) {
	env, err := LoadEnvFile(filepath.Join(t.TempDir(), EnvFile))
	if env != nil || err != nil {
		t.Errorf("got %v, %v; want nil, nil", env, err)
	}
}

func TestLoadEnvFile_BadLinesNameLineNotValue(t *testing.T) {
	p := writeEnv(t, "GOOD=1\nthis is a secret-value\nBAD KEY=secret-value\nQ=\"secret-value\n", 0o600)
	_, err := LoadEnvFile(p)
	assertErr(t, err, p, p+":2: expected KEY=VALUE", p+":3: expected KEY=VALUE", p+":4: Q: unterminated \" quote")
	if strings.Contains(err.Error(), "secret-value") {
		t.Errorf("error leaks a value: %v", err)
	}
}

func TestApplyEnvFile_EnvironmentWins(t *testing.T) {
	p := writeEnv(t, "KINGDOM_TEST_A=from-file\nKINGDOM_TEST_B=from-file\n", 0o600)
	t.Setenv("KINGDOM_TEST_A", "from-env")
	t.Setenv("KINGDOM_TEST_B", "") // make t restore it, then unset
	os.Unsetenv("KINGDOM_TEST_B")
	set, err := ApplyEnvFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(set, []string{"KINGDOM_TEST_B"}) {
		t.Errorf("set = %v", set)
	}
	if a, b := os.Getenv("KINGDOM_TEST_A"), os.Getenv("KINGDOM_TEST_B"); a != "from-env" || b != "from-file" {
		t.Errorf("A=%q B=%q", a, b)
	}
}

func TestApplyEnvFile_RefusesOpenMode(t *testing.T) {
	p := writeEnv(t, "KINGDOM_TEST_C=x\n", 0o644)
	t.Setenv("KINGDOM_TEST_C", "")
	os.Unsetenv("KINGDOM_TEST_C")
	if _, err := ApplyEnvFile(p); err == nil {
		t.Fatal("accepted mode 0644")
	}
	if _, ok := os.LookupEnv("KINGDOM_TEST_C"); ok {
		t.Error("set a variable from a refused file")
	}
}

func FuzzParseEnv(f *testing.F) {
	f.Add([]byte("A=1\nexport B='2'\n# c\nC=\"x\" # y\n"))
	f.Add([]byte("=\n'\n\"A=\""))
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := parseEnv("kingdom.env", data)
		if err == nil {
			for k := range env {
				if !envNameRE.MatchString(k) {
					t.Errorf("accepted key %q", k)
				}
			}
		}
	})
}
