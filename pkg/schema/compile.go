package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"regexp"
	"slices"
	"strings"

	"github.com/kingdom-dev/kingdom/schemas"
)

// Kingdom's schemas use a small part of JSON Schema draft 2020-12; this
// file compiles exactly that part (and refuses any other keyword, so a
// schema edit that needs more fails the package's tests instead of being
// silently ignored). Validation follows the draft's rules for these
// keywords; TestValidate_AgreesWithReferenceValidator holds it to a
// complete draft 2020-12 implementation.
//
// A general-purpose validator initialises its meta-schemas in every process
// that links it (3–4 ms and 1.7 MB at start) and walks a generic tree per
// keyword; short-lived processes such as soldier-spawn paid for that on
// every task.

// node is one compiled (sub)schema.
type node struct {
	loc string // schema file#pointer, for programming errors

	boolean *bool // a true/false schema

	types  []string // "null" "boolean" "number" "integer" "string" "array" "object"
	ref    *node
	hasC   bool
	cnst   any
	enum   []any
	format string

	required   []string
	properties map[string]*node
	addlFalse  bool
	addl       *node

	items              *node
	minItems, maxItems int // -1: absent

	minLength, maxLength int // -1: absent
	pattern              *regexp.Regexp
	minimum              *big.Rat

	allOf, oneOf     []*node
	ifS, thenS, elsS *node
}

// annotations are keywords that never affect validity.
var annotations = map[string]bool{"$schema": true, "$id": true, "$defs": true, "$comment": true,
	"title": true, "description": true, "examples": true, "default": true}

// typeOrder is the order type names appear in messages.
var typeOrder = []string{"null", "boolean", "number", "integer", "string", "array", "object"}

// compiler turns embedded schema documents into nodes. Nodes are shared by
// every reference to them ("defs.json#/$defs/id" compiles once).
type compiler struct {
	docs     map[string]any   // file name → parsed document
	nodes    map[string]*node // file#pointer → node
	patterns map[string]*regexp.Regexp
}

func newCompiler() *compiler {
	return &compiler{docs: map[string]any{}, nodes: map[string]*node{}, patterns: map[string]*regexp.Regexp{}}
}

func (c *compiler) doc(name string) (any, error) {
	if d, ok := c.docs[name]; ok {
		return d, nil
	}
	data, err := fs.ReadFile(schemas.FS, name)
	if err != nil {
		return nil, fmt.Errorf("schema %s is not embedded: %w", name, err)
	}
	d, err := parseJSON(data)
	if err != nil {
		return nil, fmt.Errorf("parse schema %s: %w", name, err)
	}
	c.docs[name] = d
	return d, nil
}

// compileRef compiles the schema at file#pointer.
func (c *compiler) compileRef(file, ptr string) (*node, error) {
	key := file + "#" + ptr
	if n, ok := c.nodes[key]; ok {
		return n, nil
	}
	d, err := c.doc(file)
	if err != nil {
		return nil, err
	}
	v := d
	if ptr != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("schema reference %s: no %q", key, tok)
			}
			if v, ok = m[tok]; !ok {
				return nil, fmt.Errorf("schema reference %s: no %q", key, tok)
			}
		}
	}
	return c.compile(file, ptr, v)
}

func (c *compiler) compile(file, ptr string, v any) (*node, error) {
	key := file + "#" + ptr
	if n, ok := c.nodes[key]; ok {
		return n, nil
	}
	n := &node{loc: key, minItems: -1, maxItems: -1, minLength: -1, maxLength: -1}
	c.nodes[key] = n // before the children: a reference cycle finds it
	if b, ok := v.(bool); ok {
		n.boolean = &b
		return n, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schema %s: not an object or boolean", key)
	}
	sub := func(name string, x any) (*node, error) { return c.compile(file, ptr+"/"+name, x) }
	list := func(name string, x any) ([]*node, error) {
		arr, ok := x.([]any)
		if !ok || len(arr) == 0 {
			return nil, fmt.Errorf("schema %s/%s: want a non-empty array", key, name)
		}
		var out []*node
		for i, s := range arr {
			sn, err := sub(fmt.Sprintf("%s/%d", name, i), s)
			if err != nil {
				return nil, err
			}
			out = append(out, sn)
		}
		return out, nil
	}
	count := func(name string, x any) (int, error) {
		num, ok := x.(json.Number)
		i, err := num.Int64()
		if !ok || err != nil || i < 0 {
			return 0, fmt.Errorf("schema %s/%s: want a non-negative integer", key, name)
		}
		return int(i), nil
	}
	var err error
	for k, x := range m {
		switch k {
		case "type":
			switch t := x.(type) {
			case string:
				n.types = []string{t}
			case []any:
				for _, e := range t {
					s, _ := e.(string)
					n.types = append(n.types, s)
				}
			}
			for _, t := range n.types {
				if !slices.Contains(typeOrder, t) {
					return nil, fmt.Errorf("schema %s: unknown type %v", key, x)
				}
			}
			slices.SortFunc(n.types, func(a, b string) int {
				return slices.Index(typeOrder, a) - slices.Index(typeOrder, b)
			})
		case "$ref":
			ref, _ := x.(string)
			rfile, rptr, _ := strings.Cut(ref, "#")
			if rfile == "" {
				rfile = file
			}
			if strings.Contains(rfile, "/") || strings.Contains(rfile, ":") {
				return nil, fmt.Errorf("schema %s: reference %q leaves the embedded schemas", key, ref)
			}
			n.ref, err = c.compileRef(rfile, rptr)
		case "const":
			n.hasC, n.cnst = true, x
		case "enum":
			arr, ok := x.([]any)
			if !ok || len(arr) == 0 {
				return nil, fmt.Errorf("schema %s: enum wants a non-empty array", key)
			}
			n.enum = arr
		case "format":
			n.format, _ = x.(string)
			if n.format != "date-time" {
				return nil, fmt.Errorf("schema %s: unsupported format %v", key, x)
			}
		case "required":
			arr, _ := x.([]any)
			for _, e := range arr {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("schema %s: required wants strings", key)
				}
				n.required = append(n.required, s)
			}
		case "properties":
			props, ok := x.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("schema %s: properties wants an object", key)
			}
			n.properties = make(map[string]*node, len(props))
			for name, p := range props {
				if n.properties[name], err = sub("properties/"+escapeToken(name), p); err != nil {
					return nil, err
				}
			}
		case "additionalProperties":
			if b, ok := x.(bool); ok {
				n.addlFalse = !b
			} else {
				n.addl, err = sub(k, x)
			}
		case "items":
			n.items, err = sub(k, x)
		case "minItems":
			n.minItems, err = count(k, x)
		case "maxItems":
			n.maxItems, err = count(k, x)
		case "minLength":
			n.minLength, err = count(k, x)
		case "maxLength":
			n.maxLength, err = count(k, x)
		case "pattern":
			src, _ := x.(string)
			re, ok := c.patterns[src]
			if !ok {
				if re, err = regexp.Compile(src); err != nil {
					return nil, fmt.Errorf("schema %s: pattern: %w", key, err)
				}
				c.patterns[src] = re
			}
			n.pattern = re
		case "minimum":
			num, _ := x.(json.Number)
			r, ok := new(big.Rat).SetString(num.String())
			if !ok {
				return nil, fmt.Errorf("schema %s: minimum wants a number", key)
			}
			n.minimum = r
		case "allOf":
			n.allOf, err = list(k, x)
		case "oneOf":
			n.oneOf, err = list(k, x)
		case "if":
			n.ifS, err = sub(k, x)
		case "then":
			n.thenS, err = sub(k, x)
		case "else":
			n.elsS, err = sub(k, x)
		default:
			if !annotations[k] {
				return nil, fmt.Errorf("schema %s: keyword %q is not supported by pkg/schema's validator", key, k)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return n, nil
}

func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// parseJSON reads one JSON value with numbers kept exact (json.Number);
// anything after the value is an error.
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid character after top-level value")
	}
	return v, nil
}
