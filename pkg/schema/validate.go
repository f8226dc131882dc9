package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	textmessage "golang.org/x/text/message"

	docpkg "github.com/kingdom-dev/kingdom/pkg/doc"
	"github.com/kingdom-dev/kingdom/schemas"
)

// maxViolations caps how many violations an error message lists.
const maxViolations = 8

// Violation is one schema rule a document breaks.
type Violation struct {
	// Pointer is the JSON pointer of the offending value ("" is the root).
	Pointer string
	// Message says what is wrong, e.g. `missing property 'id'`.
	Message string
}

func (v Violation) String() string { return fmt.Sprintf("at '%s': %s", v.Pointer, v.Message) }

// Error is a document that fails its kind's schema. Error() is one line:
// `event: at '/priority': value must be one of "high", "normal", "low"`.
type Error struct {
	Kind       docpkg.Kind
	Violations []Violation
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(string(e.Kind))
	b.WriteString(": ")
	for i, v := range e.Violations {
		if i == maxViolations {
			fmt.Fprintf(&b, "; and %d more", len(e.Violations)-maxViolations)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(v.String())
	}
	return b.String()
}

// Is makes every *Error match ErrInvalid.
func (e *Error) Is(target error) bool { return target == docpkg.ErrInvalid }

// The compiler is made once; each kind's schema is compiled the first time
// it is used, so a process pays only for the documents it validates (a
// soldier validates one raw result). The loader serves only the embedded
// documents a compile asks for (the kind's schema and defs.json); nothing
// is fetched or read from disk.
var (
	compileMu sync.Mutex
	compiler  *jsonschema.Compiler
	compiled  = map[docpkg.Kind]*jsonschema.Schema{}
)

// schemaFor compiles kind's schema on first use. Formats are asserted
// (created_at must really be a date-time), which draft 2020-12 leaves off by
// default.
func schemaFor(k docpkg.Kind) (*jsonschema.Schema, error) {
	compileMu.Lock()
	defer compileMu.Unlock()
	if s, ok := compiled[k]; ok {
		return s, nil
	}
	if !slices.Contains(docpkg.Kinds(), k) {
		return nil, fmt.Errorf("validate: unknown kind %q", k)
	}
	if compiler == nil {
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		c.UseLoader(embedLoader{})
		compiler = c
	}
	s, err := compiler.Compile(k.URL())
	if err != nil {
		// A broken embedded schema is a programming error; a fresh
		// compiler next time keeps no half-added resources.
		compiler = nil
		return nil, fmt.Errorf("compile schema %s: %w", k, err)
	}
	compiled[k] = s
	return s, nil
}

// embedLoader resolves schema URLs to the embedded documents.
type embedLoader struct{}

func (embedLoader) Load(url string) (any, error) {
	name, ok := strings.CutPrefix(url, schemas.BaseURL)
	if !ok || strings.Contains(name, "/") {
		return nil, fmt.Errorf("schema %s is not embedded", url)
	}
	data, err := fs.ReadFile(schemas.FS, name)
	if err != nil {
		return nil, fmt.Errorf("schema %s is not embedded: %w", url, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("parse schema %s: %w", name, err)
	}
	return doc, nil
}

// Validate checks that data is JSON and satisfies kind's schema. Errors
// match ErrInvalid (and ErrNotJSON for non-JSON); an unknown kind or a
// broken embedded schema is a programming error and matches neither.
//
// A raw or final result's cost_usd and usage counts out of range are
// clamped to their bounds before the check (clampMoney), as Decode does.
func Validate(kind docpkg.Kind, data []byte) error {
	_, _, err := validate(kind, data)
	return err
}

// validate parses data, clamps its money figures (reporting whether it
// did) and checks the document against kind's schema.
func validate(kind docpkg.Kind, data []byte) (doc any, clamped bool, err error) {
	sch, err := schemaFor(kind)
	if err != nil {
		return nil, false, err
	}
	// One parse (numbers as json.Number) serves the schema and, in Decode,
	// the case guard.
	doc, err = jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		// json.Unmarshal describes a syntax error best (offset and
		// character, "unexpected end of JSON input").
		var v any
		if jerr := json.Unmarshal(data, &v); jerr != nil {
			err = jerr
		}
		return nil, false, &docpkg.SyntaxError{Kind: kind, Err: err}
	}
	clamped = clampMoney(kind, doc)
	if err := sch.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return nil, false, &Error{Kind: kind, Violations: violations(ve)}
		}
		return nil, false, &Error{Kind: kind, Violations: []Violation{{Message: err.Error()}}}
	}
	return doc, clamped, nil
}

// violations flattens the library's error tree into its leaves: the
// concrete broken rules. For a failed oneOf/anyOf the leaves of every branch
// are listed, which reads as "none of these held".
func violations(ve *jsonschema.ValidationError) []Violation {
	var out []Violation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, Violation{
				Pointer: pointer(e.InstanceLocation),
				Message: message(e),
			})
			return
		}
		switch e.ErrorKind.(type) {
		case *kind.OneOf, *kind.AnyOf:
			// Alternatives: one violation listing each branch's problems,
			// not a list that reads as if all were required.
			var alts []string
			for _, c := range e.Causes {
				for _, v := range violations(c) {
					if v.Pointer == pointer(e.InstanceLocation) {
						alts = append(alts, v.Message)
					} else {
						alts = append(alts, v.String())
					}
				}
			}
			out = append(out, Violation{
				Pointer: pointer(e.InstanceLocation),
				Message: "none of the alternatives holds: " + strings.Join(alts, " or "),
			})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	// The library's order follows map iteration; sort for stable messages.
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pointer != out[j].Pointer {
			return out[i].Pointer < out[j].Pointer
		}
		return out[i].Message < out[j].Message
	})
	return dedupe(out)
}

func dedupe(vs []Violation) []Violation {
	seen := make(map[Violation]bool, len(vs))
	out := vs[:0]
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// printer renders the library's messages in English.
var printer = textmessage.NewPrinter(language.English)

// patternNames replaces our long regular expressions with what they mean.
var patternNames = map[string]string{
	`^[A-Za-z0-9](?:\.?[A-Za-z0-9_:@-])*\.?$`:                                  "a safe id (letters, digits, . _ : @ -; starting with a letter or digit; no '..')",
	`^task-[0-9]{8}-[0-9]{3,}$`:                                                "a task id (task-YYYYMMDD-NNN)",
	`^gen-[a-z][a-z0-9-]*$`:                                                    "a general name (gen-<lowercase>)",
	`^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+$`:                                       "an event type (category.name, lowercase)",
	`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]*[A-Za-z0-9_-][A-Za-z0-9_.-]*$`: "owner/name",
}

func message(e *jsonschema.ValidationError) string {
	if p, ok := e.ErrorKind.(*kind.Pattern); ok {
		if name, ok := patternNames[p.Want]; ok {
			return fmt.Sprintf("%s is not %s", quote(p.Got), name)
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

func quote(s string) string {
	const max = 80
	if len(s) > max {
		s = s[:max] + "…"
	}
	return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}
