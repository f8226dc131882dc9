package chamberlain

import (
	"errors"
	"github.com/kingdom-dev/kingdom/pkg/control"
	"github.com/kingdom-dev/kingdom/pkg/watchstatus"
	"strings"
	"testing"
	"time"
)

func TestReport_VerdictCoversRolesAndResources(t *testing.T) {
	up := func(name string) RoleStatus { return RoleStatus{Name: name, State: RoleOK, Session: true} }
	noSession := func(name string) RoleStatus { return RoleStatus{Name: name, State: RoleOK} }
	stale := func(name string) RoleStatus {
		return RoleStatus{Name: name, State: RoleDead, Session: true, Age: 5 * time.Minute}
	}
	core := []RoleStatus{up("sentinel"), up("king"), up("envoy"), up("chamberlain")}
	with := func(rs ...RoleStatus) []RoleStatus {
		out := append([]RoleStatus{}, core...)
		for _, r := range rs {
			replaced := false
			for i := range out {
				if out[i].Name == r.Name {
					out[i], replaced = r, true
				}
			}
			if !replaced {
				out = append(out, r)
			}
		}
		return out
	}
	for _, c := range []struct {
		name   string
		rep    Report
		code   int
		naming string
	}{
		{"all well", Report{Health: Green, Roles: with(up("gen-pr"))}, 0, ""},
		{"yellow", Report{Health: Yellow, Reason: "cpu", Roles: with(up("gen-pr"))}, 1, "health yellow"},
		{"orange", Report{Health: Orange, Roles: core}, 1, "health orange"},
		{"a general without a session", Report{Health: Green, Roles: with(noSession("gen-pr"))}, 1, "gen-pr down (no tmux session)"},
		{"a general with a stale heartbeat", Report{Health: Green, Roles: with(stale("gen-pr"))}, 1, "gen-pr down (heartbeat 5m0s old)"},
		{"king killed", Report{Health: Green, Roles: with(noSession("king"))}, 2, "king down"},
		{"sentinel hung", Report{Health: Yellow, Roles: with(stale("sentinel"))}, 2, "sentinel down"},
		{"chamberlain gone", Report{Health: Green, Roles: with(noSession("chamberlain"))}, 2, "chamberlain down"},
		{"red", Report{Health: Red, Roles: core}, 2, "health red"},
		{"a general starting (session, no heartbeat yet)", Report{Health: Green, Roles: with(RoleStatus{Name: "gen-pr", State: RoleNotStarted, Session: true})}, 0, ""},
		{"no metrics", Report{MetricsErr: errors.New("no /proc"), Roles: core}, 3, "resources cannot evaluate"},
		{"paused by the operator", Report{Health: Green, Roles: core, Paused: &control.Pause{Since: "2026-11-21T10:00:00Z", By: "alice@host"}}, 1, "kingdom paused since"},
		{"a watcher failing every poll", Report{Health: Green, Roles: core, Watchers: map[string]watchstatus.Watcher{
			"github": {ConsecutiveFailures: 5, LastError: "GET /notifications: 401 Bad credentials"}}}, 1, "watcher:github failing: 5 polls in a row (last: GET /notifications: 401"},
		{"a watcher failing once", Report{Health: Green, Roles: core, Watchers: map[string]watchstatus.Watcher{
			"jira": {ConsecutiveFailures: 1, LastError: "timeout"}}}, 0, ""},
		{"bad manifest", Report{Health: Green, Roles: core, ConfigErr: errors.New("gen-x.yaml:1: name")}, 3, "gen-x.yaml"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := c.rep.Verdict()
			if v.Exit != c.code {
				t.Errorf("code %d, want %d (%v)", v.Exit, c.code, v.Problems)
			}
			if got := v.line(); !strings.Contains(got, c.naming) || (c.naming == "" && len(v.Problems) != 0) {
				t.Errorf("problems %q, want them to name %q", got, c.naming)
			}
		})
	}
}
