package chat

import (
	"fmt"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// The filters the chat environment adds to or replaces in gonja's defaults,
// each to do what transformers' Jinja2 environment does, and the argument
// helpers they share with the methods.

// bindArgs binds a call's arguments to Python parameter names, positional
// first, then keywords; absent parameters are missing from the map.
func bindArgs(fn string, va *exec.VarArgs, names ...string) (map[string]*exec.Value, error) {
	out := map[string]*exec.Value{}
	if len(va.Args) > len(names) {
		return nil, fmt.Errorf("%s() takes at most %d arguments (%d given)", fn, len(names), len(va.Args))
	}
	for i, a := range va.Args {
		out[names[i]] = a
	}
	for k, v := range va.KwArgs {
		known := false
		for _, n := range names {
			if n == k {
				known = true
			}
		}
		if !known {
			return nil, fmt.Errorf("%s() got an unexpected keyword argument '%s'", fn, k)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s() got multiple values for argument '%s'", fn, k)
		}
		out[k] = v
	}
	return out, nil
}

// optString reads an optional string argument; None counts as absent, as in
// Python's str methods.
func optString(fn string, args map[string]*exec.Value, name string) (*string, error) {
	v, ok := args[name]
	if !ok || v.IsNil() {
		return nil, nil
	}
	if !v.IsString() {
		return nil, fmt.Errorf("%s() argument '%s' must be str or None", fn, name)
	}
	s := v.String()
	return &s, nil
}

// optInt reads an optional integer argument (None counts as absent).
func optInt(fn string, args map[string]*exec.Value, name string) (*int, error) {
	v, ok := args[name]
	if !ok || v.IsNil() {
		return nil, nil
	}
	if !v.IsInteger() && !v.IsBool() {
		return nil, fmt.Errorf("%s() argument '%s' must be an integer", fn, name)
	}
	i := v.Integer()
	if v.IsBool() && v.Bool() {
		i = 1
	}
	return &i, nil
}

func stringList(ss []string) pyList {
	out := make(pyList, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// pyFilters replace or add gonja filters.
var pyFilters = map[string]exec.FilterFunction{
	"tojson": filterToJSON,
	"items":  filterItems,
	"trim":   filterTrim,
}

func errValue(err error) *exec.Value { return exec.AsValue(err) }

// filterToJSON is transformers' tojson: json.dumps(x, ensure_ascii=False,
// indent=indent, separators=separators, sort_keys=sort_keys), parameters in
// that order. Key order is kept and nothing else is escaped (gonja's own
// sorts keys and escapes "'").
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	args, err := bindArgs("tojson", params, "ensure_ascii", "indent", "separators", "sort_keys")
	if err != nil {
		return errValue(err)
	}
	indent, pretty := "", false
	if v, ok := args["indent"]; ok && !v.IsNil() {
		pretty = true
		switch {
		case v.IsString():
			indent = v.String()
		case v.IsInteger() || v.IsBool():
			n := v.Integer()
			if v.IsBool() && v.Bool() {
				n = 1
			}
			indent = strings.Repeat(" ", max(n, 0))
		default:
			return errValue(fmt.Errorf("tojson: indent must be an integer or a string"))
		}
	}
	st := pythonDefaultStyle(indent, pretty)
	if v, ok := args["ensure_ascii"]; ok {
		st.ensureASCII = v.IsTrue()
	}
	if v, ok := args["sort_keys"]; ok {
		st.sortKeys = v.IsTrue()
	}
	if v, ok := args["separators"]; ok && !v.IsNil() {
		if !v.IsList() || v.Len() != 2 || !v.Index(0).IsString() || !v.Index(1).IsString() {
			return errValue(fmt.Errorf("tojson: separators must be a pair of strings"))
		}
		st.itemSep, st.keySep = v.Index(0).String(), v.Index(1).String()
	}
	val, err := fromGonja(in, 0)
	if err != nil {
		return errValue(err)
	}
	var b strings.Builder
	if err := writeJSON(&b, val, st, 0); err != nil {
		return errValue(err)
	}
	return exec.AsSafeValue(b.String())
}

// filterItems is Jinja's items filter: a mapping's (key, value) pairs in the
// mapping's order; undefined gives nothing.
func filterItems(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if len(params.Args) > 0 || len(params.KwArgs) > 0 {
		return errValue(fmt.Errorf("items takes no arguments"))
	}
	if in.IsNil() {
		return exec.AsValue(pyList{})
	}
	if !in.IsDict() {
		return errValue(fmt.Errorf("items: can only get item pairs from a mapping"))
	}
	return exec.AsValue(dictItems(in))
}

// filterTrim is Jinja's trim: str(value).strip(chars).
func filterTrim(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	args, err := bindArgs("trim", params, "chars")
	if err != nil {
		return errValue(err)
	}
	chars, err := optString("trim", args, "chars")
	if err != nil {
		return errValue(err)
	}
	return exec.AsValue(pyStrip(in.String(), chars, true, true))
}

// dictPairs lists a mapping's pairs in order: gonja's Dict keeps its order,
// a Go map (namespace()) is read in gonja's sorted key order.
func dictPairs(v *exec.Value) []*exec.Pair {
	switch d := v.Interface().(type) {
	case *exec.Dict:
		return d.Pairs
	case exec.Dict:
		return d.Pairs
	}
	var out []*exec.Pair
	for _, k := range v.Keys() {
		item, _ := v.GetItem(k.Interface())
		out = append(out, &exec.Pair{Key: k, Value: item})
	}
	return out
}

func dictItems(v *exec.Value) pyList {
	pairs := dictPairs(v)
	out := make(pyList, len(pairs))
	for i, p := range pairs {
		out[i] = pyList{p.Key, p.Value}
	}
	return out
}
