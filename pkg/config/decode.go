package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// This file holds the machinery shared by every loader: read the file, parse
// it into a yaml.Node, walk the node against the target struct (so unknown
// keys and type errors come out with key paths and lines, which yaml.v3's
// own messages lack), decode strictly, then validate.
//
// Value rules live next to the fields in a `check` struct tag, a
// comma-separated list of:
//
//	min=N, max=N     numeric bounds (inclusive)
//	hour             0..23
//	pct              0..100
//	oneof=a|b|c      allowed strings (for a []string: allowed elements)
//	nonempty         the string must not be empty
//	opt              the zero value is allowed and skips the other rules
//
// The same rules phrase the "expected ..." part of type errors, so a key says
// the same thing whether it got "abc" or -1.

// source is a parsed configuration file.
type source struct {
	file  string
	doc   *yaml.Node     // top-level mapping; nil for an empty file
	lines map[string]int // key path -> line of the key
}

// line returns the line of key, or of its nearest ancestor present in the
// file, or 0.
func (s *source) line(key string) int {
	if s == nil {
		return 0
	}
	for key != "" {
		if l, ok := s.lines[key]; ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return 0
}

// locate fills File and Line of validation errors.
func (s *source) locate(err error) error {
	errs := Errors(err)
	for _, e := range errs {
		e.File = s.file
		if e.Line == 0 {
			e.Line = s.line(e.Key)
		}
	}
	return join(errs)
}

// loadRole loads a role file into c (which holds the defaults) and validates
// it. A missing file leaves the defaults.
func loadRole(path string, c interface{ Validate() error }) (*source, error) {
	src, err := loadFile(path, c, true)
	if errors.Is(err, errMissing) {
		src = &source{file: path}
	} else if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, src.locate(err)
	}
	return src, nil
}

// errMissing marks a role file that does not exist (which means defaults).
var errMissing = errors.New("missing")

// loadFile reads path into dst, which already holds the defaults. A missing
// file returns errMissing when missingOK, else an error naming it.
func loadFile(path string, dst any, missingOK bool) (*source, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if missingOK && errors.Is(err, fs.ErrNotExist) {
			return nil, errMissing
		}
		return nil, &Error{File: path, Msg: "read", Err: unwrapPath(err)}
	}
	return decode(path, data, dst)
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// decode parses data (the contents of file) into dst.
func decode(file string, data []byte, dst any) (*source, error) {
	src := &source{file: file, lines: map[string]int{}}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		e := &Error{File: file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			e.Line, _ = strconv.Atoi(m[1])
			e.Msg = m[2]
		}
		return nil, e
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return src, nil
		}
		doc = doc.Content[0]
	}
	if doc.Kind == 0 || isNull(doc) {
		return src, nil // empty file: all defaults
	}
	src.doc = doc

	w := walker{file: file, lines: src.lines}
	w.walk(doc, reflect.TypeOf(dst).Elem(), "", rules{})
	if len(w.errs) > 0 {
		return nil, join(w.errs)
	}

	// The node already parsed is decoded: the file is parsed once. The walk
	// above refused unknown keys (what KnownFields would) and everything
	// else yaml refuses.
	if err := doc.Decode(dst); err != nil {
		return nil, &Error{File: file, Msg: "decode", Err: err}
	}
	return src, nil
}

// lookup returns the value node of key in mapping n, or nil.
func lookup(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return resolveAlias(n.Content[i+1])
		}
	}
	return nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// maxNodes bounds the walk: aliases can make a small file expand
// exponentially ("billion laughs").
const maxNodes = 100_000

// walker checks a yaml.Node tree against a Go type.
type walker struct {
	file    string
	lines   map[string]int
	errs    []*Error
	visited int
}

func (w *walker) fail(n *yaml.Node, key, format string, args ...any) {
	w.errs = append(w.errs, &Error{File: w.file, Line: n.Line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (w *walker) mismatch(n *yaml.Node, key string, t reflect.Type, r rules) {
	w.fail(n, key, "expected %s, got %s", expectation(t, r), describeNode(n))
}

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string, r rules) {
	n = resolveAlias(n)
	if n == nil || isNull(n) {
		return // null keeps the default (or empties a list)
	}
	if w.visited++; w.visited > maxNodes {
		if w.visited == maxNodes+1 {
			w.fail(n, path, "document too large after expanding aliases (more than %d values)", maxNodes)
		}
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			w.mismatch(n, path, t, r)
			return
		}
		w.walkStruct(n, t, path, map[string]int{})
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.mismatch(n, path, t, r)
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := resolveAlias(n.Content[i])
			if k.Kind != yaml.ScalarNode {
				w.fail(k, path, "expected a string key, got %s", describeNode(k))
				continue
			}
			w.walk(n.Content[i+1], t.Elem(), join2(path, k.Value), rules{})
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.mismatch(n, path, t, r)
			return
		}
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			w.lines[p] = item.Line
			w.walk(item, t.Elem(), p, r)
		}
	case reflect.Interface:
		// any value (schedule payloads)
	default:
		if n.Kind != yaml.ScalarNode {
			w.mismatch(n, path, t, r)
			return
		}
		// Let yaml itself say whether the scalar fits, so the walk and the
		// real decode agree.
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			w.mismatch(n, path, t, r)
		}
	}
}

func (w *walker) walkStruct(n *yaml.Node, t reflect.Type, path string, seen map[string]int) {
	fields := structFields(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolveAlias(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			w.fail(k, path, "expected a key name, got %s", describeNode(k))
			continue
		}
		if k.Value == "<<" && k.ShortTag() == "!!merge" {
			w.walkMerge(resolveAlias(v), t, path, seen)
			continue
		}
		p := join2(path, k.Value)
		f, ok := fields.byName[k.Value]
		if !ok {
			w.fail(k, p, "unknown key (known: %s)", strings.Join(fields.names, ", "))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			w.fail(k, p, "duplicate key (first at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		w.lines[p] = k.Line
		w.walk(v, f.typ, p, f.rules)
	}
}

// walkMerge checks the mappings merged in with "<<".
func (w *walker) walkMerge(v *yaml.Node, t reflect.Type, path string, seen map[string]int) {
	if w.visited++; w.visited > maxNodes {
		return
	}
	switch {
	case v == nil:
	case v.Kind == yaml.MappingNode:
		w.walkStruct(v, t, path, map[string]int{})
	case v.Kind == yaml.SequenceNode:
		for _, m := range v.Content {
			w.walkMerge(resolveAlias(m), t, path, seen)
		}
	default:
		w.fail(v, path, "expected a mapping to merge, got %s", describeNode(v))
	}
}

func join2(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return strconv.Quote(n.Value)
	}
}

type field struct {
	name  string
	index int
	typ   reflect.Type
	rules rules
}

type fieldSet struct {
	byName map[string]field
	names  []string // in declaration order, for "known: ..." messages
}

// fieldSets holds each struct type's fieldSet, built once per process (as
// encoding/json keeps its field lists): every load of every file walks the
// same few types. A fieldSet is never changed after it is built.
var fieldSets sync.Map // reflect.Type → fieldSet

func structFields(t reflect.Type) fieldSet {
	if fs, ok := fieldSets.Load(t); ok {
		return fs.(fieldSet)
	}
	fs := buildFields(t)
	fieldSets.Store(t, fs)
	return fs
}

func buildFields(t reflect.Type) fieldSet {
	fs := fieldSet{byName: map[string]field{}}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		fs.byName[name] = field{name: name, index: i, typ: sf.Type, rules: parseRules(sf.Tag.Get("check"))}
		fs.names = append(fs.names, name)
	}
	return fs
}

// rules is a parsed `check` tag.
type rules struct {
	opt      bool
	nonempty bool
	min, max *float64
	oneof    []string
}

func parseRules(tag string) rules {
	var r rules
	num := func(s string) *float64 {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			panic(fmt.Sprintf("config: bad check tag number %q", s))
		}
		return &f
	}
	for part := range strings.SplitSeq(tag, ",") {
		name, arg, _ := strings.Cut(part, "=")
		switch name {
		case "":
		case "opt":
			r.opt = true
		case "nonempty":
			r.nonempty = true
		case "min":
			r.min = num(arg)
		case "max":
			r.max = num(arg)
		case "hour":
			r.min, r.max = num("0"), num("23")
		case "pct":
			r.min, r.max = num("0"), num("100")
		case "oneof":
			r.oneof = strings.Split(arg, "|")
		default:
			panic(fmt.Sprintf("config: unknown check rule %q", name))
		}
	}
	return r
}

// expectation phrases what a value of type t under rules r must be.
func expectation(t reflect.Type, r rules) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return numberPhrase("integer", "an integer", r)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return numberPhrase("integer", "a non-negative integer", r)
	case reflect.Float32, reflect.Float64:
		return numberPhrase("number", "a number", r)
	case reflect.String:
		switch {
		case len(r.oneof) > 0:
			return "one of " + strings.Join(r.oneof, "|")
		case r.nonempty:
			return "a non-empty string"
		}
		return "a string"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			if len(r.oneof) > 0 {
				return "a list of " + strings.Join(r.oneof, "|")
			}
			return "a list of strings"
		}
		return "a list of mappings"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	}
	return "a value"
}

func numberPhrase(noun, plain string, r rules) string {
	f := func(p *float64) string { return fmtFloat(*p) }
	switch {
	case r.min != nil && r.max != nil:
		return fmt.Sprintf("%s from %s to %s", article(noun), f(r.min), f(r.max))
	case r.min != nil && *r.min == 0:
		return "a non-negative " + noun
	case r.min != nil && *r.min == 1 && noun == "integer":
		return "a positive integer"
	case r.min != nil:
		return fmt.Sprintf("%s of at least %s", article(noun), f(r.min))
	case r.max != nil:
		return fmt.Sprintf("%s of at most %s", article(noun), f(r.max))
	}
	return plain
}

func article(noun string) string {
	if strings.IndexByte("aeiou", noun[0]) >= 0 {
		return "an " + noun
	}
	return "a " + noun
}

// checkRules applies the `check` tags of v (a struct) and everything below it.
func checkRules(v reflect.Value, path string, p *problems) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		fs := structFields(t)
		for _, name := range fs.names {
			f := fs.byName[name]
			fv := v.Field(f.index)
			key := join2(path, name)
			checkValue(fv, key, f.rules, p)
			checkRules(fv, key, p)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			for i := range v.Len() {
				checkRules(v.Index(i), fmt.Sprintf("%s[%d]", path, i), p)
			}
		}
	}
}

func checkValue(v reflect.Value, key string, r rules, p *problems) {
	// An optional key (*T, null = unset) is checked when it is set.
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if r.opt && v.IsZero() {
		return
	}
	bad := func(got string) { p.add(key, "expected %s, got %s", expectation(v.Type(), r), got) }
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if !inRange(float64(v.Int()), r) {
			bad(strconv.FormatInt(v.Int(), 10))
		}
	case reflect.Float32, reflect.Float64:
		if !inRange(v.Float(), r) {
			bad(fmtFloat(v.Float()))
		}
	case reflect.String:
		s := v.String()
		if (r.nonempty && s == "") || (len(r.oneof) > 0 && !slices.Contains(r.oneof, s)) {
			bad(strconv.Quote(s))
		}
	case reflect.Slice:
		if len(r.oneof) > 0 && v.Type().Elem().Kind() == reflect.String {
			for i := range v.Len() {
				s := v.Index(i).String()
				if !slices.Contains(r.oneof, s) {
					p.add(fmt.Sprintf("%s[%d]", key, i), "expected one of %s, got %q", strings.Join(r.oneof, "|"), s)
				}
			}
		}
	}
}

func inRange(f float64, r rules) bool {
	return (r.min == nil || f >= *r.min) && (r.max == nil || f <= *r.max)
}
