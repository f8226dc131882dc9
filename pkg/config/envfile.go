package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
)

// maxEnvFile bounds kingdom.env; it holds a handful of tokens.
const maxEnvFile = 1 << 20

// LoadEnvFile reads a secrets file of KEY=VALUE lines: blank lines and lines
// starting with # are skipped, a leading "export " is allowed, a value in
// single or double quotes is taken literally without them, and " #" starts a
// comment after an unquoted value. The file must have mode 0600 exactly. A
// missing file returns nil, nil. Errors name the file and line, never a
// value.
func LoadEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &Error{File: path, Msg: "open", Err: unwrapPath(err)}
	}
	defer f.Close()
	// Check the mode of the file we opened, not of whatever the path names
	// a moment later.
	fi, err := f.Stat()
	if err != nil {
		return nil, &Error{File: path, Msg: "stat", Err: unwrapPath(err)}
	}
	if !fi.Mode().IsRegular() {
		return nil, &Error{File: path, Msg: "expected a regular file"}
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		return nil, &Error{File: path, Msg: fmt.Sprintf("mode %04o is too open; secrets file must be 0600 (chmod 600 %s)", perm, path)}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxEnvFile+1))
	if err != nil {
		return nil, &Error{File: path, Msg: "read", Err: unwrapPath(err)}
	}
	if len(data) > maxEnvFile {
		return nil, &Error{File: path, Msg: fmt.Sprintf("larger than %d bytes", maxEnvFile)}
	}
	return parseEnv(path, data)
}

func parseEnv(path string, data []byte) (map[string]string, error) {
	env := map[string]string{}
	var errs []*Error
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), maxEnvFile+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "export "); ok {
			line = strings.TrimLeft(rest, " \t")
		}
		key, val, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !ok || !envNameRE.MatchString(key) {
			// Never echo the line: it may hold a secret.
			errs = append(errs, &Error{File: path, Line: n, Msg: "expected KEY=VALUE with KEY a variable name"})
			continue
		}
		v, err := envValue(strings.TrimSpace(val))
		if err != nil {
			errs = append(errs, &Error{File: path, Line: n, Key: key, Msg: err.Error()})
			continue
		}
		env[key] = v
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, &Error{File: path, Msg: "read", Err: err})
	}
	if err := join(errs); err != nil {
		return nil, err
	}
	return env, nil
}

// envValue unquotes a value. Quoted values are literal (no escapes).
func envValue(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if q := v[0]; q == '"' || q == '\'' {
		end := strings.IndexByte(v[1:], q)
		if end < 0 {
			return "", fmt.Errorf("unterminated %c quote", q)
		}
		rest := strings.TrimSpace(v[end+2:])
		if rest != "" && !strings.HasPrefix(rest, "#") {
			return "", errors.New("unexpected text after the closing quote")
		}
		return v[1 : end+1], nil
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = v[:i]
	} else if i := strings.Index(v, "\t#"); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v), nil
}

// ApplyEnvFile loads path with LoadEnvFile and sets each variable that is not
// already set in the process environment (the environment wins). It returns
// the sorted names it set; values are never logged or returned.
func ApplyEnvFile(path string) ([]string, error) {
	env, err := LoadEnvFile(path)
	if err != nil {
		return nil, err
	}
	var set []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if _, ok := os.LookupEnv(k); ok {
			continue
		}
		if err := os.Setenv(k, env[k]); err != nil {
			return set, &Error{File: path, Key: k, Msg: "set environment", Err: err}
		}
		set = append(set, k)
	}
	return set, nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
