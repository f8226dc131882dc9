// Package ids validates the identifiers that become path components (SPEC
// §3.2) and builds the ones derived from time and sequence.
package ids

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrInvalid is returned (wrapped) for an ID that must not become a path.
var ErrInvalid = errors.New("invalid id")

// maxLen bounds an id (SPEC §3.2).
const maxLen = 200

// Valid reports whether id may become a path component: it matches
// ^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$ and has no "..". Written by hand:
// every Kingdom process checks ids, and compiling that expression cost each
// one half a millisecond at start.
func Valid(id string) bool {
	if len(id) == 0 || len(id) > maxLen || !alnum(id[0]) {
		return false
	}
	for i := 1; i < len(id); i++ {
		switch c := id[i]; {
		case alnum(c), c == '_', c == ':', c == '@', c == '-':
		case c == '.':
			if id[i-1] == '.' {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Check returns a descriptive error for an invalid id.
func Check(id string) error {
	if Valid(id) {
		return nil
	}
	return fmt.Errorf("%w %q: must match ^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$ without '..'", ErrInvalid, id)
}

// ValidGeneral reports whether name is a valid general name (SPEC §9.15):
// ^gen-[a-z][a-z0-9-]*$, at most 64 bytes.
func ValidGeneral(name string) bool {
	rest, ok := strings.CutPrefix(name, "gen-")
	if !ok || len(name) > 64 || rest == "" || rest[0] < 'a' || rest[0] > 'z' {
		return false
	}
	for i := 1; i < len(rest); i++ {
		if c := rest[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

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
