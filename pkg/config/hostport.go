package config

import (
	"net/netip"
	"strings"
)

// The dashboard's listen address is checked here without package net:
// linking net makes every binary that loads config (soldier-spawn too,
// once per task) a dynamically linked cgo program, whose start-up costs
// about a millisecond more. The two helpers accept exactly what
// net.SplitHostPort and net.ParseIP accept (held to them by tests).

// addrError reads like net's: "address localhost: missing port in address".
type addrError struct{ addr, msg string }

func (e *addrError) Error() string {
	if e.addr == "" {
		return e.msg
	}
	return "address " + e.addr + ": " + e.msg
}

// splitHostPort splits "host:port", "[host]:port" or "[host%zone]:port"
// into host and port (either may be empty).
func splitHostPort(hostport string) (host, port string, err error) {
	colon := strings.LastIndexByte(hostport, ':')
	if colon < 0 {
		return "", "", &addrError{hostport, "missing port in address"}
	}
	open, close := 0, 0 // where '[' and ']' may no longer appear
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		switch {
		case end < 0:
			return "", "", &addrError{hostport, "missing ']' in address"}
		case end+1 == len(hostport):
			return "", "", &addrError{hostport, "missing port in address"}
		case end+1 != colon:
			if hostport[end+1] == ':' {
				return "", "", &addrError{hostport, "too many colons in address"}
			}
			return "", "", &addrError{hostport, "missing port in address"}
		}
		host = hostport[1:end]
		open, close = 1, end+1
	} else {
		host = hostport[:colon]
		if strings.IndexByte(host, ':') >= 0 {
			return "", "", &addrError{hostport, "too many colons in address"}
		}
	}
	if strings.IndexByte(hostport[open:], '[') >= 0 {
		return "", "", &addrError{hostport, "unexpected '[' in address"}
	}
	if strings.IndexByte(hostport[close:], ']') >= 0 {
		return "", "", &addrError{hostport, "unexpected ']' in address"}
	}
	return host, hostport[colon+1:], nil
}

// parseIP parses an IPv4 or IPv6 address without a zone.
func parseIP(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a, true
}

func isIP(s string) bool { _, ok := parseIP(s); return ok }
