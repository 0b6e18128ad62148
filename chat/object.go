package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
)

// Object is a JSON object that keeps its keys in the order they were written.
//
// Chat templates print tool schemas and tool-call arguments with tojson, and
// transformers (Python dicts) keeps the request's key order there; a Go map
// would lose it, so conversations are built from Objects.
//
// Values held are those JSON decoding gives, in the types Python would see:
// nil, bool, int64 (an integer literal), *big.Int (an integer literal beyond
// int64: Python ints have no limit), float64 (a literal with '.', 'e' or 'E':
// Python's float), string, []any and *Object. Set also accepts the other Go
// integer and float types.
type Object struct {
	keys []string
	vals map[string]any
}

// NewObject returns an empty object.
func NewObject() *Object { return &Object{vals: map[string]any{}} }

// Set stores v under key and returns o, so objects can be built in one
// expression. A key that is already there keeps its place and takes the new
// value, as a Python dict does.
func (o *Object) Set(key string, v any) *Object {
	if o.vals == nil {
		o.vals = map[string]any{}
	}
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
	return o
}

// Get returns the value under key and whether the key is there.
func (o *Object) Get(key string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[key]
	return v, ok
}

// String returns the string under key, or "" when it is absent or not a string.
func (o *Object) String(key string) string {
	v, _ := o.Get(key)
	s, _ := v.(string)
	return s
}

// Delete removes key; the other keys keep their order.
func (o *Object) Delete(key string) {
	if _, ok := o.vals[key]; !ok {
		return
	}
	delete(o.vals, key)
	for i, k := range o.keys {
		if k == key {
			o.keys = append(o.keys[:i:i], o.keys[i+1:]...)
			break
		}
	}
}

// Keys returns the keys in order. The slice is a copy.
func (o *Object) Keys() []string {
	if o == nil {
		return nil
	}
	return append([]string(nil), o.keys...)
}

// Len is the number of keys.
func (o *Object) Len() int {
	if o == nil {
		return 0
	}
	return len(o.keys)
}

// MarshalJSON writes the object compactly, keys in order, non-ASCII text as is.
func (o *Object) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	if err := writeJSON(&b, o, jsonStyle{itemSep: ",", keySep: ":"}, 0); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// UnmarshalJSON reads a JSON object, keeping key order and number kinds.
func (o *Object) UnmarshalJSON(data []byte) error {
	v, err := ParseJSON(data)
	if err != nil {
		return err
	}
	obj, ok := v.(*Object)
	if !ok {
		return fmt.Errorf("chat: expected a JSON object, got %s", jsonKind(v))
	}
	*o = *obj
	return nil
}

// ParseJSON decodes one JSON value into the types Object documents: objects
// keep their key order (a repeated key keeps its first place and its last
// value, as Python's json.loads does) and numbers stay integers or floats as
// written, so tojson prints them back the way transformers does.
func ParseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, fmt.Errorf("chat: bad JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("chat: bad JSON: data after the value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := NewObject()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v is not a string", kt)
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				obj.Set(key, v)
			}
			if _, err := dec.Token(); err != nil { // the closing '}'
				return nil, err
			}
			return obj, nil
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil { // the closing ']'
				return nil, err
			}
			return list, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		return parseNumber(string(t))
	default: // nil, bool, string
		return t, nil
	}
}

// parseNumber keeps Python's distinction: a literal with a fraction or an
// exponent is a float, any other is an int of any size.
func parseNumber(s string) (any, error) {
	if strings.ContainsAny(s, ".eE") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			// Python's json gives inf for a literal beyond float64; so does ParseFloat,
			// which only adds a range error.
			var ne *strconv.NumError
			if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
				return f, nil
			}
			return nil, err
		}
		return f, nil
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, nil
	}
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return nil, fmt.Errorf("bad number %q", s)
	}
	return n, nil
}

// jsonKind names a decoded value's JSON type for error messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "an array"
	case *Object:
		return "an object"
	default:
		return "a number"
	}
}
