package config

import (
	"net"
	"strings"
	"testing"
)

// agreeWithNet holds splitHostPort and parseIP to package net on s.
func agreeWithNet(t *testing.T, s string) {
	t.Helper()
	h1, p1, err1 := net.SplitHostPort(s)
	h2, p2, err2 := splitHostPort(s)
	if (err1 == nil) != (err2 == nil) || h1 != h2 || p1 != p2 {
		t.Fatalf("splitHostPort(%q) = %q, %q, %v; net says %q, %q, %v", s, h2, p2, err2, h1, p1, err1)
	}
	if err1 != nil && err1.Error() != err2.Error() {
		t.Fatalf("splitHostPort(%q) error %q; net says %q", s, err2, err1)
	}
	ip := net.ParseIP(s)
	a, ok := parseIP(s)
	if (ip != nil) != ok {
		t.Fatalf("parseIP(%q) ok=%v; net.ParseIP says %v", s, ok, ip)
	}
	if ok && ip.IsLoopback() != a.IsLoopback() {
		t.Fatalf("%q: IsLoopback %v; net says %v", s, a.IsLoopback(), ip.IsLoopback())
	}
}

func TestHostPort_AgreesWithNet(t *testing.T) {
	for _, s := range []string{"", ":", "127.0.0.1:8765", "localhost:80", ":8765", "[::1]:80", "[::1]", "::1", "[::1]:",
		"[fe80::1%eth0]:80", "fe80::1%eth0", "a:b:c", "[a]b:80", "[a]:b:80", "[[a]]:80", "a]:80", "a[:80", "[a:80",
		"127.0.0.1", "127.1.2.3", "::ffff:127.0.0.1", "0:0:0:0:0:0:0:1", "1.2.3.4", "01.2.3.4", "1.2.3", "256.1.1.1",
		"::", "0.0.0.0", "bad host!:80", "[::ffff:127.0.0.1]:1"} {
		agreeWithNet(t, s)
	}
	// Every string up to length 4 over the characters that matter.
	alphabet := []string{"[", "]", ":", "1", "a", "%", "."}
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		agreeWithNet(t, prefix)
		if n > 0 {
			for _, c := range alphabet {
				gen(prefix+c, n-1)
			}
		}
	}
	gen("", 5)
	agreeWithNet(t, strings.Repeat("1", 300)+":1")
}

func FuzzHostPort(f *testing.F) {
	for _, s := range []string{"127.0.0.1:8765", "[::1]:80", "[fe80::1%eth0]:80", "::ffff:127.0.0.1"} {
		f.Add(s)
	}
	f.Fuzz(agreeWithNet)
}
