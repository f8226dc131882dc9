// Package tcpproxy is a loopback TCP proxy a test controls, to simulate a
// network partition between one client and a server (SPEC §11.7: on
// loopback, never with routes to other address ranges).
//
//	p := tcpproxy.Start(t, "127.0.0.1:5432")
//	dsn := strings.Replace(dsn, "127.0.0.1:5432", p.Addr(), 1)
//	p.Cut()     // every connection drops; new ones are closed at once
//	p.Silence() // nothing answers: bytes are dropped, connections hang
//	p.Heal()    // new connections are forwarded again
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards connections from its listener to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    bool
	silent bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// Start listens on 127.0.0.1:0 and forwards to target until t ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tcpproxy: listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's address (host:port) for clients.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut partitions the link: every forwarded connection is closed on both
// sides, and connections made while cut are closed as soon as accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Silence partitions the link silently, as a dropped route does: every
// connection stays open but the bytes sent either way are dropped, and
// connections made meanwhile are accepted and never answered. A client
// notices only by its own timeouts (TCP keepalives to the proxy are still
// answered). A side that closes its connection still closes the other
// side's: the server frees a session its client gave up at once, as it
// would only after its own keepalives across a real dropped route.
func (p *Proxy) Silence() {
	p.mu.Lock()
	p.silent = true
	p.mu.Unlock()
}

// Heal forwards new connections again. After a Silence every connection
// open now is closed first: bytes were dropped from its streams.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.silent {
		for c := range p.conns {
			c.Close()
		}
	}
	p.cut, p.silent = false, false
}

func (p *Proxy) isSilent() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.silent
}

// Close stops the proxy and drops every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// track registers c, or refuses it while cut.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		client.Close()
		return
	}
	defer p.untrack(client)
	if p.isSilent() {
		// Never answered: held until the client gives up or Heal or
		// Close drops it.
		io.Copy(io.Discard, client)
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		server.Close()
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 && !p.isSilent() {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		// One direction ended: end both, as a dropped link would.
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	<-done
}
