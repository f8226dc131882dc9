package pg

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/pgtest"
)

// Every connection of the pool carries the process's application_name,
// and the pool is small.
func TestOpen_NamesItsConnectionsAndKeepsAPoolOfThree(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, pgtest.DB(t), "host-a", Options{AppName: "kingdom-king@host-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var name string
	if err := st.pool.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != "kingdom-king@host-a" {
		t.Errorf("application_name %q, want kingdom-king@host-a", name)
	}
	if n := st.pool.Config().MaxConns; n != 3 {
		t.Errorf("pool max %d connections, want 3", n)
	}
}

// A server that accepts the connection and never answers ends Open with
// an error once the connect timeout passes, even with no deadline on ctx.
func TestOpen_ServerThatNeverAnswersTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent
		}
	}()
	done := make(chan error, 1)
	go func() {
		_, err := Open(context.Background(), "postgres://u@"+ln.Addr().String()+"/db?sslmode=disable", "host-a",
			Options{ConnectTimeout: 200 * time.Millisecond})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Open succeeded against a silent server")
		}
	case <-time.After(2 * time.Minute): // far beyond the timeout: only a hang gets here
		t.Fatal("Open hung against a server that never answers")
	}
}

// A database migrated by a newer binary is refused, naming both versions.
func TestOpen_RefusesANewerSchema(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DB(t)
	st, err := Open(ctx, dsn, "host-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.pool.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES (999)"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	_, err = Open(ctx, dsn, "host-a")
	if err == nil || !strings.Contains(err.Error(), "version 999") || !strings.Contains(err.Error(), "newer than this binary's") {
		t.Fatalf("Open on a newer schema: %v, want a refusal naming both versions", err)
	}
}
