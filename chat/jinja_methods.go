package chat

import (
	"fmt"
	"strings"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// Python's dict and str methods for templates (see pystr.go for the string
// algorithms).

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
