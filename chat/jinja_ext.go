package chat

import (
	"fmt"
	"strings"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// This file holds what the chat environment adds to or replaces in gonja's
// defaults, each to match what transformers' Jinja2 environment does.

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

// dictMethods are dict.items/keys/values/get in the dict's own order. gonja's
// versions see a copy converted to a Go map and so return sorted keys; the
// other dict methods are gonja's.
func dictMethods() *exec.MethodSet[map[string]any] {
	m := map[string]exec.Method[map[string]any]{
		"items": func(_ map[string]any, self *exec.Value, va *exec.VarArgs) (any, error) {
			if _, err := bindArgs("items", va); err != nil {
				return nil, err
			}
			return dictItems(self), nil
		},
		"keys": func(_ map[string]any, self *exec.Value, va *exec.VarArgs) (any, error) {
			if _, err := bindArgs("keys", va); err != nil {
				return nil, err
			}
			out := pyList{}
			for _, p := range dictPairs(self) {
				out = append(out, p.Key)
			}
			return out, nil
		},
		"values": func(_ map[string]any, self *exec.Value, va *exec.VarArgs) (any, error) {
			if _, err := bindArgs("values", va); err != nil {
				return nil, err
			}
			out := pyList{}
			for _, p := range dictPairs(self) {
				out = append(out, p.Value)
			}
			return out, nil
		},
		"get": func(_ map[string]any, self *exec.Value, va *exec.VarArgs) (any, error) {
			args, err := bindArgs("get", va, "key", "default")
			if err != nil {
				return nil, err
			}
			key, ok := args["key"]
			if !ok {
				return nil, fmt.Errorf("get() takes at least 1 argument (0 given)")
			}
			for _, p := range dictPairs(self) {
				if p.Key.EqualValueTo(key) {
					return p.Value.Interface(), nil // gonja wraps what a method returns itself
				}
			}
			if d, ok := args["default"]; ok {
				return d.Interface(), nil
			}
			return nil, nil
		},
	}
	for _, name := range []string{"pop", "setdefault", "update", "copy", "clear"} {
		if f, ok := builtins.Methods.Dict.Get(name); ok {
			m[name] = f
		}
	}
	return exec.NewMethodSet(m)
}

// strMethods are Python's str methods: the ones chat templates use written
// from Python's definitions (pystr.go), the rest gonja's.
func strMethods() *exec.MethodSet[string] {
	strip := func(name string, left, right bool) exec.Method[string] {
		return func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
			args, err := bindArgs(name, va, "chars")
			if err != nil {
				return nil, err
			}
			chars, err := optString(name, args, "chars")
			if err != nil {
				return nil, err
			}
			return pyStrip(self, chars, left, right), nil
		}
	}
	split := func(name string, f func(string, *string, int) []string) exec.Method[string] {
		return func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
			args, err := bindArgs(name, va, "sep", "maxsplit")
			if err != nil {
				return nil, err
			}
			sep, err := optString(name, args, "sep")
			if err != nil {
				return nil, err
			}
			if sep != nil && *sep == "" {
				return nil, fmt.Errorf("%s(): empty separator", name)
			}
			n, err := optInt(name, args, "maxsplit")
			if err != nil {
				return nil, err
			}
			maxsplit := -1
			if n != nil {
				maxsplit = *n
			}
			return stringList(f(self, sep, maxsplit)), nil
		}
	}
	affix := func(name string, test func(s, affix string) bool) exec.Method[string] {
		return func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
			args, err := bindArgs(name, va, "affix", "start", "end")
			if err != nil {
				return nil, err
			}
			a, ok := args["affix"]
			if !ok {
				return nil, fmt.Errorf("%s() takes at least 1 argument (0 given)", name)
			}
			start, err := optInt(name, args, "start")
			if err != nil {
				return nil, err
			}
			end, err := optInt(name, args, "end")
			if err != nil {
				return nil, err
			}
			runes := []rune(self)
			i, j := pySliceBounds(len(runes), start, end)
			if i > j {
				return false, nil
			}
			sub := string(runes[i:j])
			var cands []*exec.Value
			if a.IsString() {
				cands = []*exec.Value{a}
			} else if a.IsList() {
				for k := 0; k < a.Len(); k++ {
					cands = append(cands, a.Index(k))
				}
			}
			if cands == nil {
				return nil, fmt.Errorf("%s() first arg must be str or a tuple of str", name)
			}
			for _, c := range cands {
				if !c.IsString() {
					return nil, fmt.Errorf("%s() first arg must be str or a tuple of str", name)
				}
				if test(sub, c.String()) {
					return true, nil
				}
			}
			return false, nil
		}
	}
	m := map[string]exec.Method[string]{
		"strip":      strip("strip", true, true),
		"lstrip":     strip("lstrip", true, false),
		"rstrip":     strip("rstrip", false, true),
		"split":      split("split", pySplit),
		"rsplit":     split("rsplit", pyRSplit),
		"startswith": affix("startswith", strings.HasPrefix),
		"endswith":   affix("endswith", strings.HasSuffix),
		"replace": func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
			args, err := bindArgs("replace", va, "old", "new", "count")
			if err != nil {
				return nil, err
			}
			o, n := args["old"], args["new"]
			if o == nil || n == nil || !o.IsString() || !n.IsString() {
				return nil, fmt.Errorf("replace() takes two strings")
			}
			c, err := optInt("replace", args, "count")
			if err != nil {
				return nil, err
			}
			count := -1
			if c != nil {
				count = *c
			}
			return pyReplace(self, o.String(), n.String(), count), nil
		},
		"upper": func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
			return strings.ToUpper(self), nil
		},
		"lower": func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
			return strings.ToLower(self), nil
		},
	}
	for _, name := range gonjaStrMethods {
		if _, mine := m[name]; mine {
			continue
		}
		if f, ok := builtins.Methods.Str.Get(name); ok {
			m[name] = f
		}
	}
	return exec.NewMethodSet(m)
}

// gonjaStrMethods are the str methods taken from gonja as they are (its
// method sets cannot be listed, so they are named).
var gonjaStrMethods = []string{
	"capitalize", "capwords", "casefold", "center", "count", "encode", "expandtabs", "find", "format",
	"format_map", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "islower", "isnumeric",
	"isprintable", "isspace", "istitle", "isupper", "join", "ljust", "partition", "removeprefix",
	"removesuffix", "rfind", "rjust", "rpartition", "splitlines", "swapcase", "title", "zfill",
}
