package operator

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// start doctor applies the chamberlain's rule before anything runs: a
// dashboard outside loopback needs its token.
func TestDoctor_DashboardOutsideLoopbackNeedsItsToken(t *testing.T) {
	l := layout.New(t.TempDir())
	l.Ensure()
	os.WriteFile(l.ConfigFile("chamberlain.yaml"), []byte("http:\n  listen: 0.0.0.0:8765\n  token_env: DOCTOR_DASH_TOKEN\n"), 0o600)
	t.Setenv("DOCTOR_DASH_TOKEN", "")
	var b bytes.Buffer
	PrintChecks(&b, Doctor(t.Context(), l, "", nil))
	out := b.String()
	if !strings.Contains(out, "[FAIL] dashboard") || !strings.Contains(out, "$DOCTOR_DASH_TOKEN") || !strings.Contains(out, "fix: set DOCTOR_DASH_TOKEN") {
		t.Fatalf("doctor does not flag the tokenless dashboard:\n%s", out)
	}
	t.Setenv("DOCTOR_DASH_TOKEN", "s3cret")
	b.Reset()
	PrintChecks(&b, Doctor(t.Context(), l, "", nil))
	if out := b.String(); !strings.Contains(out, "[ok  ] dashboard") || strings.Contains(out, "s3cret") {
		t.Fatalf("with the token the dashboard check should pass without showing it:\n%s", out)
	}
}
