// Command gotest runs `go test -json <args>` and prints what plain `go test`
// prints (each package's ok/FAIL line, a failing test's output, build
// errors), then one line naming the skipped tests, so `make test` says what
// it did not run. It exits with go test's exit code.
//
//	go run ./scripts/gotest -race -count=1 ./...
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-json"}, os.Args[1:]...)...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(2)
	}
	skipped := relay(out, os.Stdout)
	err = cmd.Wait()
	fmt.Println(summary(skipped))
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		os.Exit(ee.ExitCode())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(2)
	}
}

// relay prints the lines plain go test would print and returns the skipped
// tests as "package TestName".
func relay(r io.Reader, w io.Writer) []string {
	var skipped []string
	held := map[string][]string{} // package/test → output so far
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(w, sc.Text()) // not JSON: pass it on as it is
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Test == "" && e.Action == "output":
			// -json implies -v: the package's bare "PASS" is not in plain output.
			if e.Output != "PASS\n" {
				fmt.Fprint(w, e.Output)
			}
		case e.Test == "" && e.Action == "fail":
			// A panic or timeout ends tests without their own verdict.
			for k, lines := range held {
				if strings.HasPrefix(k, e.Package+"\x00") {
					fmt.Fprint(w, strings.Join(lines, ""))
					delete(held, k)
				}
			}
		case e.Test == "":
		case e.Action == "output":
			held[key] = append(held[key], e.Output)
		case e.Action == "fail":
			fmt.Fprint(w, strings.Join(held[key], ""))
			delete(held, key)
		case e.Action == "skip":
			skipped = append(skipped, e.Package+" "+e.Test)
			delete(held, key)
		case e.Action == "pass":
			delete(held, key)
		}
	}
	return skipped
}

// summary reads "skipped: 2 (pkg/a TestX, pkg/b TestY)".
func summary(skipped []string) string {
	sort.Strings(skipped)
	if len(skipped) == 0 {
		return "skipped: 0"
	}
	return fmt.Sprintf("skipped: %d (%s)", len(skipped), strings.Join(skipped, ", "))
}
