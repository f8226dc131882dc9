package general

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
	"github.com/kingdom-dev/kingdom/pkg/config"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/layout"
)

// Package files (SPEC §4.5 Packages).
const (
	PkgManifest    = "manifest.yaml"
	PkgPrompt      = "prompt.md"
	PkgClaude      = "general-claude.md"
	PkgCodex       = "general-codex.md"
	maxPackageFile = 1 << 20
)

// Install installs the general package in dir: the manifest (validated)
// becomes config/generals/<name>.yaml, prompt.md templates/<name>.md,
// general-claude.md / general-codex.md templates/<name>-claude.md /
// <name>-codex.md, and agents/ skills/ go under templates/<name>/. The
// manifest is written last, so a watchdog never launches a half-installed
// general. It returns the general's name.
func Install(l layout.Layout, dir string) (string, error) {
	m, err := config.LoadManifest(filepath.Join(dir, PkgManifest))
	if err != nil {
		return "", fmt.Errorf("install %s: %w", dir, err)
	}
	prompt, err := readPkgFile(filepath.Join(dir, PkgPrompt))
	if err != nil {
		return "", fmt.Errorf("install %s: %w", m.Name, err)
	}
	if err := layout.EnsureDir(l.TemplatesDir()); err != nil {
		return "", err
	}
	if err := atomicfile.WriteFile(l.Template(m.Name), prompt, 0o600); err != nil {
		return "", err
	}
	for src, dst := range map[string]string{PkgClaude: m.Name + "-claude.md", PkgCodex: m.Name + "-codex.md"} {
		target := filepath.Join(l.TemplatesDir(), dst)
		b, err := readPkgFile(filepath.Join(dir, src))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			_ = os.Remove(target) // an upgrade that dropped the file
		case err != nil:
			return "", fmt.Errorf("install %s: %w", m.Name, err)
		default:
			if err := atomicfile.WriteFile(target, b, 0o600); err != nil {
				return "", err
			}
		}
	}
	extra := filepath.Join(l.TemplatesDir(), m.Name)
	_ = os.RemoveAll(extra)
	for _, sub := range []string{"agents", "skills"} {
		if err := copyTree(filepath.Join(dir, sub), filepath.Join(extra, sub)); err != nil {
			return "", fmt.Errorf("install %s: %w", m.Name, err)
		}
	}
	raw, err := readPkgFile(filepath.Join(dir, PkgManifest))
	if err != nil {
		return "", err
	}
	if err := atomicfile.WriteFile(l.GeneralManifest(m.Name), raw, 0o600); err != nil {
		return "", err
	}
	return m.Name, nil
}

// Uninstall removes what Install created for name (the manifest first, so
// the watchdog stops launching it). Memory and workspace stay.
func Uninstall(l layout.Layout, name string) error {
	if !ids.ValidGeneral(name) {
		return fmt.Errorf("uninstall %q: expected a general name like gen-pr: %w", name, ids.ErrInvalid)
	}
	if _, err := os.Stat(l.GeneralManifest(name)); err != nil {
		return fmt.Errorf("uninstall %s: not installed (%s missing)", name, l.GeneralManifest(name))
	}
	if err := os.Remove(l.GeneralManifest(name)); err != nil {
		return fmt.Errorf("uninstall %s: %w", name, err)
	}
	for _, p := range []string{l.Template(name), filepath.Join(l.TemplatesDir(), name+"-claude.md"), filepath.Join(l.TemplatesDir(), name+"-codex.md")} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("uninstall %s: %w", name, err)
		}
	}
	return os.RemoveAll(filepath.Join(l.TemplatesDir(), name))
}

func readPkgFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxPackageFile {
		return nil, fmt.Errorf("%s: not a regular file under 1 MiB", path)
	}
	return os.ReadFile(path)
}

// copyTree copies regular files of src (if it exists) into dst; symlinks
// and dot-files are skipped.
func copyTree(src, dst string) error {
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return layout.EnsureDir(target)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := readPkgFile(p)
		if err != nil {
			return err
		}
		return atomicfile.WriteFile(target, b, 0o600)
	})
}
