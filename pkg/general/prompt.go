package general

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// MaxPromptBytes is the largest prompt a general hands to a soldier.
const MaxPromptBytes = 200 * 1024

// ErrPromptTooLarge is returned by BuildPrompt for prompts over
// MaxPromptBytes.
var ErrPromptTooLarge = errors.New("prompt too large")

// Vars are the values a template can name.
type Vars struct {
	TaskID  string
	Repo    string
	Type    string
	RepoDir string
	Payload map[string]any
}

// Render substitutes {{task_id}} {{repo}} {{type}} {{repo_dir}} (and their
// upper-case aliases) and {{payload.a.b}} in tmpl in a single left-to-right
// pass: inserted values are never scanned again, so payload text cannot
// inject template syntax. Missing payload keys become ""; unknown
// placeholders stay as written.
func Render(tmpl string, v Vars) string {
	var b strings.Builder
	b.Grow(len(tmpl))
	s := tmpl
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		j := strings.Index(s, "}}")
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		key := strings.TrimSpace(s[2:j])
		val, ok := lookup(key, v)
		if !ok {
			b.WriteString(s[:2])
			s = s[2:]
			continue
		}
		b.WriteString(val)
		s = s[j+2:]
	}
}

func lookup(key string, v Vars) (string, bool) {
	switch key {
	case "task_id", "TASK_ID":
		return v.TaskID, true
	case "repo", "REPO":
		return v.Repo, true
	case "type", "TYPE":
		return v.Type, true
	case "repo_dir", "REPO_DIR":
		return v.RepoDir, true
	case "payload":
		return stringify(v.Payload), true
	}
	path, ok := strings.CutPrefix(key, "payload.")
	if !ok || path == "" {
		return "", false
	}
	var cur any = v.Payload
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", true
		}
		cur, ok = m[part]
		if !ok {
			return "", true
		}
	}
	return stringify(cur), true
}

func stringify(x any) string {
	switch t := x.(type) {
	case nil:
		return ""
	case string:
		return t
	case map[string]any:
		if t == nil {
			return ""
		}
	}
	b, err := json.Marshal(x)
	if err != nil {
		return fmt.Sprint(x)
	}
	return string(b)
}

// loadTemplate returns templates/<name>.md, else default.md, else the
// built-in default.
func (g *General) loadTemplate() string {
	l := g.o.Layout
	if b, err := os.ReadFile(l.Template(g.name)); err == nil {
		return string(b)
	}
	if b, err := os.ReadFile(l.Template("default")); err == nil {
		return string(b)
	}
	return defaultTemplate
}

// BuildPrompt renders the task's prompt with memory appended.
func (g *General) BuildPrompt(t *doc.Task, ws workspace) (string, error) {
	var b strings.Builder
	b.WriteString(Render(g.loadTemplate(), Vars{TaskID: t.ID, Repo: ws.Repo, Type: t.Type, RepoDir: ws.RepoDir, Payload: t.Payload}))
	if ws.PR != nil {
		b.WriteString(ws.PR.promptSection())
	}
	l := g.o.Layout
	sections := []struct{ title, dir, only string }{
		{"Shared memory", l.MemoryShared(), ""},
		{"Domain memory (" + g.name + ")", l.MemoryGeneral(g.name), ""},
	}
	if ws.Repo != "" {
		sections = append(sections, struct{ title, dir, only string }{
			"Repository memory (" + ws.Repo + ")", filepath.Join(l.MemoryGeneral(g.name), "repos"), layout.RepoDirName(ws.Repo) + ".md"})
	}
	for _, sec := range sections {
		text, err := readMemory(sec.dir, sec.only, MaxPromptBytes+1-b.Len())
		if err != nil {
			return "", err
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		fmt.Fprintf(&b, "\n\n---\n## %s\n\n%s", sec.title, strings.TrimRight(text, "\n"))
	}
	b.WriteString("\n")
	if b.Len() > MaxPromptBytes {
		return "", fmt.Errorf("task %s: %w: %d bytes (limit %d)", t.ID, ErrPromptTooLarge, b.Len(), MaxPromptBytes)
	}
	return b.String(), nil
}

// readMemory concatenates the *.md files of dir (or only the named one),
// reading at most budget bytes in total (more cannot fit anyway).
func readMemory(dir, only string, budget int) (string, error) {
	var names []string
	if only != "" {
		names = []string{only}
	} else {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return "", nil
		}
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".md") && !strings.HasPrefix(e.Name(), ".") {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
	}
	var b strings.Builder
	for _, n := range names {
		if budget <= 0 {
			b.WriteString("x") // over the limit; the caller refuses
			break
		}
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			continue
		}
		buf := make([]byte, budget+1)
		k, _ := io.ReadFull(f, buf)
		f.Close()
		if k == 0 {
			continue
		}
		if len(names) > 1 {
			fmt.Fprintf(&b, "### %s\n\n", n)
		}
		b.Write(buf[:k])
		b.WriteString("\n")
		budget -= k
	}
	return b.String(), nil
}
