package chat

import (
	"reflect"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// pyList is a list as templates see it. gonja v2.9.1 indexes lists off by one
// from the end (x[-n] on a list of length n is undefined, so messages[-1] of
// a one-message conversation vanishes, and with it mistral v0.3's tool block).
// gonja asks a value for its items through exec.ItemGetter before its own
// code, so lists handed to templates, and the lists filters and methods
// return, are this type with Python's indexing. Being a slice, it is still a
// list to everything else in gonja (iteration, length, slicing keeps the type).
type pyList []any

// GetItem is Python's list[i]: negative indexes count from the end; out of
// range is undefined, as in Jinja.
func (l pyList) GetItem(key any) (*exec.Value, bool) {
	i, ok := key.(int)
	if !ok {
		return exec.AsValue(nil), false
	}
	if i < 0 {
		i += len(l)
	}
	if i < 0 || i >= len(l) {
		return exec.AsValue(nil), false
	}
	return exec.ToValue(l[i]), true
}

// asPyList turns a list value a filter produced into a pyList. Tuples (gonja's
// own tuple type, which prints as Python does) and non-lists pass through.
func asPyList(v *exec.Value) *exec.Value {
	if v == nil || v.IsError() || !v.IsList() {
		return v
	}
	switch v.Interface().(type) {
	case pyList:
		return v
	}
	rv := v.Val
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Slice || rv.Type().Name() == "tupleValue" {
		return v
	}
	out := make(pyList, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return &exec.Value{Val: reflect.ValueOf(out), Safe: v.Safe}
}

// listFilter wraps a filter so that the lists it returns index as Python's.
func listFilter(f exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		return asPyList(f(e, in, params))
	}
}

// gonjaFilters names gonja's filters (its filter set cannot be listed) so each
// can be wrapped by listFilter.
var gonjaFilters = []string{
	"abs", "attr", "batch", "capitalize", "center", "default", "d", "dictsort", "e", "escape",
	"filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "join",
	"items", "last", "length", "count", "list", "lower", "map", "max", "min", "pprint", "random",
	"rejectattr", "reject", "replace", "reverse", "round", "safe", "selectattr", "select", "slice",
	"sort", "string", "striptags", "sum", "title", "tojson", "trim", "truncate", "unique", "upper",
	"urlencode", "urlize", "wordcount", "wordwrap", "xmlattr",
}
