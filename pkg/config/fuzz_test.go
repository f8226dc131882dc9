package config

import (
	"testing"
)

// FuzzDecode checks that no file content makes the loaders panic and that
// every refusal is a *Error naming the file.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("retry:\n  max_attempts: abc\n"))
	f.Add([]byte("polling:\n  github:\n  inbox: &a {interval_seconds: 1}\n  jira: *a\n"))
	f.Add([]byte("name: gen-a\nschedules:\n  - {name: n, cron: \"TZ=x * * * * *\", task_type: t, payload: {a: [1, {b: c}]}}\n"))
	f.Add([]byte("<<: {x: 1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, dst := range []interface{ Validate() error }{
			DefaultSystem(), DefaultSentinel(), DefaultKing(), DefaultEnvoy(), DefaultChamberlain(), DefaultManifest(),
		} {
			src, err := decode("f.yaml", data, dst)
			if err != nil {
				if len(Errors(err)) == 0 {
					t.Fatalf("error %v is not a *Error", err)
				}
				continue
			}
			if err := dst.Validate(); err != nil {
				_ = src.locate(err)
			}
		}
	})
}
