package schema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// check validates v (a parseJSON value) against n and appends what it
// breaks to out. Like draft 2020-12 validators, a value of the wrong type,
// or outside const/enum/format, reports only that; otherwise every broken
// keyword is reported.
func (n *node) check(v any, path []string, out []Violation) []Violation {
	if n.boolean != nil {
		if !*n.boolean {
			out = append(out, Violation{Pointer: pointer(path), Message: "false schema"})
		}
		return out
	}
	if len(n.types) > 0 && !hasType(n.types, v) {
		return append(out, Violation{Pointer: pointer(path),
			Message: fmt.Sprintf("got %s, want %s", typeName(v), strings.Join(n.types, " or "))})
	}
	if n.hasC && !equal(v, n.cnst) {
		return append(out, Violation{Pointer: pointer(path), Message: constMessage(n.cnst)})
	}
	if n.enum != nil && !slices.ContainsFunc(n.enum, func(e any) bool { return equal(v, e) }) {
		return append(out, Violation{Pointer: pointer(path), Message: enumMessage(n.enum)})
	}
	if n.format != "" {
		if s, ok := v.(string); ok {
			if err := checkDateTime(s); err != nil {
				return append(out, Violation{Pointer: pointer(path),
					Message: fmt.Sprintf("%s is not valid %s: %v", jsQuote(s), n.format, err)})
			}
		}
	}
	if n.ref != nil {
		out = n.ref.check(v, path, out)
	}
	switch t := v.(type) {
	case map[string]any:
		out = n.checkObject(t, path, out)
	case []any:
		out = n.checkArray(t, path, out)
	case string:
		out = n.checkString(t, path, out)
	case json.Number:
		if n.minimum != nil {
			if r, ok := new(big.Rat).SetString(t.String()); ok && r.Cmp(n.minimum) < 0 {
				got, _ := r.Float64()
				if got == 0 {
					got = 0 // -1e-400 reads as "got 0", not "got -0"
				}
				want, _ := n.minimum.Float64()
				out = append(out, Violation{Pointer: pointer(path), Message: fmt.Sprintf("minimum: got %v, want %v", got, want)})
			}
		}
	}
	for _, s := range n.allOf {
		out = s.check(v, path, out)
	}
	if len(n.oneOf) > 0 {
		out = n.checkOneOf(v, path, out)
	}
	if n.ifS != nil {
		if n.ifS.valid(v) {
			if n.thenS != nil {
				out = n.thenS.check(v, path, out)
			}
		} else if n.elsS != nil {
			out = n.elsS.check(v, path, out)
		}
	}
	return out
}

func (n *node) valid(v any) bool { return len(n.check(v, nil, nil)) == 0 }

func (n *node) checkObject(obj map[string]any, path []string, out []Violation) []Violation {
	var missing []string
	for _, r := range n.required {
		if _, ok := obj[r]; !ok {
			missing = append(missing, r)
		}
	}
	switch len(missing) {
	case 0:
	case 1:
		out = append(out, Violation{Pointer: pointer(path), Message: "missing property " + jsQuote(missing[0])})
	default:
		out = append(out, Violation{Pointer: pointer(path), Message: "missing properties " + joinQuoted(missing)})
	}
	if n.properties == nil && n.addl == nil && !n.addlFalse {
		return out
	}
	var extra []string
	for k, x := range obj {
		if p, ok := n.properties[k]; ok {
			out = p.check(x, append(path, k), out)
		} else if n.addl != nil {
			out = n.addl.check(x, append(path, k), out)
		} else if n.addlFalse {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		out = append(out, Violation{Pointer: pointer(path), Message: "additional properties " + joinQuoted(extra) + " not allowed"})
	}
	return out
}

func (n *node) checkArray(arr []any, path []string, out []Violation) []Violation {
	if n.minItems >= 0 && len(arr) < n.minItems {
		out = append(out, Violation{Pointer: pointer(path), Message: fmt.Sprintf("minItems: got %d, want %d", len(arr), n.minItems)})
	}
	if n.maxItems >= 0 && len(arr) > n.maxItems {
		out = append(out, Violation{Pointer: pointer(path), Message: fmt.Sprintf("maxItems: got %d, want %d", len(arr), n.maxItems)})
	}
	if n.items != nil {
		for i, x := range arr {
			out = n.items.check(x, append(path, strconv.Itoa(i)), out)
		}
	}
	return out
}

func (n *node) checkString(s string, path []string, out []Violation) []Violation {
	if n.minLength >= 0 || n.maxLength >= 0 {
		l := utf8.RuneCountInString(s)
		if n.minLength >= 0 && l < n.minLength {
			out = append(out, Violation{Pointer: pointer(path), Message: fmt.Sprintf("minLength: got %d, want %d", l, n.minLength)})
		}
		if n.maxLength >= 0 && l > n.maxLength {
			out = append(out, Violation{Pointer: pointer(path), Message: fmt.Sprintf("maxLength: got %d, want %d", l, n.maxLength)})
		}
	}
	if n.pattern != nil && !n.pattern.MatchString(s) {
		src := n.pattern.String()
		msg := fmt.Sprintf("%s does not match pattern %s", jsQuote(s), jsQuote(src))
		if name, ok := patternNames[src]; ok {
			msg = fmt.Sprintf("%s is not %s", quote(s), name)
		}
		out = append(out, Violation{Pointer: pointer(path), Message: msg})
	}
	return out
}

// checkOneOf reports no alternative holding as one violation listing each
// alternative's problems (not a list that reads as if all were required),
// and two holding as such.
func (n *node) checkOneOf(v any, path []string, out []Violation) []Violation {
	matched := -1
	var alts []string
	here := pointer(path)
	for i, s := range n.oneOf {
		vs := s.check(v, path, nil)
		if len(vs) == 0 {
			if matched >= 0 {
				return append(out, Violation{Pointer: here,
					Message: fmt.Sprintf("more than one alternative holds (subschemas %d and %d); exactly one must", matched, i)})
			}
			matched = i
			continue
		}
		for _, x := range sortViolations(vs) {
			if x.Pointer == here {
				alts = append(alts, x.Message)
			} else {
				alts = append(alts, x.String())
			}
		}
	}
	if matched < 0 {
		out = append(out, Violation{Pointer: here, Message: "none of the alternatives holds: " + strings.Join(alts, " or ")})
	}
	return out
}

// sortViolations orders violations by pointer, then message, without
// duplicates: stable messages whatever the map order of the document.
func sortViolations(vs []Violation) []Violation {
	slices.SortFunc(vs, func(a, b Violation) int {
		if c := strings.Compare(a.Pointer, b.Pointer); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return slices.Compact(vs)
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func hasType(types []string, v any) bool {
	name := typeName(v)
	for _, t := range types {
		if t == name || (t == "integer" && name == "number" && isInteger(v.(json.Number))) {
			return true
		}
	}
	return false
}

func isInteger(n json.Number) bool {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		return true
	}
	r, ok := new(big.Rat).SetString(s)
	return ok && r.IsInt()
}

// equal is JSON equality: numbers by value, objects by members.
func equal(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			return false
		}
		if a == bn {
			return true
		}
		ra, ok1 := new(big.Rat).SetString(a.String())
		rb, ok2 := new(big.Rat).SetString(bn.String())
		return ok1 && ok2 && ra.Cmp(rb) == 0
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, x := range a {
			y, ok := bm[k]
			if !ok || !equal(x, y) {
				return false
			}
		}
		return true
	case []any:
		ba, ok := b.([]any)
		if !ok || len(a) != len(ba) {
			return false
		}
		for i := range a {
			if !equal(a[i], ba[i]) {
				return false
			}
		}
		return true
	case string:
		s, ok := b.(string)
		return ok && a == s
	case bool:
		x, ok := b.(bool)
		return ok && a == x
	case nil:
		return b == nil
	}
	return false
}

func display(v any) string {
	switch v := v.(type) {
	case string:
		return jsQuote(v)
	case nil:
		return "null"
	case []any, map[string]any:
		return "value"
	}
	return fmt.Sprint(v)
}

func constMessage(want any) string {
	switch want.(type) {
	case []any, map[string]any:
		return "'const' failed"
	}
	return "value must be " + display(want)
}

func enumMessage(want []any) string {
	var ds []string
	for _, w := range want {
		switch w.(type) {
		case []any, map[string]any:
			return "'enum' failed"
		}
		ds = append(ds, display(w))
	}
	if len(ds) == 1 {
		return "value must be " + ds[0]
	}
	return "value must be one of " + strings.Join(ds, ", ")
}

// jsQuote single-quotes s for a message: Go escapes, double quotes kept
// as they are, single quotes escaped.
func jsQuote(s string) string {
	q := strconv.Quote(s)
	q = strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
	return "'" + strings.ReplaceAll(q, `'`, `\'`) + "'"
}

func joinQuoted(names []string) string {
	qs := make([]string, len(names))
	for i, s := range names {
		qs[i] = jsQuote(s)
	}
	return strings.Join(qs, ", ")
}

// checkDateTime checks an RFC 3339 date-time (section 5.6):
// YYYY-MM-DDThh:mm:ss[.frac](Z|±hh:mm), a real calendar date, a leap
// second only at 23:59 UTC.
func checkDateTime(s string) error {
	if len(s) < 20 {
		return fmt.Errorf("less than 20 characters long")
	}
	if s[10] != 'T' && s[10] != 't' {
		return fmt.Errorf("11th character must be t or T")
	}
	if _, err := time.Parse("2006-01-02", s[:10]); err != nil {
		return fmt.Errorf("invalid date element: %v", err)
	}
	if err := checkTime(s[11:]); err != nil {
		return fmt.Errorf("invalid time element: %v", err)
	}
	return nil
}

func checkTime(s string) error {
	if len(s) < 9 {
		return fmt.Errorf("less than 9 characters long")
	}
	if s[2] != ':' || s[5] != ':' {
		return fmt.Errorf("missing colon in correct place")
	}
	h, ok1 := twoDigits(s[0:2])
	m, ok2 := twoDigits(s[3:5])
	sec, ok3 := twoDigits(s[6:8])
	if !ok1 || !ok2 || !ok3 {
		return fmt.Errorf("invalid hour/min/sec")
	}
	if h > 23 || m > 59 || sec > 60 {
		return fmt.Errorf("hour/min/sec out of range")
	}
	rest := s[8:]
	if frac, ok := strings.CutPrefix(rest, "."); ok {
		i := 0
		for i < len(frac) && frac[i] >= '0' && frac[i] <= '9' {
			i++
		}
		if i == 0 {
			return fmt.Errorf("no digits in second fraction")
		}
		rest = frac[i:]
	}
	if rest != "Z" && rest != "z" {
		if len(rest) != 6 {
			return fmt.Errorf("offset must be 6 characters long")
		}
		sign := 0
		switch rest[0] {
		case '+':
			sign = -1
		case '-':
			sign = 1
		default:
			return fmt.Errorf("offset must begin with plus/minus")
		}
		if rest[3] != ':' {
			return fmt.Errorf("missing colon in offset in correct place")
		}
		zh, ok1 := twoDigits(rest[1:3])
		zm, ok2 := twoDigits(rest[4:6])
		if !ok1 || !ok2 {
			return fmt.Errorf("invalid hour/min in offset")
		}
		if zh > 23 || zm > 59 {
			return fmt.Errorf("hour/min in offset out of range")
		}
		hm := h*60 + m + sign*(zh*60+zm)
		if hm < 0 {
			hm += 24 * 60
		}
		h, m = hm/60%24, hm%60
	}
	if sec == 60 && (h != 23 || m != 59) {
		return fmt.Errorf("invalid leap second")
	}
	return nil
}

func twoDigits(s string) (int, bool) {
	if len(s) != 2 || s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' {
		return 0, false
	}
	return int(s[0]-'0')*10 + int(s[1]-'0'), true
}
