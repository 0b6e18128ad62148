package ir

import (
	"fmt"
	"sort"
)

// Attrs are an op's compile-time parameters. Values are int64, float64,
// string, []int64 or []float64; the text form prints them sorted by key so that
// print → parse → print is stable.
type Attrs map[string]any

// Int returns an integer attribute, or def when absent.
func (a Attrs) Int(key string, def int64) int64 {
	if v, ok := a[key].(int64); ok {
		return v
	}
	return def
}

// Float returns a float attribute (integers are converted), or def when absent.
func (a Attrs) Float(key string, def float64) float64 {
	switch v := a[key].(type) {
	case float64:
		return v
	case int64:
		return float64(v)
	}
	return def
}

// Str returns a string attribute, or def when absent.
func (a Attrs) Str(key string, def string) string {
	if v, ok := a[key].(string); ok {
		return v
	}
	return def
}

// Ints returns an integer-list attribute, or nil when absent.
func (a Attrs) Ints(key string) []int64 {
	v, _ := a[key].([]int64)
	return v
}

// Floats returns a float-list attribute, or nil when absent (an empty list
// reads back from the text form as []int64, and is empty here too).
func (a Attrs) Floats(key string) []float64 {
	switch v := a[key].(type) {
	case []float64:
		return v
	case []int64:
		if len(v) == 0 {
			return []float64{}
		}
	}
	return nil
}

// Keys returns the attribute names in sorted order.
func (a Attrs) Keys() []string {
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Clone copies the map (list values are copied too), normalising Go integer
// and float kinds to int64/float64 so that builders may pass plain ints.
func (a Attrs) Clone() (Attrs, error) {
	if a == nil {
		return nil, nil
	}
	out := make(Attrs, len(a))
	for k, v := range a {
		switch v := v.(type) {
		case int:
			out[k] = int64(v)
		case int32:
			out[k] = int64(v)
		case int64:
			out[k] = v
		case uint32:
			out[k] = int64(v)
		case float32:
			out[k] = float64(v)
		case float64:
			out[k] = v
		case bool:
			if v {
				out[k] = int64(1)
			} else {
				out[k] = int64(0)
			}
		case string:
			out[k] = v
		case []int64:
			out[k] = append([]int64(nil), v...)
		case []float64:
			out[k] = append([]float64(nil), v...)
		case []float32:
			l := make([]float64, len(v))
			for i, x := range v {
				l[i] = float64(x)
			}
			out[k] = l
		case []int:
			l := make([]int64, len(v))
			for i, x := range v {
				l[i] = int64(x)
			}
			out[k] = l
		default:
			return nil, fmt.Errorf("attribute %s: unsupported type %T", k, v)
		}
	}
	return out, nil
}
