package main

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/app"
)

func TestDashboard_NonLoopbackWithoutTokenRefusesToStart(t *testing.T) {
	l := setup(t)
	t.Setenv("KINGDOM_HTTP_TOKEN", "")
	os.WriteFile(l.ConfigFile("chamberlain.yaml"), []byte("http:\n  listen: 0.0.0.0:0\n"), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := command().Run(ctx, []string{"chamberlain", "--base-dir", l.Base})
	if code := app.ExitCode(err); code != 2 {
		t.Fatalf("exit %d (%v), want 2 (configuration error)", code, err)
	}
	for _, want := range []string{`http.listen "0.0.0.0:0" is not a loopback address`, "$KINGDOM_HTTP_TOKEN"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, serr := os.Stat(l.Heartbeat("chamberlain")); serr == nil {
		t.Errorf("the chamberlain ticked although it refused to start")
	}
}

func TestDashboard_TokenGuardsTheServedDashboard(t *testing.T) {
	l := setup(t)
	t.Setenv("MY_DASH_TOKEN", "s3cret-token")
	os.WriteFile(l.ConfigFile("chamberlain.yaml"), []byte("http:\n  listen: 127.0.0.1:0\n  token_env: MY_DASH_TOKEN\n"), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- command().Run(ctx, []string{"chamberlain", "--base-dir", l.Base}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("chamberlain: %v", err)
		}
	}()
	// The chamberlain logs the address it bound (port 0 picks one).
	re := regexp.MustCompile(`dashboard on (http://127\.0\.0\.1:\d+/)`)
	var url string
	deadline := time.Now().Add(30 * time.Second)
	for url == "" {
		b, _ := os.ReadFile(l.SystemLog())
		if m := re.FindSubmatch(b); m != nil {
			url = string(m[1])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no dashboard address in system.log:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond) // the daemon starts in another goroutine
	}
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer wrong", http.StatusUnauthorized},
		{"Bearer s3cret-token", http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", url+"api/v1/state", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Authorization %q: %d, want %d", tc.auth, resp.StatusCode, tc.want)
		}
	}
	b, _ := os.ReadFile(l.SystemLog())
	if strings.Contains(string(b), "s3cret-token") {
		t.Errorf("the token reached system.log")
	}
}
