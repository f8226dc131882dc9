package health_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/health"
	"github.com/kingdom-dev/kingdom/schemas"
)

// fixtureTime is the timestamp of the testdata documents.
var fixtureTime = time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)

func read(t *testing.T, name string, now time.Time) health.Snapshot {
	t.Helper()
	s, err := health.Read(filepath.Join("testdata", name), now)
	if err != nil {
		t.Fatalf("Read %s: %v", name, err)
	}
	return s
}

func TestRead_SeedDocumentWithoutTokens(t *testing.T) {
	s := read(t, "seed-000.json", fixtureTime.Add(30*time.Second))
	if s.Health != health.Green || s.TokenStatus != health.TokenUnknown || s.Stale || s.Missing || s.Invalid {
		t.Fatalf("got %+v, want fresh green with unknown tokens", s)
	}
	if s.Age != 30*time.Second {
		t.Errorf("Age = %v, want 30s", s.Age)
	}
	r := s.Resources
	if r == nil || r.System.CPUPercent != 45.2 || r.System.LoadAverage != [3]float64{1.2, 0.8, 0.6} ||
		r.Sessions.SoldiersActive != 2 || r.Sessions.SoldiersMax != 3 || len(r.Sessions.List) != 5 || r.Tokens != nil {
		t.Errorf("parsed resources: %+v", r)
	}
}

func TestRead_TokensAndHealthFromFile(t *testing.T) {
	s := read(t, "with-tokens-yellow.json", fixtureTime)
	if s.Health != health.Yellow || s.TokenStatus != health.TokenWarning {
		t.Fatalf("got %s/%s, want yellow/warning", s.Health, s.TokenStatus)
	}
	if s.Resources.Tokens.DailyCostUSD != 215.4 {
		t.Errorf("daily_cost_usd = %v", s.Resources.Tokens.DailyCostUSD)
	}
	if s.Admit("normal") || !s.Admit("high") {
		t.Error("yellow+warning: want only high admitted")
	}
}

func TestRead_Staleness(t *testing.T) {
	for _, c := range []struct {
		name      string
		file      string
		age       time.Duration
		stale     bool
		wantLevel string
	}{
		{"119s fresh", "seed-000.json", 119 * time.Second, false, health.Green},
		{"120s fresh", "seed-000.json", 120 * time.Second, false, health.Green},
		{"121s stale", "seed-000.json", 121 * time.Second, true, health.Orange},
		{"an hour stale", "seed-000.json", time.Hour, true, health.Orange},
		{"stale yellow becomes orange", "with-tokens-yellow.json", 121 * time.Second, true, health.Orange},
		{"119s in the future fresh", "seed-000.json", -119 * time.Second, false, health.Green},
		{"121s in the future stale", "seed-000.json", -121 * time.Second, true, health.Orange},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := read(t, c.file, fixtureTime.Add(c.age))
			if s.Stale != c.stale || s.Health != c.wantLevel || s.Age != c.age {
				t.Errorf("got stale=%v health=%s age=%v, want %v %s %v (%s)", s.Stale, s.Health, s.Age, c.stale, c.wantLevel, c.age, s.Reason)
			}
			if c.stale && s.Admit("high") {
				t.Error("stale snapshot admitted high priority")
			}
			if c.stale && s.Resources == nil {
				t.Error("stale snapshot dropped the parsed document")
			}
		})
	}
}

func TestRead_StaleRedStaysRed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resources.json")
	r := sample(fixtureTime)
	r.Health = health.Red
	if err := health.Write(path, r); err != nil {
		t.Fatal(err)
	}
	s, err := health.Read(path, fixtureTime.Add(10*time.Minute))
	if err != nil || s.Health != health.Red || !s.Stale {
		t.Errorf("got %+v, %v; want stale red", s, err)
	}
	if !strings.Contains(s.Reason, "10m0s old") {
		t.Errorf("reason %q does not say how old", s.Reason)
	}
}

func TestRead_MissingFileIsGreenUnknown(t *testing.T) {
	s, err := health.Read(filepath.Join(t.TempDir(), "resources.json"), fixtureTime)
	if err != nil {
		t.Fatal(err)
	}
	if s.Health != health.Green || s.TokenStatus != health.TokenUnknown || !s.Missing || s.Resources != nil {
		t.Errorf("got %+v, want missing green/unknown", s)
	}
	if !s.Admit("low") {
		t.Error("missing resources.json must admit everything (SPEC §9.18)")
	}
}

func TestRead_BrokenFilesAreOrange(t *testing.T) {
	for file, want := range map[string]string{
		"truncated.json":           "not valid JSON",
		"html-page.json":           "not valid JSON",
		"empty.json":               "not valid JSON",
		"unknown-health.json":      "at '/health'",
		"seed-cost-as-string.json": "at '/tokens/daily_cost_usd'",
	} {
		t.Run(file, func(t *testing.T) {
			s := read(t, file, fixtureTime)
			if s.Health != health.Orange || !s.Invalid || s.Resources != nil || s.TokenStatus != health.TokenUnknown {
				t.Errorf("got %+v, want invalid orange", s)
			}
			if !strings.Contains(s.Reason, want) || !strings.Contains(s.Reason, "orange") {
				t.Errorf("reason %q, want it to mention %q and orange", s.Reason, want)
			}
			if s.Admit("high") {
				t.Error("broken resources.json admitted high priority")
			}
		})
	}
}

func TestRead_UnreadableIsOrangeWithError(t *testing.T) {
	dir := t.TempDir() // a directory cannot be read as a file, even by root
	s, err := health.Read(dir, fixtureTime)
	if err == nil {
		t.Fatal("got nil error for an unreadable path")
	}
	if s.Health != health.Orange || !s.Invalid || s.Admit("high") {
		t.Errorf("got %+v, want invalid orange", s)
	}
	if !strings.HasPrefix(err.Error(), "read resources ") {
		t.Errorf("error %q", err)
	}
}

func sample(ts time.Time) *health.Resources {
	return &health.Resources{
		Timestamp: doc.FormatTime(ts),
		System:    health.SystemStats{CPUPercent: 12.5, MemoryPercent: 33.3, DiskPercent: 71, LoadAverage: [3]float64{0.5, 0.25, 0.125}},
		Sessions:  health.SessionStats{SoldiersActive: 1, SoldiersMax: 3, List: []string{"king", "soldier-1-ab"}},
		Health:    health.Green,
		Tokens:    &health.Tokens{Status: health.TokenCritical, DailyCostUSD: 280.25, DailyInputTokens: 1 << 40, DailyOutputTokens: 7},
	}
}

func TestWrite_RoundTripsAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resources.json")
	want := sample(fixtureTime)
	if err := health.Write(path, want); err != nil {
		t.Fatal(err)
	}
	s, err := health.Read(path, fixtureTime.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Resources, want) || s.TokenStatus != health.TokenCritical || s.Health != health.Green {
		t.Errorf("round trip:\n got %+v\nwant %+v", s.Resources, want)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir holds %d entries, want only resources.json (no temps)", len(entries))
	}
}

func TestWrite_NilListAndNoTokensStillValid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resources.json")
	r := &health.Resources{Timestamp: doc.FormatTime(fixtureTime), Health: health.Yellow}
	if err := health.Write(path, r); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `"list": []`) || strings.Contains(string(data), "tokens") {
		t.Errorf("wrote:\n%s", data)
	}
	s, err := health.Read(path, fixtureTime)
	if err != nil || s.TokenStatus != health.TokenUnknown || s.Health != health.Yellow {
		t.Errorf("got %+v, %v; want yellow with unknown tokens", s, err)
	}
}

func TestWrite_RefusesInvalidAndKeepsOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resources.json")
	if err := health.Write(path, sample(fixtureTime)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	bad := sample(fixtureTime)
	bad.Health = "purple"
	err := health.Write(path, bad)
	if err == nil || !strings.Contains(err.Error(), "at '/health'") {
		t.Fatalf("got %v, want a schema error about /health", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("invalid write replaced the file")
	}
}

// TestResources_FieldsMatchSchema keeps the Go model and schemas/resources.json
// from drifting: the JSON keys of a fully populated value equal the schema's
// properties at every level.
func TestResources_FieldsMatchSchema(t *testing.T) {
	data, err := json.Marshal(sample(fixtureTime))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	raw, err := schemas.FS.ReadFile("resources.json")
	if err != nil {
		t.Fatal(err)
	}
	var sch map[string]any
	if err := json.Unmarshal(raw, &sch); err != nil {
		t.Fatal(err)
	}
	compareKeys(t, "", got, sch)
}

func compareKeys(t *testing.T, at string, doc, sch map[string]any) {
	t.Helper()
	props, _ := sch["properties"].(map[string]any)
	var docKeys, schKeys []string
	for k := range doc {
		docKeys = append(docKeys, k)
	}
	for k := range props {
		schKeys = append(schKeys, k)
	}
	slices.Sort(docKeys)
	slices.Sort(schKeys)
	if !slices.Equal(docKeys, schKeys) {
		t.Errorf("at %q: Go keys %v, schema properties %v", at, docKeys, schKeys)
	}
	for k, v := range doc {
		if sub, ok := v.(map[string]any); ok {
			if subSch, ok := props[k].(map[string]any); ok {
				compareKeys(t, at+"/"+k, sub, subSch)
			}
		}
	}
}

func FuzzJudge(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b, int64(0))
	}
	levels := []string{health.Green, health.Yellow, health.Orange, health.Red}
	tokens := []string{health.TokenOK, health.TokenWarning, health.TokenCritical, health.TokenUnknown}
	f.Fuzz(func(t *testing.T, data []byte, offset int64) {
		s := health.Judge(data, fixtureTime.Add(time.Duration(offset)))
		if !slices.Contains(levels, s.Health) || !slices.Contains(tokens, s.TokenStatus) {
			t.Fatalf("snapshot outside the known levels: %+v", s)
		}
		if s.Invalid != (s.Resources == nil) {
			t.Fatalf("Invalid=%v but Resources=%v", s.Invalid, s.Resources)
		}
		if (s.Invalid || s.Stale) && health.Rank(s.Health) < health.Rank(health.Orange) {
			t.Fatalf("broken or stale snapshot is %s", s.Health)
		}
	})
}
