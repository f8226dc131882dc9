package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/internal/testkit/modelfake"
	"github.com/kingdom-dev/kingdom/pkg/config"
)

// mcpServerJS is a minimal stdio MCP server: it writes its marker file the
// moment it starts, then answers initialize and tools/list with one tool.
const mcpServerJS = `const fs = require('fs');
fs.writeFileSync(process.argv[2], 'started ' + process.pid + '\n');
let buf = '';
process.stdin.on('data', d => {
  buf += d;
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, i); buf = buf.slice(i + 1);
    let m; try { m = JSON.parse(line); } catch (e) { continue; }
    if (m.id === undefined) continue;
    let result = {};
    if (m.method === 'initialize') result = {protocolVersion: m.params.protocolVersion, capabilities: {tools: {}}, serverInfo: {name: 'repo', version: '1'}};
    if (m.method === 'tools/list') result = {tools: [{name: 'pwn', description: 'a tool the repository offers', inputSchema: {type: 'object', properties: {}}}]};
    process.stdout.write(JSON.stringify({jsonrpc: '2.0', id: m.id, result}) + '\n');
  }
});
`

// mcpWorktree is a repository worktree whose .mcp.json names a stdio MCP
// server (the repository's own, as an attacker's PR or a base branch
// would carry it); marker is the file the server writes when it starts
// and server its .mcp.json entry (for a ~/.claude.json to name too).
// withSettings also adds the project settings that pre-approve it.
func mcpWorktree(t *testing.T, name string, withSettings bool) (work, marker, server string) {
	t.Helper()
	work, aside := t.TempDir(), t.TempDir()
	marker = filepath.Join(aside, name+".started")
	script := filepath.Join(aside, name+".js")
	if err := os.WriteFile(script, []byte(mcpServerJS), 0o600); err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not on PATH")
	}
	server = fmt.Sprintf(`{%q:{"type":"stdio","command":%q,"args":[%q,%q]}}`, name, node, script, marker)
	if err := os.WriteFile(filepath.Join(work, ".mcp.json"), []byte(`{"mcpServers":`+server+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if withSettings {
		os.MkdirAll(filepath.Join(work, ".claude"), 0o700)
		s := fmt.Sprintf(`{"enableAllProjectMcpServers":true,"enabledMcpjsonServers":[%q]}`, name)
		for _, f := range []string{"settings.json", "settings.local.json"} {
			if err := os.WriteFile(filepath.Join(work, ".claude", f), []byte(s), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, a := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "repo"}} {
		if out, err := exec.Command("git", append([]string{"-C", work}, a...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", a, err, out)
		}
	}
	return work, marker, server
}

// runClaudeIn runs the real claude with argv's flags in dir against fake
// and a private HOME; it returns the tools the CLI offered the model.
func runClaudeIn(t *testing.T, fake *modelfake.Server, dir, marker string, argv []string, claudeJSON string) []string {
	t.Helper()
	home := t.TempDir()
	if claudeJSON != "" {
		if err := os.WriteFile(filepath.Join(home, ".claude.json"), []byte(claudeJSON), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	for k, v := range fake.ClaudeEnv() {
		env = append(env, k+"="+v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = strings.NewReader(marker + " review the repository")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("claude did not end: %s", out)
	}
	reqs := fake.Requests(marker)
	if len(reqs) == 0 {
		t.Fatalf("claude never asked the model (err %v): %s", err, out)
	}
	return reqs[0].Tools
}

// The repository does not configure the engine (SPEC §12.3): no MCP
// server starts under Kingdom's claude args, not the one the repository's
// .mcp.json names (even with the project's settings pre-approving it, or
// the kingdom user's ~/.claude.json having approved it for that directory),
// and not one the kingdom user's ~/.claude.json names for every project or
// for that directory. Measured with claude 2.1.328: the empty
// --setting-sources is what keeps each of them from starting
// (disableAllHooks alone does not), so no --strict-mcp-config is needed.
// The controls start it: the CLI's own defaults with an approval, and
// Kingdom's args with an --mcp-config naming it: the server works, and
// the refusal is Kingdom's args'.
func TestRealClaude_NoMCPServerStarts(t *testing.T) {
	fake := modelfake.New()
	t.Cleanup(fake.Close)
	bin := modelfake.FindCLI(t, "claude")
	if v, err := exec.Command(bin, "--version").Output(); err == nil {
		t.Logf("claude %s", strings.TrimSpace(string(v)))
	}
	kingdom := ClaudeArgs(ClaudeRun{Command: bin, Extra: config.DefaultClaudeArgs})
	plain := []string{bin, "-p", "--output-format", "stream-json", "--verbose"}
	approved := func(work, name, _ string) string {
		return fmt.Sprintf(`{"projects":{%q:{"hasTrustDialogAccepted":true,"enableAllProjectMcpServers":true,"enabledMcpjsonServers":[%q]}}}`, work, name)
	}
	user := func(_, _, server string) string { return `{"mcpServers":` + server + `}` }
	local := func(work, _, server string) string {
		return fmt.Sprintf(`{"projects":{%q:{"hasTrustDialogAccepted":true,"mcpServers":%s}}}`, work, server)
	}
	cases := []struct {
		name       string
		settings   bool
		claudeJSON func(work, name, server string) string
		argv       []string
		starts     bool
	}{
		{"repo", false, nil, kingdom, false},
		{"repoapprovedbyproject", true, nil, kingdom, false},
		{"repoapprovedbyuser", false, approved, kingdom, false},
		{"userscope", false, user, kingdom, false},
		{"localscope", false, local, kingdom, false},
		// The controls: the CLI's own defaults start the approved and the
		// user's, and Kingdom's args start the one an --mcp-config of
		// runtime.claude.args names (the operator's way to give one).
		{"clirepoapprovedbyproject", true, nil, plain, true},
		{"cliuserscope", false, user, plain, true},
		{"kingdommcpconfig", false, nil, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := "SCEN-MCP-" + strings.ToUpper(c.name)
			fake.Script(m, modelfake.Always(modelfake.Text("nothing to do")))
			name := "srv" + c.name
			work, marker, server := mcpWorktree(t, name, c.settings)
			cj := ""
			if c.claudeJSON != nil {
				cj = c.claudeJSON(work, name, server)
			}
			argv := c.argv
			if argv == nil {
				argv = ClaudeArgs(ClaudeRun{Command: bin, Extra: append(append([]string{}, config.DefaultClaudeArgs...), "--mcp-config", `{"mcpServers":`+server+`}`)})
			}
			tools := runClaudeIn(t, fake, work, m, argv, cj)
			_, err := os.Stat(marker)
			started := err == nil
			t.Logf("%s: server started %v; tools offered: %v", c.name, started, tools)
			if started != c.starts {
				t.Fatalf("%s: the MCP server started=%v, want %v (args %q)", c.name, started, c.starts, argv[1:])
			}
		})
	}
}
