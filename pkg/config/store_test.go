package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestStore_DefaultsMatchSpec(t *testing.T) {
	s := DefaultSystem().Store
	if s.Kind != "files" || s.DSNEnv != "KINGDOM_PG_DSN" || s.HostID != "" ||
		s.SelfFence() != 5*time.Minute || s.Takeover() != 10*time.Minute {
		t.Errorf("store defaults: %+v", s)
	}
}

func TestStore_ErrorsNameFileLineAndKey(t *testing.T) {
	cases := []errCase{
		{"kind", SystemFile, "store:\n  kind: etcd\n",
			[]string{":2: store.kind: expected one of files|postgres, got \"etcd\""}},
		{"takeover not after self-fence", SystemFile, "store:\n  self_fence_seconds: 600\n  takeover_seconds: 600\n",
			[]string{":3: store.takeover_seconds: expected more than store.self_fence_seconds (600)", "got 600"}},
		{"takeover below the default self-fence", SystemFile, "store:\n  takeover_seconds: 120\n",
			[]string{":2: store.takeover_seconds: expected more than store.self_fence_seconds (300)"}},
		{"host id with a slash", SystemFile, "store:\n  host_id: ../etc\n",
			[]string{":2: store.host_id: expected a safe id", `got "../etc"`}},
		{"host id with a space", SystemFile, "store:\n  host_id: \"web 1\"\n",
			[]string{":2: store.host_id: expected a safe id"}},
		{"dsn env", SystemFile, "store:\n  dsn_env: \"pg-dsn\"\n",
			[]string{":2: store.dsn_env: expected an environment variable name, got \"pg-dsn\""}},
		{"self fence too short", SystemFile, "store:\n  self_fence_seconds: 1\n",
			[]string{":2: store.self_fence_seconds: expected an integer from 10 to 86400, got 1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "config/"+tc.file, tc.content)
			_, err := loaders[tc.file](p)
			assertErr(t, err, p, tc.want...)
		})
	}
}

func TestStore_PostgresSectionLoads(t *testing.T) {
	p := writeFile(t, t.TempDir(), "config/"+SystemFile,
		"store:\n  kind: postgres\n  dsn_env: KD_DSN\n  host_id: web-1.example\n  self_fence_seconds: 60\n  takeover_seconds: 90\n")
	s, err := LoadSystem(p)
	if err != nil {
		t.Fatal(err)
	}
	want := Store{Kind: StorePostgres, DSNEnv: "KD_DSN", HostID: "web-1.example", SelfFenceSeconds: 60, TakeoverSeconds: 90,
		CallTimeoutSeconds: 10, ConnectTimeoutSeconds: 10, LeaderStallSeconds: 120}
	if s.Store != want {
		t.Errorf("store = %+v, want %+v", s.Store, want)
	}
}

func TestStore_ResolveHostID(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip("no hostname on this machine")
	}
	rec := hostIDRecordFor(t, "unit-host")
	cases := []struct {
		name, env, yaml, rec, want, wantErr string
	}{
		{name: "env wins over yaml", env: "env-host", yaml: "yaml-host", want: "env-host"},
		{name: "env wins over the record", env: "env-host", yaml: "yaml-host", rec: rec, want: "env-host"},
		{name: "the record over yaml", yaml: "yaml-host", rec: rec, want: "unit-host"},
		{name: "no record: yaml", yaml: "yaml-host", rec: rec + ".none", want: "yaml-host"},
		{name: "yaml over hostname", yaml: "yaml-host", want: "yaml-host"},
		{name: "hostname last", want: host},
		{name: "unsafe env value names its source", env: "a/b", yaml: "yaml-host", wantErr: "from KINGDOM_HOST_ID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(HostIDEnv, tc.env)
			got, err := Store{HostID: tc.yaml, HostIDFile: tc.rec}.ResolveHostID()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
}

// hostIDRecordFor writes id where start records it under a temp state dir.
func hostIDRecordFor(t *testing.T, id string) string {
	t.Helper()
	p := HostIDRecord(t.TempDir())
	os.MkdirAll(filepath.Dir(p), 0o700)
	if err := os.WriteFile(p, []byte(id+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The DSN may carry a password: its variable is a secret under the name the
// config gives and under the default name.
func TestSecretEnvNames_IncludeTheDSNVariable(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, SystemFile, "store:\n  kind: postgres\n  dsn_env: CLUSTER_DSN\n")
	names := SecretEnvNames(dir)
	for _, want := range []string{"CLUSTER_DSN", "KINGDOM_PG_DSN"} {
		if !slices.Contains(names, want) {
			t.Errorf("SecretEnvNames = %v, want it to contain %s", names, want)
		}
	}
	if names := SecretEnvNamesWith(nil, t.TempDir()); !slices.Contains(names, "KINGDOM_PG_DSN") {
		t.Errorf("without system.yaml: %v, want KINGDOM_PG_DSN", names)
	}
}

// An engine's model key may be both kept out of tmux (secret_env) and
// passed to the soldier (env_passthrough): that is what it is for.
func TestSystem_ModelKeyMayBeASecretAndPassedThrough(t *testing.T) {
	p := writeFile(t, t.TempDir(), "config/"+SystemFile,
		"runtime:\n  secret_env: [CLAUDE_CODE_OAUTH_TOKEN, DEPLOY_KEY]\n  env_passthrough: [PATH, CLAUDE_CODE_OAUTH_TOKEN]\n")
	if _, err := LoadSystem(p); err != nil {
		t.Fatalf("a model key in secret_env and env_passthrough: %v", err)
	}
}
