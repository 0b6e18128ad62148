package hf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// config is a parsed config.json: its keys kept raw, read through typed
// getters that name the key at fault. Configs carry dozens of keys that do
// not change the math (initializer_range, use_cache, transformers_version),
// so unknown keys are not errors; the keys that do change it are each read
// or refused by the family (families.go).
type config struct {
	path string
	raw  map[string]json.RawMessage
	err  error // the first error of a getter
}

func parseConfig(path string, data []byte) (*config, error) {
	c := &config{path: path}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&c.raw); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object: %v", path, oneLine(err))
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: text after the JSON object at byte %d", path, dec.InputOffset())
	}
	if c.raw == nil {
		return nil, fmt.Errorf("%s: not a JSON object (null)", path)
	}
	return c, nil
}

func (c *config) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%s: "+format, append([]any{c.path}, args...)...)
	}
}

// has reports whether key is present and not null.
func (c *config) has(key string) bool {
	v, ok := c.raw[key]
	return ok && string(bytes.TrimSpace(v)) != "null"
}

// number reads key as a JSON number; ok false (and an error recorded) when
// it is something else.
func (c *config) number(key string) (json.Number, bool) {
	dec := json.NewDecoder(bytes.NewReader(c.raw[key]))
	dec.UseNumber()
	var n json.Number
	// encoding/json would take the string "5" for a Number: only a JSON
	// number is one.
	if describe(c.raw[key]) != "a number" || dec.Decode(&n) != nil {
		c.fail("%s is %s, not a number", key, describe(c.raw[key]))
		return "", false
	}
	return n, true
}

// int reads a required positive integer below 2^31 (every size of a model
// that can be built).
func (c *config) int(key string) int {
	if !c.has(key) {
		c.fail("%s is missing", key)
		return 0
	}
	n, ok := c.number(key)
	if !ok {
		return 0
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || v <= 0 || v > math.MaxInt32 {
		c.fail("%s = %s is not a positive integer below 2^31", key, n)
		return 0
	}
	return int(v)
}

// intOr is int for an optional key.
func (c *config) intOr(key string, def int) int {
	if !c.has(key) {
		return def
	}
	return c.int(key)
}

// float reads a required finite positive number.
func (c *config) float(key string) float64 {
	if !c.has(key) {
		c.fail("%s is missing", key)
		return 0
	}
	n, ok := c.number(key)
	if !ok {
		return 0
	}
	v, err := strconv.ParseFloat(string(n), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		c.fail("%s = %s is not a positive number", key, n)
		return 0
	}
	return v
}

// floatOr is float for an optional key.
func (c *config) floatOr(key string, def float64) float64 {
	if !c.has(key) {
		return def
	}
	return c.float(key)
}

// boolOr reads an optional boolean.
func (c *config) boolOr(key string, def bool) bool {
	if !c.has(key) {
		return def
	}
	var b bool
	if json.Unmarshal(c.raw[key], &b) != nil {
		c.fail("%s is %s, not true or false", key, describe(c.raw[key]))
	}
	return b
}

// str reads an optional string ("" when absent).
func (c *config) str(key string) string {
	if !c.has(key) {
		return ""
	}
	var s string
	if json.Unmarshal(c.raw[key], &s) != nil {
		c.fail("%s is %s, not a string", key, describe(c.raw[key]))
	}
	return s
}

// object reads an optional object into a config of its own (nil when
// absent), named key in messages.
func (c *config) object(key string) *config {
	if !c.has(key) {
		return nil
	}
	sub := &config{path: c.path + ": " + key}
	if json.Unmarshal(c.raw[key], &sub.raw) != nil || sub.raw == nil {
		c.fail("%s is %s, not an object", key, describe(c.raw[key]))
		return nil
	}
	return sub
}

// ints reads an optional integer or list of integers (eos_token_id).
func (c *config) ints(key string) []int64 {
	if !c.has(key) {
		return nil
	}
	var one int64
	if json.Unmarshal(c.raw[key], &one) == nil {
		return []int64{one}
	}
	var list []int64
	if json.Unmarshal(c.raw[key], &list) != nil {
		c.fail("%s is %s, not an integer or a list of integers", key, describe(c.raw[key]))
	}
	return list
}

// describe names the JSON type of raw for a message.
func describe(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		if len(raw) <= 40 {
			return "the string " + string(raw)
		}
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// oneLine keeps an error to one line.
func oneLine(err error) string {
	return string(bytes.ReplaceAll([]byte(err.Error()), []byte("\n"), []byte(" ")))
}
