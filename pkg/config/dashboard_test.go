package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestChamberlainHTTP_DefaultsOffAndValidates(t *testing.T) {
	if h := DefaultChamberlain().HTTP; h.Listen != "" || h.TokenEnv != "KINGDOM_HTTP_TOKEN" || h.MaxClients != 20 ||
		h.MaxConnections != 64 || h.RequireToken || len(h.AllowedHosts) != 0 {
		t.Fatalf("defaults %+v", h)
	}
	dir := t.TempDir()
	for _, tc := range []struct{ body, want string }{
		{"http:\n  listen: 127.0.0.1:8765\n", ""},
		{"http:\n  listen: \"[::1]:0\"\n  token_env: MY_TOKEN\n", ""},
		{"http:\n  listen: \":8765\"\n", ""},
		{"http:\n  listen: unix\n  require_token: true\n", ""},
		{"http:\n  listen: 127.0.0.1:1\n  allowed_hosts: [dash.example.org, 192.0.2.1, \"[::1]\"]\n", ""},
		{"http:\n  listen: 127.0.0.1:1\n  allowed_hosts: [ok.example, \"evil.example:80\"]\n", ":3: http.allowed_hosts[1]: expected a host name or IP address without a port"},
		{"http:\n  listen: 127.0.0.1:1\n  max_clients: 64\n", "http.max_connections: expected more than http.max_clients (64)"},
		{"http:\n  max_connections: 1\n", ":2: http.max_connections: expected an integer from 2 to 100000"},
		{"http:\n  listen: localhost\n", ":2: http.listen: expected host:port"},
		{"http:\n  listen: 127.0.0.1:99999\n", ":2: http.listen: expected a port number from 0 to 65535"},
		{"http:\n  listen: \"bad host!:80\"\n", ":2: http.listen: expected an IP address or host name"},
		{"http:\n  token_env: \"my token\"\n", ":2: http.token_env: expected the name of an environment variable"},
		{"http:\n  max_clients: 0\n", ":2: http.max_clients: expected an integer from 1 to 10000"},
	} {
		p := filepath.Join(dir, "chamberlain.yaml")
		os.WriteFile(p, []byte(tc.body), 0o600)
		c, err := LoadChamberlain(p)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.body, err)
			} else if c.HTTP.Listen == "" {
				t.Errorf("%q: listen not read", tc.body)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.body, err, tc.want)
		}
	}
}

func TestChamberlainHTTP_ShippedConfigLoads(t *testing.T) {
	c, err := LoadChamberlain(filepath.Join("..", "..", "config", "chamberlain.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.HTTP, DefaultHTTP()) {
		t.Fatalf("shipped http %+v differs from the defaults %+v", c.HTTP, DefaultHTTP())
	}
}

// Only an address outside loopback needs the environment's token: on
// loopback (and with http.require_token) the dashboard keeps its own token
// in the tree, so those start without one.
func TestHTTPCheck_OnlyOutsideLoopbackNeedsTheEnvToken(t *testing.T) {
	for _, tc := range []struct {
		h     HTTP
		token string
		ok    bool
	}{
		{HTTP{Listen: "127.0.0.1:8765"}, "", true},
		{HTTP{Listen: "127.0.0.1:8765", RequireToken: true}, "", true},
		{HTTP{Listen: "127.0.0.1:8765", RequireToken: true}, "t", true},
		{HTTP{Listen: ListenUnix}, "", true},
		{HTTP{Listen: ListenUnix, RequireToken: true}, "", true},
		{HTTP{Listen: "0.0.0.0:8765"}, "", false},
		{HTTP{Listen: "0.0.0.0:8765", RequireToken: true}, "", false},
		{HTTP{Listen: "0.0.0.0:8765"}, "t", true},
	} {
		err := tc.h.Check(tc.token)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrTokenRequired)) {
			t.Errorf("%+v token %q: %v", tc.h, tc.token, err)
		}
	}
}
