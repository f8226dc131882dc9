package tcpproxy

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo serves lines back until t ends.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through addr and reads the echo within d: a long
// d where an answer is expected (it only ends a broken test), a short one
// where none may come.
func roundTrip(addr string, d time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err = bufio.NewReader(c).ReadString('\n')
	return err
}

func TestProxy_CutDropsAndRefusesHealForwards(t *testing.T) {
	p := Start(t, echo(t))
	if err := roundTrip(p.Addr(), time.Minute); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	live, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	live.Write([]byte("a\n"))
	live.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(live)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}

	p.Cut()
	live.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("an open connection survived Cut")
	}
	if err := roundTrip(p.Addr(), 2*time.Second); err == nil {
		t.Fatal("a new connection was forwarded while cut")
	}

	p.Heal()
	if err := roundTrip(p.Addr(), time.Minute); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}

func TestProxy_SilenceHangsBothWaysHealClosesAndForwards(t *testing.T) {
	p := Start(t, echo(t))
	live, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	r := bufio.NewReader(live)
	live.SetDeadline(time.Now().Add(time.Minute))
	live.Write([]byte("a\n"))
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}

	p.Silence()
	live.SetDeadline(time.Now().Add(500 * time.Millisecond))
	live.Write([]byte("b\n"))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("an answer came through a silenced link")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("a silenced connection ended (%v), want it to hang", err)
	}
	// A new connection is accepted and never answered.
	if err := roundTrip(p.Addr(), 2*time.Second); err == nil {
		t.Fatal("a new connection was answered while silenced")
	}

	p.Heal()
	live.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("a connection silenced mid-stream survived Heal")
	}
	if err := roundTrip(p.Addr(), time.Minute); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}
