package schema_test

// The reference: santhosh-tekuri/jsonschema, a complete draft 2020-12
// validator (the one pkg/schema used before it got its own, cheaper
// validator for the keywords Kingdom's schemas use). Linked by tests only.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	textmessage "golang.org/x/text/message"

	"github.com/kingdom-dev/kingdom/pkg/schema"
	"github.com/kingdom-dev/kingdom/schemas"
)

type embedLoader struct{}

func (embedLoader) Load(url string) (any, error) {
	name, ok := strings.CutPrefix(url, schemas.BaseURL)
	if !ok {
		return nil, fmt.Errorf("schema %s is not embedded", url)
	}
	data, err := fs.ReadFile(schemas.FS, name)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(data))
}

type reference struct {
	schemas map[schema.Kind]*jsonschema.Schema
}

func newReference(t testing.TB) *reference {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.UseLoader(embedLoader{})
	r := &reference{schemas: map[schema.Kind]*jsonschema.Schema{}}
	for _, k := range schema.Kinds() {
		s, err := c.Compile(k.URL())
		if err != nil {
			t.Fatal(err)
		}
		r.schemas[k] = s
	}
	return r
}

// validate returns "" for a valid document, else the one-line message
// pkg/schema printed when it used the reference (violations flattened to
// their leaves, sorted, deduplicated; alternatives joined).
func (r *reference) validate(k schema.Kind, data []byte) string {
	if !json.Valid(data) {
		return "not JSON"
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return "not JSON"
	}
	err = r.schemas[k].Validate(doc)
	if err == nil {
		return ""
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	return (&schema.Error{Kind: k, Violations: refViolations(ve)}).Error()
}

var printer = textmessage.NewPrinter(language.English)

func refPointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}

func refViolations(ve *jsonschema.ValidationError) []schema.Violation {
	var out []schema.Violation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, schema.Violation{Pointer: refPointer(e.InstanceLocation), Message: refMessage(e)})
			return
		}
		switch e.ErrorKind.(type) {
		case *kind.OneOf, *kind.AnyOf:
			var alts []string
			for _, c := range e.Causes {
				for _, v := range refViolations(c) {
					if v.Pointer == refPointer(e.InstanceLocation) {
						alts = append(alts, v.Message)
					} else {
						alts = append(alts, v.String())
					}
				}
			}
			out = append(out, schema.Violation{Pointer: refPointer(e.InstanceLocation),
				Message: "none of the alternatives holds: " + strings.Join(alts, " or ")})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.SortFunc(out, func(a, b schema.Violation) int {
		if c := strings.Compare(a.Pointer, b.Pointer); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return slices.Compact(out)
}

var refPatternNames = map[string]string{
	`^[A-Za-z0-9](?:\.?[A-Za-z0-9_:@-])*\.?$`:                                  "a safe id (letters, digits, . _ : @ -; starting with a letter or digit; no '..')",
	`^task-[0-9]{8}-[0-9]{3,}$`:                                                "a task id (task-YYYYMMDD-NNN)",
	`^gen-[a-z][a-z0-9-]*$`:                                                    "a general name (gen-<lowercase>)",
	`^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+$`:                                       "an event type (category.name, lowercase)",
	`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]*[A-Za-z0-9_-][A-Za-z0-9_.-]*$`: "owner/name",
}

func refMessage(e *jsonschema.ValidationError) string {
	if p, ok := e.ErrorKind.(*kind.Pattern); ok {
		if name, ok := refPatternNames[p.Want]; ok {
			s := p.Got
			if len(s) > 80 {
				s = s[:80] + "…"
			}
			return fmt.Sprintf("%s is not %s", "'"+strings.ReplaceAll(s, "'", `\'`)+"'", name)
		}
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Enum:
		return strings.ReplaceAll(k.LocalizedString(printer), "<nil>", "null")
	case *kind.OneOf:
		if len(k.Subschemas) == 2 {
			return fmt.Sprintf("more than one alternative holds (subschemas %d and %d); exactly one must", k.Subschemas[0], k.Subschemas[1])
		}
	}
	return e.ErrorKind.LocalizedString(printer)
}

// ours is pkg/schema's answer in the reference's terms.
func ours(k schema.Kind, data []byte) string {
	err := schema.Validate(k, data)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, schema.ErrNotJSON):
		return "not JSON"
	}
	return err.Error()
}

// mutationValues replace a value in a valid document: every type, the
// edges of our patterns, lengths, minimums and date-times.
var mutationValues = []string{
	`null`, `true`, `false`, `0`, `-1`, `1.5`, `2.0`, `-0.5`, `1e2`, `-1e-400`, `""`, `"x"`, `"../x"`, `"a..b"`, `"a."`, `".a"`,
	`"task-1"`, `"task-20260101-001"`, `"task-20260101-0001"`, `"gen-x"`, `"gen-X"`, `"herald"`, `"owner/name"`, `"../etc"`,
	`"a/."`, `"a/b/c"`, `"category.name"`, `"Boom"`, `"high"`, `"urgent"`, `"failed"`, `"killed"`, `"needs_human"`, `"skipped"`,
	`"success"`, `"done"`, `"AgentFailed"`, `"Timeout"`, `"green"`, `"ok"`,
	`"2026-02-07T10:00:00Z"`, `"2026-02-07t10:00:00z"`, `"2026-02-30T10:00:00Z"`, `"2026-02-07 10:00"`, `"2026-02-07T10:00:00.5+01:00"`,
	`"2026-02-07T23:59:60Z"`, `"2026-02-07T10:59:60Z"`, `"2026-02-07T24:00:00Z"`, `"2026-02-07T10:00:00+24:00"`, `"2026-02-07T10:00:00."`,
	`"` + strings.Repeat("a", 200) + `"`, `"` + strings.Repeat("a", 201) + `"`, `"é"`, `"ſ"`,
	`[]`, `["x"]`, `[1]`, `[{}]`, `[0, 0, 0]`, `[1, 2]`, `{}`, `{"a": 1}`, `{"channel": "C1", "thread_ts": "1.2"}`,
	`{"channel": "", "message": "m"}`, `{"general": "gen-a", "session_id": "s", "repo": null, "task_id": "task-20260101-001"}`,
}

// mutations yields documents one edit away from doc: each member or element
// replaced by each mutation value or removed, and an extra member added to
// each object.
func mutations(doc any, yield func(any)) {
	var walk func(v any, set func(any))
	walk = func(v any, set func(any)) {
		switch t := v.(type) {
		case map[string]any:
			t["zz_extra"] = json.Number("1")
			yield(doc)
			delete(t, "zz_extra")
			for k, x := range t {
				delete(t, k)
				yield(doc)
				for _, mv := range mutationValues {
					var nv any
					dec := json.NewDecoder(strings.NewReader(mv))
					dec.UseNumber()
					_ = dec.Decode(&nv)
					t[k] = nv
					yield(doc)
				}
				t[k] = x
				walk(x, func(n any) { t[k] = n })
			}
		case []any:
			for i, x := range t {
				for _, mv := range mutationValues {
					var nv any
					dec := json.NewDecoder(strings.NewReader(mv))
					dec.UseNumber()
					_ = dec.Decode(&nv)
					t[i] = nv
					yield(doc)
				}
				t[i] = x
				walk(x, func(n any) { t[i] = n })
			}
		}
	}
	walk(doc, nil)
}

func TestValidate_AgreesWithReferenceValidator(t *testing.T) {
	ref := newReference(t)
	files, _ := filepath.Glob("testdata/*/*.json")
	if len(files) < 20 {
		t.Fatalf("found %d fixtures", len(files))
	}
	compared := 0
	for _, f := range files {
		k := kindOf(t, f)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		check := func(data []byte) {
			compared++
			want, got := ref.validate(k, data), ours(k, data)
			if want != got {
				t.Errorf("%s: %s\nreference: %q\nours:      %q", f, data, want, got)
			}
		}
		check(data)
		var doc any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&doc) != nil || !strings.Contains(f, "/good/") {
			continue
		}
		mutations(doc, func(d any) {
			b, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			check(b)
		})
		if t.Failed() {
			return
		}
	}
	t.Logf("%d documents compared", compared)
}

// FuzzValidate holds pkg/schema's validator to the reference on arbitrary
// documents of every kind.
func FuzzValidate(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.json")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	ref := newReference(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, k := range schema.Kinds() {
			want, got := ref.validate(k, data), ours(k, data)
			if (want == "") != (got == "") && !(want == "" && strictDateTime(got)) {
				t.Fatalf("%s: %q\nreference: %q\nours:      %q", k, data, want, got)
			}
		}
	})
}

// strictDateTime reports whether msg rejects only a date-time that RFC 3339
// (and time.Parse, which reads it later) rejects too: the reference reads
// the time's numbers with strconv.Atoi and so accepts "T+1:00:00Z".
func strictDateTime(msg string) bool {
	_, rest, ok := strings.Cut(msg, "': '")
	val, _, ok2 := strings.Cut(rest, "' is not valid date-time")
	if !ok || !ok2 || strings.Count(msg, " is not valid date-time") != 1 || strings.Contains(msg, "; ") {
		return false
	}
	_, err := time.Parse(time.RFC3339, val)
	return err != nil
}

// Where pkg/schema is deliberately stricter than the reference: a sign
// inside a date-time's two-digit fields is not RFC 3339.
func TestValidate_DateTimeSignsAreRejectedUnlikeTheReference(t *testing.T) {
	ref := newReference(t)
	for _, ts := range []string{"2026-02-07T+1:00:00Z", "2026-02-07T10:00:00+01:+1", "2026-02-07T10:-1:00Z"} {
		doc := []byte(`{"task_id":"task-20260101-001","status":"failed","summary":"s","error":"e","resets_at":"` + ts + `"}`)
		got := ours(schema.KindRawResult, doc)
		if !strings.Contains(got, "is not valid date-time") || !strictDateTime(got) {
			t.Errorf("%s: got %q, want it rejected as not a date-time", ts, got)
		}
		if _, err := time.Parse(time.RFC3339, ts); err == nil {
			t.Errorf("%s: time.Parse accepts it; the divergence is unjustified", ts)
		}
		t.Logf("%s: reference says %q", ts, ref.validate(schema.KindRawResult, doc))
	}
}
