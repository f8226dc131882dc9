package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// HTTP is chamberlain.yaml http: the dashboard (SPEC §10.16). Off while
// Listen is empty. A listen address outside loopback also needs the token
// named by TokenEnv; that is checked when the chamberlain starts, since the
// token lives in the environment.
type HTTP struct {
	// Listen is host:port, e.g. 127.0.0.1:8765 ("" = no dashboard).
	Listen string `yaml:"listen"`
	// TokenEnv names the environment variable holding the bearer token.
	TokenEnv string `yaml:"token_env" check:"nonempty"`
	// MaxClients caps concurrent live event streams.
	MaxClients int `yaml:"max_clients" check:"min=1,max=10000"`
}

// DefaultHTTP is the dashboard's default: off.
func DefaultHTTP() HTTP {
	return HTTP{Listen: "", TokenEnv: "KINGDOM_HTTP_TOKEN", MaxClients: 20}
}

// validateHTTP checks the http section's forms.
func validateHTTP(h HTTP, p *problems) {
	if h.Listen != "" {
		host, port, err := splitHostPort(h.Listen)
		n, perr := strconv.Atoi(port)
		switch {
		case err != nil:
			p.add("http.listen", "expected host:port (e.g. 127.0.0.1:8765), got %q", h.Listen)
		case perr != nil || n < 0 || n > 65535:
			p.add("http.listen", "expected a port number from 0 to 65535, got %q", port)
		case host != "" && !isIP(host) && !validHostname(host):
			p.add("http.listen", "expected an IP address or host name, got %q", host)
		}
	}
	if h.TokenEnv != "" && !envNameRE.MatchString(h.TokenEnv) {
		p.add("http.token_env", "expected the name of an environment variable, got %q", h.TokenEnv)
	}
}

func validHostname(h string) bool {
	if len(h) == 0 || len(h) > 253 {
		return false
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// ErrTokenRequired: the dashboard's listen address is outside loopback and
// no bearer token is set.
var ErrTokenRequired = errors.New("a bearer token is required outside loopback")

// IsLoopback reports whether host names only this machine (127.0.0.0/8,
// ::1, localhost). An empty host means every interface: not loopback.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, ok := parseIP(strings.Trim(host, "[]"))
	return ok && ip.IsLoopback()
}

// CheckListen validates a dashboard listen address against its token: a
// loopback host may go without one; any other address may not (SPEC
// §10.16). tokenEnv names the variable for the message.
func CheckListen(listen, token, tokenEnv string) error {
	host, port, err := splitHostPort(listen)
	if err != nil {
		return fmt.Errorf("http.listen %q: expected host:port: %w", listen, err)
	}
	if port == "" {
		return fmt.Errorf("http.listen %q: missing port", listen)
	}
	if token != "" || IsLoopback(host) {
		return nil
	}
	where := "the environment variable named by http.token_env"
	if tokenEnv != "" {
		where = "$" + tokenEnv + " (http.token_env)"
	}
	return fmt.Errorf("http.listen %q is not a loopback address: set a bearer token in %s, or listen on 127.0.0.1: %w", listen, where, ErrTokenRequired)
}
