package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChamberlainHTTP_DefaultsOffAndValidates(t *testing.T) {
	if h := DefaultChamberlain().HTTP; h.Listen != "" || h.TokenEnv != "KINGDOM_HTTP_TOKEN" || h.MaxClients != 20 {
		t.Fatalf("defaults %+v", h)
	}
	dir := t.TempDir()
	for _, tc := range []struct{ body, want string }{
		{"http:\n  listen: 127.0.0.1:8765\n", ""},
		{"http:\n  listen: \"[::1]:0\"\n  token_env: MY_TOKEN\n", ""},
		{"http:\n  listen: \":8765\"\n", ""},
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
	if c.HTTP != DefaultHTTP() {
		t.Fatalf("shipped http %+v differs from the defaults %+v", c.HTTP, DefaultHTTP())
	}
}
