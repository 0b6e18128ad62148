package chat

import (
	"fmt"
	"sort"
	"strings"
)

// ParseVar reads a template variable given as KEY=VALUE (minervac template
// --var): VALUE is JSON when it parses as JSON (enable_thinking=false is a
// boolean, builtin_tools=["python"] a list) and a string otherwise
// (reasoning_effort=high).
func ParseVar(s string) (string, any, error) {
	key, val, ok := strings.Cut(s, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return "", nil, fmt.Errorf("chat: variable %q is not KEY=VALUE", s)
	}
	if v, err := ParseJSON([]byte(val)); err == nil {
		return key, v, nil
	}
	return key, val, nil
}

// ReasoningEfforts are the levels gpt-oss was trained with.
var ReasoningEfforts = []string{"low", "medium", "high"}

// CheckReasoningEffort accepts low, medium or high.
func CheckReasoningEffort(s string) error {
	for _, e := range ReasoningEfforts {
		if s == e {
			return nil
		}
	}
	return fmt.Errorf("reasoning effort must be low, medium or high, not %q", s)
}

// normalizeValue brings a Go value a caller passed in Options.Vars into the
// JSON model (Object's value types): string and other slices become []any,
// Go maps Objects with sorted keys, other integers int64.
func normalizeValue(v any) any {
	switch x := v.(type) {
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeValue(e)
		}
		return out
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		o := NewObject()
		for _, k := range keys {
			o.Set(k, normalizeValue(x[k]))
		}
		return o
	case map[string]string:
		m := make(map[string]any, len(x))
		for k, s := range x {
			m[k] = s
		}
		return normalizeValue(m)
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case float32:
		return float64(x)
	}
	return v
}
