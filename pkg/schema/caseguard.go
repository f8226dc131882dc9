package schema

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// encoding/json matches object keys to struct fields case-insensitively
// (and, for a key without an exact field, writes the field), so
// {"id":"ok","ID":"../x"} passes the schema ("ID" is just an extra
// property) yet decodes ID as "../x". checkCase closes that hole on the
// document the schema already accepted: a key that equals a field's JSON
// name only when case is ignored is rejected. The field names of each Go
// type are computed once.

// fieldSet is the JSON field names of a struct type (embedded structs'
// fields promoted, as encoding/json does) with each field's type.
type fieldSet struct {
	exact map[string]reflect.Type
	// folded maps strings.ToLower of a name to the names sharing it, for
	// a quick candidate lookup; EqualFold decides.
	folded map[string][]string
	// ascii: every name is ASCII, so an ASCII key can only fold onto a
	// name with the same strings.ToLower.
	ascii bool
}

var fieldSets sync.Map // reflect.Type → *fieldSet

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func fieldsOf(t reflect.Type) *fieldSet {
	if fs, ok := fieldSets.Load(t); ok {
		return fs.(*fieldSet)
	}
	fs := &fieldSet{exact: map[string]reflect.Type{}, folded: map[string][]string{}}
	collectFields(t, fs, map[reflect.Type]bool{})
	fs.ascii = true
	for name := range fs.exact {
		fs.ascii = fs.ascii && isASCII(name)
		k := strings.ToLower(name)
		fs.folded[k] = append(fs.folded[k], name)
	}
	actual, _ := fieldSets.LoadOrStore(t, fs)
	return actual.(*fieldSet)
}

// collectFields adds t's JSON fields; an outer field hides a promoted one
// of the same name (the depth rule of encoding/json, good enough here: a
// name seen at any depth is a field name either way).
func collectFields(t reflect.Type, fs *fieldSet, seen map[reflect.Type]bool) {
	if seen[t] {
		return
	}
	seen[t] = true
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				embedded = append(embedded, et)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fs.exact[name] = f.Type
	}
	for _, et := range embedded {
		inner := &fieldSet{exact: map[string]reflect.Type{}}
		collectFields(et, inner, seen)
		for name, ft := range inner.exact {
			if _, ok := fs.exact[name]; !ok {
				fs.exact[name] = ft
			}
		}
	}
}

// checkCase walks doc (the generic form of a JSON document: map[string]any,
// []any, scalars) beside the Go type it is decoded into.
func checkCase(doc any, t reflect.Type, path []string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil // decodes itself: its keys are its own business
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		fs := fieldsOf(t)
		for k, v := range obj {
			if ft, ok := fs.exact[k]; ok {
				if err := checkCase(v, ft, append(path, k)); err != nil {
					return err
				}
				continue
			}
			for _, name := range fs.folded[strings.ToLower(k)] {
				if strings.EqualFold(k, name) {
					return fmt.Errorf("at '%s': key %q differs only in case from %q", pointer(path), k, name)
				}
			}
			// ToLower and EqualFold disagree on a few letters (the Kelvin
			// sign, the long s): scan every name when either side is not
			// ASCII.
			if !fs.ascii || !isASCII(k) {
				for name := range fs.exact {
					if strings.EqualFold(k, name) {
						return fmt.Errorf("at '%s': key %q differs only in case from %q", pointer(path), k, name)
					}
				}
			}
		}
	case reflect.Slice, reflect.Array:
		arr, ok := doc.([]any)
		if !ok {
			return nil
		}
		for i, v := range arr {
			if err := checkCase(v, t.Elem(), append(path, fmt.Sprint(i))); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		et := t.Elem()
		if !hasStructs(et) {
			return nil
		}
		for k, v := range obj {
			if err := checkCase(v, et, append(path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// hasStructs reports whether a value of type t can hold a struct (the only
// place a case-variant key matters).
func hasStructs(t reflect.Type) bool {
	for {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
		case reflect.Struct:
			return true
		default:
			return false
		}
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
