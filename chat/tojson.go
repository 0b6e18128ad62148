package chat

import (
	"fmt"
	"math"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// jsonStyle holds json.dumps' layout arguments. Chat templates are rendered by
// transformers with tojson = json.dumps(x, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys), and the rendered prompt must be
// the same bytes, so this writer follows Python's encoder rather than Go's.
type jsonStyle struct {
	indent      string // the unit of indentation; used when pretty is set
	pretty      bool   // indent was given (Python: indent is not None), even as 0 or ""
	itemSep     string // "," between items (then a newline when pretty)
	keySep      string // ": " between a key and its value
	sortKeys    bool
	ensureASCII bool
}

// pythonDefaultStyle is json.dumps' default for the given indent: separators
// ", " and ": " without an indent, "," and ": " with one.
func pythonDefaultStyle(indent string, pretty bool) jsonStyle {
	st := jsonStyle{indent: indent, pretty: pretty, itemSep: ", ", keySep: ": "}
	if pretty {
		st.itemSep = ","
	}
	return st
}

// writeJSON writes v (one of the types Object documents, or a Go map, which has
// no order of its own and so is written with sorted keys) at nesting depth.
func writeJSON(b *strings.Builder, v any, st jsonStyle, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("tojson: value nested deeper than %d levels", maxJSONDepth)
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		writeJSONString(b, x, st.ensureASCII)
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case *big.Int:
		b.WriteString(x.String())
	case float64:
		b.WriteString(pyJSONFloat(x))
	case float32:
		b.WriteString(pyJSONFloat(float64(x)))
	case []any:
		writeJSONList(b, len(x), func(i int) any { return x[i] }, st, depth)
	case *Object:
		if x == nil {
			b.WriteString("null")
			return nil
		}
		keys := x.keys
		if st.sortKeys {
			keys = append([]string(nil), keys...)
			sort.Strings(keys)
		}
		return writeJSONObject(b, keys, func(k string) any { return x.vals[k] }, st, depth)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return writeJSONObject(b, keys, func(k string) any { return x[k] }, st, depth)
	default:
		rv := reflect.ValueOf(v)
		switch rv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32:
			b.WriteString(strconv.FormatInt(rv.Int(), 10))
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			b.WriteString(strconv.FormatUint(rv.Uint(), 10))
		case reflect.Slice, reflect.Array:
			return writeJSONList(b, rv.Len(), func(i int) any { return rv.Index(i).Interface() }, st, depth)
		default:
			return fmt.Errorf("tojson: cannot serialize a value of Go type %T", v)
		}
	}
	return nil
}

// maxJSONDepth bounds recursion so a self-referencing value is an error, not a
// stack overflow (Python raises "Circular reference detected").
const maxJSONDepth = 500

func writeJSONList(b *strings.Builder, n int, at func(int) any, st jsonStyle, depth int) error {
	if n == 0 {
		b.WriteString("[]")
		return nil
	}
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(st.itemSep)
		}
		newline(b, st, depth+1)
		if err := writeJSON(b, at(i), st, depth+1); err != nil {
			return err
		}
	}
	newline(b, st, depth)
	b.WriteByte(']')
	return nil
}

func writeJSONObject(b *strings.Builder, keys []string, at func(string) any, st jsonStyle, depth int) error {
	if len(keys) == 0 {
		b.WriteString("{}")
		return nil
	}
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(st.itemSep)
		}
		newline(b, st, depth+1)
		writeJSONString(b, k, st.ensureASCII)
		b.WriteString(st.keySep)
		if err := writeJSON(b, at(k), st, depth+1); err != nil {
			return err
		}
	}
	newline(b, st, depth)
	b.WriteByte('}')
	return nil
}

func newline(b *strings.Builder, st jsonStyle, depth int) {
	if !st.pretty {
		return
	}
	b.WriteByte('\n')
	for i := 0; i < depth; i++ {
		b.WriteString(st.indent)
	}
}

// writeJSONString escapes as Python's json does: with ensure_ascii off only the
// quote, the backslash and control characters below U+0020 are escaped (DEL
// and U+2028 stay literal); with it on, everything outside ' '..'~' is escaped,
// astral characters as surrogate pairs.
func writeJSONString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	for _, r := range s { // invalid UTF-8 reads as U+FFFD; a Python str cannot hold it
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				fmt.Fprintf(b, `\u%04x`, r)
			case ensureASCII && r > '~':
				if r >= 0x10000 {
					r -= 0x10000
					fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
				} else {
					fmt.Fprintf(b, `\u%04x`, r)
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// pyJSONFloat is float.__repr__ as json.dumps uses it, with json's names for
// the non-finite values.
func pyJSONFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return pyFloatRepr(f)
}

// pyFloatRepr is Python's repr of a finite float: the shortest digits that
// read back to f, in positional form when the decimal exponent is in
// [-4, 16) and as d.ddde±XX otherwise, always with a '.0' or an exponent so
// it reads as a float.
func pyFloatRepr(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return pyJSONFloat(f) // Python's repr says inf/nan; only tojson reaches here
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // e.g. "-1.2345e+06"
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	mant, expStr, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1 // digits d1d2... times 10^(decpt-len)
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			return sign + "0." + strings.Repeat("0", -decpt) + digits
		case decpt >= len(digits):
			return sign + digits + strings.Repeat("0", decpt-len(digits)) + ".0"
		default:
			return sign + digits[:decpt] + "." + digits[decpt:]
		}
	}
	out := digits[:1]
	if len(digits) > 1 {
		out += "." + digits[1:]
	}
	esign := "+"
	if exp < 0 {
		esign, exp = "-", -exp
	}
	return fmt.Sprintf("%s%se%s%02d", sign, out, esign, exp)
}
