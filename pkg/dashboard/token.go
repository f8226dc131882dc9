package dashboard

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// tokenCookie carries the token's SHA-256 (hex) once a browser opened the
// page with ?token=: HttpOnly (no script reads it), SameSite=Strict (no other site's
// page sends it).
const tokenCookie = "kingdom_dashboard"

// TokenFile is where the dashboard keeps its own bearer token when
// $http.token_env is unset: $BASE_DIR/state/chamberlain/dashboard-token,
// mode 0600 in the 0700 tree, so only the kingdom's user can read it.
func TokenFile(l layout.Layout) string {
	return filepath.Join(l.RoleStateDir("chamberlain"), "dashboard-token")
}

// TreeToken returns the token kept in TokenFile, creating it (32 random
// bytes, hex) on first use. Two chamberlains starting at once agree: the
// file appears whole or not at all (hard link of a finished temp file),
// and the loser reads the winner's.
func TreeToken(l layout.Layout) (string, error) {
	path := TokenFile(l)
	if tok, err := readToken(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	if err := layout.EnsureDir(filepath.Dir(path)); err != nil {
		return "", err
	}
	b := make([]byte, 32)
	rand.Read(b)
	f, err := os.CreateTemp(filepath.Dir(path), ".dashboard-token-*")
	if err != nil {
		return "", fmt.Errorf("create dashboard token: %w", err)
	}
	defer os.Remove(f.Name())
	_, werr := f.WriteString(hex.EncodeToString(b) + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "", fmt.Errorf("write dashboard token: %w", werr)
	}
	if err := os.Link(f.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("create dashboard token %s: %w", path, err)
	}
	return readToken(path)
}

// readToken reads a token file, refusing one that other accounts may read
// (it would open the dashboard to them) and an empty one.
func readToken(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("dashboard token %s: want a regular file of mode 0600, got %v (remove it and a new one is made)", path, fi.Mode())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read dashboard token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("dashboard token %s is empty (remove it and a new one is made)", path)
	}
	return tok, nil
}
