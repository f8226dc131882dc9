package schema_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/pkg/ids"
	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/schemas"
)

// kindOf maps a fixture name "<kind>--<case>.json" or "<kind>.json" to its kind.
func kindOf(t *testing.T, path string) doc.Kind {
	t.Helper()
	name := strings.TrimSuffix(filepath.Base(path), ".json")
	k := doc.Kind(strings.SplitN(name, "--", 2)[0])
	if !slices.Contains(doc.Kinds(), k) {
		t.Fatalf("fixture %s: no kind %q", path, k)
	}
	return k
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSchemas_EveryFileIsDraft2020WithAbsoluteID(t *testing.T) {
	files, err := filepath.Glob("../../schemas/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("glob schemas: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		var doc struct {
			Schema string `json:"$schema"`
			ID     string `json:"$id"`
		}
		if err := json.Unmarshal(readFile(t, f), &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if doc.Schema != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema = %q, want draft 2020-12", f, doc.Schema)
		}
		if want := schemas.BaseURL + filepath.Base(f); doc.ID != want {
			t.Errorf("%s: $id = %q, want %q", f, doc.ID, want)
		}
	}
	for _, k := range doc.Kinds() {
		if _, err := schemas.FS.ReadFile(string(k) + ".json"); err != nil {
			t.Errorf("kind %s: schema not embedded: %v", k, err)
		}
	}
}

func TestValidate_AcceptsGoodFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/good/*.json")
	covered := map[doc.Kind]bool{}
	for _, f := range files {
		k := kindOf(t, f)
		covered[k] = true
		t.Run(filepath.Base(f), func(t *testing.T) {
			if err := schema.Validate(k, readFile(t, f)); err != nil {
				t.Errorf("got %v, want valid", err)
			}
		})
	}
	for _, k := range doc.Kinds() {
		if !covered[k] {
			t.Errorf("kind %s has no good fixture", k)
		}
	}
}

// badFixtures lists every file in testdata/bad with a fragment its one-line
// error must contain.
var badFixtures = map[string]string{
	"check--missing-verdict.json":                   `check: at '': missing property 'verdict'`,
	"checkpoint--missing-question.json":             `checkpoint: at '': missing property 'question'`,
	"checkpoint--missing-workdir.json":              `at '': missing property 'workdir'`,
	"event--array.json":                             `event: at '': got array, want object`,
	"event--bad-created-at.json":                    `at '/created_at': '2026-02-07 10:00' is not valid date-time`,
	"event--bad-priority.json":                      `event: at '/priority': value must be one of 'high', 'normal', 'low'`,
	"event--bad-source.json":                        `at '/source': value must be one of 'github', 'jira', 'slack', 'inbox', 'schedule'`,
	"event--bad-task-id.json":                       `at '/task_id': 'task-1' is not a task id`,
	"event--dotdot-id.json":                         `event: at '/id': '../../etc/passwd' is not a safe id`,
	"event--dotdot-inside-id.json":                  `at '/id': 'evt-a..b' is not a safe id`,
	"event--empty.json":                             `event: not valid JSON`,
	"event--html-page.json":                         `event: not valid JSON: invalid character '<'`,
	"event--missing-id.json":                        `event: at '': missing property 'id'`,
	"event--missing-repo.json":                      `at '': missing property 'repo'`,
	"event--payload-null.json":                      `at '/payload': got null, want object`,
	"event--repo-traversal.json":                    `at '/repo': '../etc' is not owner/name`,
	"event--slash-id.json":                          `at '/id': 'evt/a' is not a safe id`,
	"event--truncated.json":                         `event: not valid JSON: unexpected end of JSON input`,
	"inbox-event--bad-priority.json":                `at '/priority': value must be one of`,
	"inbox-event--dotdot-id.json":                   `inbox-event: at '/id': '../evil' is not a safe id`,
	"inbox-event--missing-type.json":                `at '': missing property 'type'`,
	"internal-event--bad-type.json":                 `at '/type': 'Boom' is not an event type`,
	"internal-event--missing-actor.json":            `at '': missing property 'actor'`,
	"message--bad-final.json":                       `at '/final': value must be one of 'done', 'failed', 'skipped', null`,
	"message--bad-type.json":                        `at '/type': value must be one of 'thread_start'`,
	"message--bad-urgency.json":                     `at '/urgency': value must be one of 'normal', 'high', 'urgent'`,
	"message--missing-source-ref.json":              `at '': missing property 'source_ref'`,
	"message--reply-context-bad-task.json":          `at '/reply_context/task_id': '../x' is not a task id`,
	"message--source-ref-without-ts.json":           `at '/source_ref': missing property 'ts'`,
	"petition-result--bad-general.json":             `at '/general': 'herald' is not a general name`,
	"petition-result--both.json":                    `at '': more than one alternative holds`,
	"petition-result--empty.json":                   `missing property 'general' or missing property 'direct_response'`,
	"raw-result--bad-error-reason.json":             `at '/error_reason': value must be one of 'AgentFailed'`,
	"raw-result--bad-status.json":                   `at '/status': value must be one of 'success'`,
	"raw-result--failed-without-error.json":         `raw-result: at '': missing property 'error'`,
	"raw-result--html-page.json":                    `raw-result: not valid JSON`,
	"raw-result--killed-without-error.json":         `at '': missing property 'error'`,
	"raw-result--memory-updates-not-strings.json":   `at '/memory_updates/0': got object, want string`,
	"raw-result--missing-summary.json":              `at '': missing property 'summary'`,
	"raw-result--needs-human-without-question.json": `raw-result: at '': missing property 'question'`,
	"raw-result--proclamation-without-channel.json": `at '/proclamation': missing property 'channel'`,
	"raw-result--skipped-without-reason.json":       `at '': missing property 'reason'`,
	"resources--bad-health.json":                    `at '/health': value must be one of 'green', 'yellow', 'orange', 'red'`,
	"resources--bad-token-status.json":              `at '/tokens/status': value must be one of 'ok', 'warning', 'critical', 'unknown'`,
	"resources--cost-as-string.json":                `at '/tokens/daily_cost_usd': got string, want number`,
	"resources--negative-cpu.json":                  `at '/system/cpu_percent': minimum: got -1, want 0`,
	"resources--missing-timestamp.json":             `at '': missing property 'timestamp'`,
	"resources--two-load-averages.json":             `at '/system/load_average': minItems: got 2, want 3`,
	"result--failed-without-error-reason.json":      `result: at '': missing property 'error_reason'`,
	"result--failed-without-error.json":             `result: at '': missing property 'error'`,
	"result--missing-general.json":                  `at '': missing property 'general'`,
	"result--missing-retry-count.json":              `at '': missing property 'retry_count'`,
	"result--negative-duration.json":                `at '/duration_seconds': minimum: got -1, want 0`,
	"sessions--entry-missing-task.json":             `sessions: at '/0': missing property 'task_id'`,
	"sessions--not-array.json":                      `at '': got object, want array`,
	"task--bad-general.json":                        `at '/target_general': 'pr' is not a general name`,
	"task--bad-id.json":                             `task: at '/id': 'task-1' is not a task id (task-YYYYMMDD-NNN)`,
	"task--bad-not-before.json":                     `at '/not_before': 'tomorrow' is not valid date-time`,
	"task--fractional-retry-count.json":             `at '/retry_count': got number, want integer`,
	"task--missing-retry-count.json":                `at '': missing property 'retry_count'`,
	"task--negative-retry-count.json":               `at '/retry_count': minimum: got -1, want 0`,
	"task--thread-without-ts.json":                  `at '/thread': missing property 'thread_ts'`,
	"raw-result--output-approve.json":               `at '/outputs/0/event'`,
	"raw-result--output-unknown-kind.json":          `at '/outputs/0/kind'`,
	"result--outcome-bad-state.json":                `at '/output_outcomes/0/state'`,
}

func TestValidate_RejectsBadFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.json")
	seen := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		seen[name] = true
		want, ok := badFixtures[name]
		if !ok {
			t.Errorf("fixture %s is not in badFixtures", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			err := schema.Validate(kindOf(t, f), readFile(t, f))
			if err == nil {
				t.Fatalf("got valid, want error containing %q", want)
			}
			if !errors.Is(err, doc.ErrInvalid) {
				t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
			}
			if msg := err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
				t.Errorf("got %q, want one line containing %q", msg, want)
			}
		})
	}
	for name := range badFixtures {
		if !seen[name] {
			t.Errorf("badFixtures names %s, which is not in testdata/bad", name)
		}
	}
}

func TestValidate_NotJSONMatchesErrNotJSON(t *testing.T) {
	for _, in := range []string{"", "<html></html>", `{"id":`, `{"a":1} {"b":2}`, "\xff"} {
		err := schema.Validate(doc.KindEvent, []byte(in))
		if !errors.Is(err, doc.ErrNotJSON) || !errors.Is(err, doc.ErrInvalid) {
			t.Errorf("%q: got %v, want ErrNotJSON and ErrInvalid", in, err)
		}
		if err != nil && !strings.Contains(err.Error(), "not valid JSON") {
			t.Errorf("%q: got %q, want it to say not valid JSON", in, err)
		}
	}
	// Valid JSON that breaks the schema is not ErrNotJSON.
	if err := schema.Validate(doc.KindEvent, []byte(`{}`)); errors.Is(err, doc.ErrNotJSON) {
		t.Errorf("{}: got ErrNotJSON, want only a schema error")
	}
}

func TestValidate_UnknownKindIsNotADocumentError(t *testing.T) {
	err := schema.Validate(doc.Kind("nope"), []byte(`{}`))
	if err == nil || errors.Is(err, doc.ErrInvalid) {
		t.Errorf("got %v, want a non-ErrInvalid error", err)
	}
}

func TestValidate_ListsEveryViolationOnOneLineCapped(t *testing.T) {
	bad := []byte(`{"id":1,"event_id":1,"target_general":1,"type":1,"repo":1,"payload":1,"priority":1,"created_at":1,"status":1,"retry_count":"x"}`)
	err := schema.Validate(doc.KindTask, bad)
	var se *schema.Error
	if !errors.As(err, &se) {
		t.Fatalf("got %T %v, want *schema.Error", err, err)
	}
	if len(se.Violations) < 9 {
		t.Fatalf("got %d violations, want at least 9: %v", len(se.Violations), err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "task: at ") || !strings.Contains(msg, "; and ") || strings.Contains(msg, "\n") {
		t.Errorf("got %q, want one capped line", msg)
	}
	// The same input gives the same message (stable order).
	if again := schema.Validate(doc.KindTask, bad).Error(); again != msg {
		t.Errorf("message not stable:\n%s\n%s", msg, again)
	}
}

func TestValidate_IDPatternAgreesWithPkgIDs(t *testing.T) {
	cases := []string{
		"a", "evt-github-1-2026-02-07T10:00:00Z", "a.b", "a.", "a..b", "..", ".a", "-a", "a/b",
		"a b", "evt@x:y_z", "a.b.c", "a...", "é", "a\n", strings.Repeat("a", 200), strings.Repeat("a", 201),
		strings.Repeat("a.", 100), strings.Repeat("a.", 100) + "a",
	}
	for _, id := range cases {
		js, _ := json.Marshal(map[string]any{"type": "x", "id": id})
		got := schema.Validate(doc.KindInboxEvent, js) == nil
		if want := ids.Valid(id); got != want {
			t.Errorf("id %q: schema accepts=%v, ids.Valid=%v", id, got, want)
		}
	}
}

func TestValidate_RepoPattern(t *testing.T) {
	for repo, want := range map[string]bool{
		"acme/api": true, "acme/.github": true, "a-b/c_d.e": true, "Org9/x": true,
		"acme": false, "acme/": false, "/api": false, "acme/..": false, "acme/.": false,
		"../etc": false, "acme/api/extra": false, "acme/a b": false, "": false, "-x/y": false,
	} {
		js, _ := json.Marshal(map[string]any{"type": "x", "repo": repo})
		if got := schema.Validate(doc.KindInboxEvent, js) == nil; got != want {
			t.Errorf("repo %q: got valid=%v, want %v", repo, got, want)
		}
	}
}

func TestValidate_ConcurrentFirstUse(t *testing.T) {
	good := readFile(t, "testdata/good/event.json")
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if err := schema.Validate(doc.KindEvent, good); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func TestDecodeEvent_ReturnsTypedValue(t *testing.T) {
	ev, err := schema.DecodeEvent(readFile(t, "testdata/good/event.json"))
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID != "evt-github-12345678-2026-02-07T10:00:00Z" || ev.Source != doc.SourceGitHub ||
		doc.Deref(ev.Repo) != "querypie/frontend" || ev.Payload["pr_number"] != "42" || ev.TaskID != "" {
		t.Errorf("got %+v", ev)
	}
	ev, err = schema.DecodeEvent(readFile(t, "testdata/good/event--dispatched-no-repo.json"))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Repo != nil || ev.TaskID != "task-20260207-001" {
		t.Errorf("got repo %v task %q, want nil and task-20260207-001", ev.Repo, ev.TaskID)
	}
}

func TestDecode_RejectsWithoutPartialValue(t *testing.T) {
	for _, f := range []string{"testdata/bad/event--html-page.json", "testdata/bad/event--dotdot-id.json"} {
		ev, err := schema.DecodeEvent(readFile(t, f))
		if ev != nil || !errors.Is(err, doc.ErrInvalid) {
			t.Errorf("%s: got %v, %v; want nil and ErrInvalid", f, ev, err)
		}
	}
	if _, err := schema.DecodeTask(readFile(t, "testdata/bad/task--bad-id.json")); !errors.Is(err, doc.ErrInvalid) {
		t.Errorf("task: got %v", err)
	}
	// Schema-valid but too large for a Go int: still a document error.
	big := strings.Replace(string(readFile(t, "testdata/good/task.json")), `"retry_count": 0`, `"retry_count": 1e30`, 1)
	if _, err := schema.DecodeTask([]byte(big)); !errors.Is(err, doc.ErrInvalid) {
		t.Errorf("huge retry_count: got %v, want ErrInvalid", err)
	}
}

func TestDecode_EachKindFromGoodFixtures(t *testing.T) {
	results := map[string]func([]byte) error{
		"task":            func(b []byte) error { _, err := schema.DecodeTask(b); return err },
		"message":         func(b []byte) error { _, err := schema.DecodeMessage(b); return err },
		"raw-result":      func(b []byte) error { _, err := schema.DecodeRawResult(b); return err },
		"result":          func(b []byte) error { _, err := schema.DecodeResult(b); return err },
		"inbox-event":     func(b []byte) error { _, err := schema.DecodeInboxEvent(b); return err },
		"checkpoint":      func(b []byte) error { _, err := schema.DecodeCheckpoint(b); return err },
		"petition-result": func(b []byte) error { _, err := schema.DecodePetitionResult(b); return err },
	}
	files, _ := filepath.Glob("testdata/good/*.json")
	for _, f := range files {
		if dec, ok := results[string(kindOf(t, f))]; ok {
			if err := dec(readFile(t, f)); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
	res, err := schema.DecodeResult(readFile(t, "testdata/good/result--killed.json"))
	if err != nil {
		t.Fatal(err)
	}
	if res.RetryCount != 1 || res.ErrorReason != doc.ReasonSoldierDied || res.IsTerminal() {
		t.Errorf("got retry %d reason %q terminal %v", res.RetryCount, res.ErrorReason, res.IsTerminal())
	}
}

func TestDefaultTerminal(t *testing.T) {
	for reason, want := range map[string]bool{
		doc.ReasonTimeout: true, doc.ReasonInvalidResult: true, doc.ReasonEngineMissing: true,
		doc.ReasonPromptTooLarge: true, doc.ReasonAgentFailed: true,
		doc.ReasonEngineError: false, doc.ReasonSoldierDied: false,
		"": true, "SomethingNew": true,
	} {
		if got := doc.DefaultTerminal(reason); got != want {
			t.Errorf("DefaultTerminal(%q) = %v, want %v", reason, got, want)
		}
	}
}

func TestRawResult_TerminalOverridesDefault(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		reason   string
		terminal *bool
		want     bool
	}{
		{doc.ReasonEngineError, nil, false},
		{doc.ReasonEngineError, &yes, true},
		{doc.ReasonAgentFailed, nil, true},
		{doc.ReasonAgentFailed, &no, false},
	} {
		r := doc.RawResult{ErrorReason: c.reason, Terminal: c.terminal}
		if got := r.IsTerminal(); got != c.want {
			t.Errorf("%s terminal=%v: got %v, want %v", c.reason, c.terminal, got, c.want)
		}
	}
}

func TestFormatTime_UTCWithZ(t *testing.T) {
	seoul := time.FixedZone("KST", 9*3600)
	in := time.Date(2026, 11, 21, 19, 4, 5, 999_000_000, seoul)
	if got, want := doc.FormatTime(in), "2026-11-21T10:04:05Z"; got != want {
		t.Errorf("FormatTime = %q, want %q", got, want)
	}
	for s, want := range map[string]time.Time{
		"2026-11-21T10:04:05Z":           time.Date(2026, 11, 21, 10, 4, 5, 0, time.UTC),
		"2026-11-21T19:04:05+09:00":      time.Date(2026, 11, 21, 10, 4, 5, 0, time.UTC),
		"2026-11-21T10:04:05.250Z":       time.Date(2026, 11, 21, 10, 4, 5, 250_000_000, time.UTC),
		"2026-11-21T10:04:05.123456789Z": time.Date(2026, 11, 21, 10, 4, 5, 123456789, time.UTC),
	} {
		got, err := doc.ParseTime(s)
		if err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("ParseTime(%q) = %v, %v; want %v UTC", s, got, err, want)
		}
	}
	if _, err := doc.ParseTime("yesterday"); err == nil {
		t.Error("ParseTime(yesterday): got nil error")
	}
}

func TestStringPtrAndDeref(t *testing.T) {
	if doc.StringPtr("") != nil || *doc.StringPtr("a/b") != "a/b" {
		t.Error("StringPtr")
	}
	if doc.Deref(nil) != "" || doc.Deref(doc.StringPtr("x")) != "x" {
		t.Error("Deref")
	}
}

func BenchmarkDecodeEvent(b *testing.B) {
	data, err := os.ReadFile("testdata/good/event.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := schema.DecodeEvent(data); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzDecodeEvent(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/event*.json")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := schema.DecodeEvent(data)
		if err != nil {
			if ev != nil {
				t.Fatal("value returned with error")
			}
			return
		}
		// Whatever decodes must encode back into a valid event.
		out, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(doc.KindEvent, out); err != nil {
			t.Fatalf("re-encoded event invalid: %v\n%s", err, out)
		}
	})
}

// reflectJSONNames lists the JSON names of t's fields, embedded structs
// flattened.
func reflectJSONNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			names = append(names, reflectJSONNames(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func TestDecode_CaseVariantKeysCannotSmuggleValues(t *testing.T) {
	good := string(readFile(t, "testdata/good/event.json"))
	for _, key := range []string{`"ID"`, `"Id"`, `"REPO"`} {
		val := `"../../etc/passwd"`
		data := strings.Replace(good, "{", "{"+key+": "+val+",\n", 1)
		// The smuggled key comes after the real one in the object? Put it last too.
		dataLast := strings.TrimSuffix(strings.TrimSpace(good), "}") + ", " + key + ": " + val + "}"
		for _, d := range []string{data, dataLast} {
			ev, err := schema.DecodeEvent([]byte(d))
			if err == nil && (strings.Contains(ev.ID, "..") || strings.Contains(doc.Deref(ev.Repo), "..")) {
				t.Fatalf("%s smuggled %q past the schema: %+v", key, val, ev)
			}
			if err != nil && !errors.Is(err, doc.ErrInvalid) {
				t.Errorf("%s: got %v, want ErrInvalid", key, err)
			}
		}
	}
}
