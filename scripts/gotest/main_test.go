package main

import (
	"strings"
	"testing"
)

func TestRelay_PrintsPlainOutputAndCollectsSkips(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:3: no db\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"--- FAIL: TestB (0.00s)\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"quiet\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestC"}`,
		`{"Action":"output","Package":"p","Output":"PASS\n"}`,
		`{"Action":"output","Package":"p","Output":"ok  \tp\t0.1s\n"}`,
	}, "\n")
	var out strings.Builder
	skipped := relay(strings.NewReader(in), &out)
	if got, want := out.String(), "--- FAIL: TestB (0.00s)\nok  \tp\t0.1s\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	if got := summary(skipped); got != "skipped: 1 (p TestA)" {
		t.Errorf("summary %q", got)
	}
}
