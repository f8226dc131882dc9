package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/logging"
)

// LastExit is a role's last fatal error, state/<role>/last-exit: a role
// runs in a tmux session whose stderr dies with it, so this file is how
// start learns why it ended (a config error, a refused lock) and says so
// in its log, the journal under systemd.
type LastExit struct {
	Exit  int    `json:"exit"`
	Error string `json:"error"` // redacted, at most maxExitError bytes
	At    string `json:"at"`
}

const maxExitError = 2000

// lastExitPath is where this process records its fatal error; set once by
// Setup, when the process knows its role and tree.
var lastExitPath atomic.Pointer[string]

func recordExitsOf(path string) { lastExitPath.Store(&path) }

// writeLastExit records err for start; best effort, the process is ending.
func writeLastExit(code int, err error) {
	p := lastExitPath.Load()
	if p == nil {
		return
	}
	if err := WriteLastExit(*p, code, err, time.Now()); err != nil {
		fmt.Fprintf(os.Stderr, "record last exit: %v\n", err)
	}
}

// WriteLastExit writes the LastExit of err to path (0600).
func WriteLastExit(path string, code int, err error, now time.Time) error {
	msg := logging.Redact(err.Error())
	if len(msg) > maxExitError {
		msg = msg[:maxExitError] + "…"
	}
	b, _ := json.Marshal(LastExit{Exit: code, Error: msg, At: doc.FormatTime(now)})
	return atomicfile.WriteFile(path, b, 0o600)
}

// ReadLastExit reads a role's LastExit; nil when there is none.
func ReadLastExit(path string) (*LastExit, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var le LastExit
	if err := json.Unmarshal(b, &le); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return &le, nil
}
