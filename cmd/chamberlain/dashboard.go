package main

import (
	"context"
	"fmt"
	"os"

	"github.com/kingdom-dev/kingdom/pkg/app"
	"github.com/kingdom-dev/kingdom/pkg/chamberlain"
	"github.com/kingdom-dev/kingdom/pkg/dashboard"
	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/runner"
	"github.com/kingdom-dev/kingdom/pkg/store"
)

// withDashboard is the chamberlain role plus its HTTP server, which starts
// once the leader lock is held (a standby chamberlain serves nothing).
type withDashboard struct {
	*chamberlain.Role
	dash *dashboard.Server
}

func (w withDashboard) Start(ctx context.Context) error {
	if s, ok := any(w.Role).(runner.Starter); ok {
		if err := s.Start(ctx); err != nil {
			return err
		}
	}
	return w.dash.Start(ctx)
}

// dashboardRole adds the dashboard when chamberlain.yaml http.listen is set.
// A TCP port asks for the token in $http.token_env, else for the one the
// dashboard keeps in the tree (dashboard.TokenFile, made on first start).
// A listen address outside loopback without a token in $http.token_env is a
// configuration error: the chamberlain refuses to start (exit 2).
func dashboardRole(env *app.Env, cfg chamberlain.Config, role *chamberlain.Role, st store.Store) (runner.Role, error) {
	h := cfg.Chamberlain.HTTP
	if h.Listen == "" {
		return role, nil
	}
	o := dashboard.Options{
		Layout: env.Layout, Listen: h.Listen, Token: os.Getenv(h.TokenEnv), TokenEnv: h.TokenEnv,
		RequireToken: h.RequireToken, AllowedHosts: h.AllowedHosts,
		MaxClients: h.MaxClients, MaxConns: h.MaxConnections, HeartbeatThreshold: cfg.Chamberlain.HeartbeatThreshold(),
		Budget: cfg.Budget, Clock: env.Clock, Tmux: env.Tmux, Log: env.Log,
		Store: st, Cluster: &env.System.Store,
		Verdict: func() *dashboard.Verdict { return verdictOf(role.Latest()) },
	}
	srv, err := dashboard.New(o)
	if err != nil {
		return nil, &app.ConfigError{Err: fmt.Errorf("chamberlain.yaml http: %w", err)}
	}
	return withDashboard{Role: role, dash: srv}, nil
}

// verdictOf is the verdict of the chamberlain's latest tick as the
// dashboard shows it (nil before the first).
func verdictOf(rep *chamberlain.Report) *dashboard.Verdict {
	if rep == nil {
		return nil
	}
	v := rep.Verdict()
	out := &dashboard.Verdict{At: doc.FormatTime(rep.Time), Exit: v.Exit, Problems: []string{}, Roles: map[string]string{}}
	for _, p := range v.Problems {
		out.Problems = append(out.Problems, p.String())
	}
	for _, ro := range rep.Roles {
		if s := rep.RoleState(ro); s != chamberlain.RoleOK && s != chamberlain.RoleStarting {
			out.Roles[ro.Name] = s
		}
	}
	return out
}
