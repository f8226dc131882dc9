package config

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var updateRanges = flag.Bool("update", false, "rewrite docs/config-ranges.md")

// rangeFiles are the configuration documents and their root types.
var rangeFiles = []struct {
	file string
	typ  reflect.Type
}{
	{SystemFile, reflect.TypeOf(System{})},
	{KingFile, reflect.TypeOf(King{})},
	{SentinelFile, reflect.TypeOf(Sentinel{})},
	{EnvoyFile, reflect.TypeOf(Envoy{})},
	{ChamberlainFile, reflect.TypeOf(Chamberlain{})},
	{"generals/<name>.yaml", reflect.TypeOf(Manifest{})},
}

type numericKey struct {
	key   string
	typ   reflect.Type
	rules rules
}

// numericKeys walks t and returns every numeric key with its rules.
func numericKeys(t reflect.Type, path string) []numericKey {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []numericKey
	switch t.Kind() {
	case reflect.Struct:
		fs := structFields(t)
		for _, name := range fs.names {
			f := fs.byName[name]
			key := join2(path, name)
			ft := f.typ
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
				reflect.Float32, reflect.Float64:
				out = append(out, numericKey{key: key, typ: ft, rules: f.rules})
			default:
				out = append(out, numericKeys(ft, key)...)
			}
		}
	case reflect.Slice, reflect.Map:
		suffix := "[]"
		if t.Kind() == reflect.Map {
			suffix = ".<name>"
		}
		out = append(out, numericKeys(t.Elem(), path+suffix)...)
	}
	return out
}

// Issue #13 item 6: every numeric key of every configuration file has a
// range (a `check` tag with both bounds), so no value can overflow what it
// becomes (a duration, a count). A key added without one fails here.
func TestConfig_EveryNumericKeyHasARange(t *testing.T) {
	n := 0
	for _, f := range rangeFiles {
		for _, k := range numericKeys(f.typ, "") {
			n++
			if k.rules.min == nil || k.rules.max == nil {
				t.Errorf("%s: %s has no range: add check:\"min=…,max=…\" (or pct, hour)", f.file, k.key)
			}
		}
	}
	if n < 30 {
		t.Fatalf("only %d numeric keys found: the walk is broken", n)
	}
}

// The ranges are documented in docs/config-ranges.md, generated from the
// tags (go test ./pkg/config -run Ranges -update).
func TestConfig_RangesDocumented(t *testing.T) {
	var b strings.Builder
	b.WriteString("# Configuration ranges\n\n")
	b.WriteString("Every numeric key and the values it accepts (inclusive). A value outside its range is a\n")
	b.WriteString("configuration error naming the file, line and key. Generated from the `check` tags in\n")
	b.WriteString("`pkg/config` by `go test ./pkg/config -run RangesDocumented -update`.\n")
	for _, f := range rangeFiles {
		fmt.Fprintf(&b, "\n## %s\n\n| key | range |\n|---|---|\n", f.file)
		for _, k := range numericKeys(f.typ, "") {
			r := "—"
			if k.rules.min != nil && k.rules.max != nil {
				r = fmtFloat(*k.rules.min) + " … " + fmtFloat(*k.rules.max)
			}
			if k.rules.opt {
				r += " (0 = unset)"
			}
			fmt.Fprintf(&b, "| `%s` | %s |\n", k.key, r)
		}
	}
	path := filepath.Join("..", "..", "docs", "config-ranges.md")
	if *updateRanges {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != b.String() {
		t.Fatalf("docs/config-ranges.md is stale (%v): run go test ./pkg/config -run RangesDocumented -update", err)
	}
}

// The values from the issue: each is refused with file:line and key.
func TestLoad_OutOfRangeValuesNameFileLineAndKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := write(ChamberlainFile, "retention:\n  results_days: 999999\n")
	if _, err := LoadChamberlain(p); err == nil || !strings.Contains(err.Error(), p+":2: retention.results_days: expected an integer from 1 to 3650, got 999999") {
		t.Errorf("results_days 999999: %v", err)
	}
	p = write("gen-a.yaml", "name: gen-a\ndescription: x\nsubscribes: [a.b]\ntimeout_seconds: 9300000000\n")
	if _, err := LoadManifest(p); err == nil || !strings.Contains(err.Error(), p+":4: timeout_seconds: expected an integer from 1 to 604800, got 9300000000") {
		t.Errorf("timeout_seconds 9300000000: %v", err)
	}
}

// Durations saturate instead of wrapping, whatever reaches them.
func TestDurations_SaturateInsteadOfOverflowing(t *testing.T) {
	for _, c := range []struct {
		got  time.Duration
		want time.Duration
	}{
		{Days(999999), math.MaxInt64}, // 2,700 years: past what a Duration holds
		{Days(3650), 3650 * 24 * time.Hour},
		{Days(math.MaxInt32 * 4), math.MaxInt64},
		{seconds(9300000000), math.MaxInt64},
		{seconds(math.MaxInt64 / 10), math.MaxInt64},
		{minutes(-math.MaxInt64 / 10), math.MinInt64},
		{hours(3), 3 * time.Hour},
	} {
		if c.got != c.want {
			t.Errorf("got %v, want %v", c.got, c.want)
		}
	}
	if Days(math.MaxInt32*4) <= 0 {
		t.Error("a huge retention became a negative duration")
	}
}

// A range on an optional key (a pointer: null = unset) is enforced too.
func TestLoad_RangesOfOptionalKeysAreChecked(t *testing.T) {
	p := filepath.Join(t.TempDir(), KingFile)
	os.WriteFile(p, []byte("budget:\n  daily_usd: -5\n"), 0o600)
	if _, err := LoadKing(p); err == nil || !strings.Contains(err.Error(), p+":2: budget.daily_usd: expected a number from 0 to 1000000, got -5") {
		t.Errorf("daily_usd -5: %v", err)
	}
	os.WriteFile(p, []byte("budget:\n  daily_usd: null\n"), 0o600)
	if _, err := LoadKing(p); err != nil {
		t.Errorf("daily_usd null: %v", err)
	}
}
