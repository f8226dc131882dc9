package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"testing/fstest"

	configfiles "github.com/kingdom-dev/kingdom/config"
)

func TestInstall_CreatesMissingNeverOverwrites(t *testing.T) {
	fsys := fstest.MapFS{
		"system.yaml":                   {Data: []byte("runtime: {}\n")},
		"king.yaml":                     {Data: []byte("retry: {}\n")},
		"generals/gen-a.yaml":           {Data: []byte("name: gen-a\n")},
		"generals/templates/default.md": {Data: []byte("{{task_id}}\n")},
		".hidden":                       {Data: []byte("x")},
	}
	dst := filepath.Join(t.TempDir(), "config")
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	edited := writeFile(t, dst, "king.yaml", "# operator's edit\n")

	created, err := Install(fsys, dst)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join(dst, "generals/gen-a.yaml"),
		filepath.Join(dst, "generals/templates/default.md"),
		filepath.Join(dst, "system.yaml"),
	}
	slices.Sort(created)
	if !reflect.DeepEqual(created, want) {
		t.Errorf("created %v\nwant %v", created, want)
	}
	if b, _ := os.ReadFile(edited); string(b) != "# operator's edit\n" {
		t.Errorf("overwrote king.yaml: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dst, ".hidden")); err == nil {
		t.Error("installed a dot-file")
	}
	for _, p := range want {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %o, want 0600", p, fi.Mode().Perm())
		}
	}
	for _, d := range []string{"generals", "generals/templates"} {
		if fi, err := os.Stat(filepath.Join(dst, d)); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want a 0700 dir", d, fi, err)
		}
	}
	if ents, _ := os.ReadDir(dst); len(ents) != 3 {
		t.Errorf("leftovers in %s: %v", dst, ents)
	}

	// A second run creates nothing and changes nothing.
	if err := os.WriteFile(filepath.Join(dst, "system.yaml"), []byte("# edited\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := Install(fsys, dst)
	if err != nil || len(again) != 0 {
		t.Errorf("second Install: created %v, err %v", again, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "system.yaml")); string(b) != "# edited\n" {
		t.Errorf("overwrote system.yaml: %q", b)
	}
}

func TestInstall_EmbeddedDefaultsLoad(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "config")
	created, err := Install(configfiles.FS, dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{SystemFile, SentinelFile, KingFile, EnvoyFile, ChamberlainFile, "kingdom.env.example"} {
		if !slices.Contains(created, filepath.Join(dst, name)) {
			t.Errorf("Install did not create %s (created %v)", name, created)
		}
	}
	a, err := LoadAll(dst)
	if err != nil {
		t.Fatalf("LoadAll of installed defaults: %v", err)
	}
	if !reflect.DeepEqual(a.Chamberlain, DefaultChamberlain()) || !reflect.DeepEqual(a.System, DefaultSystem()) ||
		!reflect.DeepEqual(a.Envoy, DefaultEnvoy()) {
		t.Error("installed defaults differ from DefaultX()")
	}
}
