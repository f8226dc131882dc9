package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// docKeyRE finds the config keys docs/OPERATING.md names, written as
// `file.yaml key.path` or `manifest key`.
var docKeyRE = regexp.MustCompile("`(system|sentinel|king|envoy|chamberlain)\\.yaml ([a-z0-9_.]+)`|`manifest ([a-z0-9_.]+)`")

// lookupYAMLPath follows a dotted yaml key path through a config struct
// type (pointers, slices of structs and maps are stepped into).
func lookupYAMLPath(t reflect.Type, path string) bool {
	for _, seg := range strings.Split(path, ".") {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() == reflect.Map {
			return true // free-form (a schedule's payload)
		}
		if t.Kind() != reflect.Struct {
			return false
		}
		found := false
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == seg {
				t, found = f.Type, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// The operator's guide cannot rot: every config key it names exists in the
// config structs (by yaml tag), so renaming a key fails this test until the
// guide follows.
func TestOperatingGuide_NamesOnlyKeysThatExist(t *testing.T) {
	b, err := os.ReadFile("../../docs/OPERATING.md")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]reflect.Type{
		"system": reflect.TypeOf(System{}), "sentinel": reflect.TypeOf(Sentinel{}), "king": reflect.TypeOf(King{}),
		"envoy": reflect.TypeOf(Envoy{}), "chamberlain": reflect.TypeOf(Chamberlain{}),
	}
	seen := map[string]bool{}
	for _, m := range docKeyRE.FindAllStringSubmatch(string(b), -1) {
		typ, path := files[m[1]], m[2]
		if m[3] != "" {
			typ, path = reflect.TypeOf(Manifest{}), m[3]
		}
		if !lookupYAMLPath(typ, path) {
			t.Errorf("docs/OPERATING.md names %s, which no config struct has", m[0])
		}
		seen[m[0]] = true
	}
	if len(seen) < 40 {
		t.Fatalf("only %d config keys found in the guide: is the `file.yaml key` convention still used?", len(seen))
	}
	for _, must := range []string{"`envoy.yaml slack.allowed_users`", "`envoy.yaml slack.allow_all`", "`manifest subscribes`", "`manifest track_conversation`"} {
		if !seen[must] {
			t.Errorf("the guide no longer names %s", must)
		}
	}
}

func TestLookupYAMLPath_RefusesUnknownKeys(t *testing.T) {
	if lookupYAMLPath(reflect.TypeOf(Envoy{}), "slack.allowed_user") || lookupYAMLPath(reflect.TypeOf(System{}), "runtime.claude.modle") {
		t.Fatal("a misspelt key was accepted")
	}
	if !lookupYAMLPath(reflect.TypeOf(Sentinel{}), "polling.github.scope.repos") || !lookupYAMLPath(reflect.TypeOf(Manifest{}), "schedules.payload.x") {
		t.Fatal("a real key was refused")
	}
}

// The Slack app manifest in the repository asks for Socket Mode and the
// events and scopes the envoy needs; the docs stand alone (no reference
// outside the repository) and the README links the guide.
func TestSlackAppManifestAndDocsStandAlone(t *testing.T) {
	b, err := os.ReadFile("../../docs/slack-app-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		OAuth struct {
			Scopes struct {
				Bot []string `yaml:"bot"`
			} `yaml:"scopes"`
		} `yaml:"oauth_config"`
		Settings struct {
			Events struct {
				Bot []string `yaml:"bot_events"`
			} `yaml:"event_subscriptions"`
			SocketMode bool `yaml:"socket_mode_enabled"`
		} `yaml:"settings"`
		Features struct {
			AppHome struct {
				Messages bool `yaml:"messages_tab_enabled"`
			} `yaml:"app_home"`
		} `yaml:"features"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("slack-app-manifest.yaml: %v", err)
	}
	has := func(list []string, want ...string) {
		for _, w := range want {
			if !strings.Contains(","+strings.Join(list, ",")+",", ","+w+",") {
				t.Errorf("slack app manifest lacks %s (has %v)", w, list)
			}
		}
	}
	has(m.OAuth.Scopes.Bot, "chat:write", "reactions:write", "im:history", "app_mentions:read", "channels:history")
	has(m.Settings.Events.Bot, "message.im", "app_mention", "message.channels")
	if !m.Settings.SocketMode || !m.Features.AppHome.Messages {
		t.Errorf("socket mode %v, messages tab %v: both must be on", m.Settings.SocketMode, m.Features.AppHome.Messages)
	}
	for _, doc := range []string{"../../README.md", "../../docs/ARCHITECTURE.md", "../../docs/OPERATING.md"} {
		d, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(d), "../shared") {
			t.Errorf("%s sends the reader outside the repository (../shared)", doc)
		}
	}
	if r, _ := os.ReadFile("../../README.md"); !strings.Contains(string(r), "(docs/OPERATING.md)") {
		t.Error("README does not link docs/OPERATING.md")
	}
}
