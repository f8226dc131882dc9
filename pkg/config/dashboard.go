package config

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// HTTP is chamberlain.yaml http: the dashboard (SPEC §10.16). Off while
// Listen is empty. Every TCP port asks for a bearer token, loopback too (a
// port is open to every local account; the base dir's 0700 is not): the
// one named by TokenEnv, else the one the dashboard keeps in the tree
// (0600). A listen address outside loopback needs the TokenEnv one; that is
// checked when the chamberlain starts, since the token lives in the
// environment.
type HTTP struct {
	// Listen is host:port, e.g. 127.0.0.1:8765, or ListenUnix for a unix
	// socket under the base dir that only the kingdom's user can open
	// ("" = no dashboard).
	Listen string `yaml:"listen"`
	// TokenEnv names the environment variable holding the bearer token
	// (unset: the tree's own token, $BASE_DIR/state/chamberlain/dashboard-token).
	TokenEnv string `yaml:"token_env" check:"nonempty"`
	// RequireToken asks for the token on the unix socket too; a TCP port
	// always asks.
	RequireToken bool `yaml:"require_token"`
	// AllowedHosts are further names a request's Host header may carry
	// (beside the listen host, loopback addresses and localhost), e.g. the
	// name a reverse proxy forwards. Any other name is refused, which is
	// what stops a DNS-rebinding page from reading the dashboard.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// MaxClients caps concurrent live event streams.
	MaxClients int `yaml:"max_clients" check:"min=1,max=10000"`
	// MaxConnections caps open connections (idle keep-alives and streams
	// included), so the dashboard cannot take the descriptors the
	// chamberlain's health duties need.
	MaxConnections int `yaml:"max_connections" check:"min=2,max=100000"`
}

// ListenUnix as http.listen serves on a unix socket (mode 0600 in a 0700
// directory: $BASE_DIR/run/dashboard.sock) instead of a TCP port.
const ListenUnix = "unix"

// DefaultHTTP is the dashboard's default: off.
func DefaultHTTP() HTTP {
	return HTTP{Listen: "", TokenEnv: "KINGDOM_HTTP_TOKEN", AllowedHosts: []string{}, MaxClients: 20, MaxConnections: 64}
}

// validateHTTP checks the http section's forms.
func validateHTTP(h HTTP, p *problems) {
	if h.Listen != "" && h.Listen != ListenUnix {
		host, port, err := net.SplitHostPort(h.Listen)
		n, perr := strconv.Atoi(port)
		switch {
		case err != nil:
			p.add("http.listen", "expected host:port (e.g. 127.0.0.1:8765) or %q, got %q", ListenUnix, h.Listen)
		case perr != nil || n < 0 || n > 65535:
			p.add("http.listen", "expected a port number from 0 to 65535, got %q", port)
		case host != "" && net.ParseIP(host) == nil && !validHostname(host):
			p.add("http.listen", "expected an IP address or host name, got %q", host)
		}
	}
	if h.TokenEnv != "" && !envNameRE.MatchString(h.TokenEnv) {
		p.add("http.token_env", "expected the name of an environment variable, got %q", h.TokenEnv)
	}
	for i, a := range h.AllowedHosts {
		if net.ParseIP(strings.Trim(a, "[]")) == nil && !validHostname(a) {
			p.add(fmt.Sprintf("http.allowed_hosts[%d]", i), "expected a host name or IP address without a port, got %q", a)
		}
	}
	if h.MaxConnections > 0 && h.MaxClients > 0 && h.MaxConnections <= h.MaxClients {
		p.add("http.max_connections", "expected more than http.max_clients (%d) so live streams leave room for the page, got %d", h.MaxClients, h.MaxConnections)
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
// no bearer token is set in the environment.
var ErrTokenRequired = errors.New("a bearer token is required")

// IsLoopback reports whether host names only this machine (127.0.0.0/8,
// ::1, localhost). An empty host means every interface: not loopback.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// CheckListen validates a dashboard listen address against the token from
// the environment: a loopback host (which then uses the tree's token) or
// the unix socket may go without one; any other address may not (SPEC
// §10.16). tokenEnv names the variable for the message.
func CheckListen(listen, token, tokenEnv string) error {
	if listen == ListenUnix {
		return nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("http.listen %q: expected host:port: %w", listen, err)
	}
	if port == "" {
		return fmt.Errorf("http.listen %q: missing port", listen)
	}
	if token != "" || IsLoopback(host) {
		return nil
	}
	return fmt.Errorf("http.listen %q is not a loopback address: set a bearer token in %s, or listen on 127.0.0.1: %w", listen, tokenWhere(tokenEnv), ErrTokenRequired)
}

// Check is CheckListen of h's address. Loopback and http.require_token go
// without the environment's token: the dashboard then keeps its own in the
// tree.
func (h HTTP) Check(token string) error {
	return CheckListen(h.Listen, token, h.TokenEnv)
}

func tokenWhere(tokenEnv string) string {
	if tokenEnv == "" {
		return "the environment variable named by http.token_env"
	}
	return "$" + tokenEnv + " (http.token_env)"
}
