// Package ids validates the identifiers that become path components (SPEC
// §3.2) and builds the ones derived from time and sequence.
package ids

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$`)

// ErrInvalid is returned (wrapped) for an ID that must not become a path.
var ErrInvalid = errors.New("invalid id")

// Valid reports whether id may become a path component.
func Valid(id string) bool {
	return idRE.MatchString(id) && !strings.Contains(id, "..")
}

// Check returns a descriptive error for an invalid id.
func Check(id string) error {
	if Valid(id) {
		return nil
	}
	return fmt.Errorf("%w %q: must match ^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$ without '..'", ErrInvalid, id)
}

var generalRE = regexp.MustCompile(`^gen-[a-z][a-z0-9-]*$`)

// ValidGeneral reports whether name is a valid general name (SPEC §9.15).
func ValidGeneral(name string) bool { return generalRE.MatchString(name) && len(name) <= 64 }

// SlackTS turns a Slack ts ("1700000000.000200") into its id form (SPEC §9.28).
func SlackTS(ts string) string { return strings.ReplaceAll(ts, ".", "-") }

// Soldier returns a fresh soldier id, soldier-<unix>-<random>.
func Soldier(now time.Time) string {
	return fmt.Sprintf("soldier-%d-%s", now.Unix(), Rand(4))
}

// Rand returns n random bytes hex-encoded.
func Rand(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
