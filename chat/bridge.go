package chat

import (
	"fmt"
	"math/big"
	"reflect"
	"sort"
	"strconv"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// toGonja turns a conversation value into what gonja evaluates: objects become
// gonja's own ordered *exec.Dict (iteration, `in`, `length`, `is mapping` and
// item access all keep the key order with it), lists pyList, integers int.
// A fresh copy is made per render, so nothing a template does reaches the
// caller's Conversation.
func toGonja(v any) any {
	switch x := v.(type) {
	case nil:
		return jsonNull
	case *Object:
		if x == nil {
			return nil
		}
		if x.Len() == 0 {
			// gonja counts every Dict true; an empty Go map is false, as {} is in Python.
			return map[string]any{}
		}
		d := &exec.Dict{Pairs: make([]*exec.Pair, 0, len(x.keys))}
		for _, k := range x.keys {
			d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(k), Value: exec.AsValue(toGonja(x.vals[k]))})
		}
		return d
	case map[string]any: // no order of its own: sorted, so renders are reproducible
		if len(x) == 0 {
			return map[string]any{}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := &exec.Dict{Pairs: make([]*exec.Pair, 0, len(x))}
		for _, k := range keys {
			d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(k), Value: exec.AsValue(toGonja(x[k]))})
		}
		return d
	case []any:
		out := make(pyList, len(x))
		for i, e := range x {
			out[i] = toGonja(e)
		}
		return out
	case []string, map[string]string:
		return toGonja(normalizeValue(x))
	case int64:
		return int(x)
	case int32:
		return int(x)
	case float32:
		return float64(x)
	default:
		return v
	}
}

// jsonNull is a JSON null as templates see it: a typed nil pointer, which
// gonja takes for None everywhere (it is nil, false, prints nothing, `is none`)
// except in the defined test, which this package replaces so that a null
// field is defined, as a Python None is. gonja has a single nil for both None
// and undefined, and gpt-oss prints "// default: null" for a parameter whose
// default is null only because `param_spec.default is defined`.
var jsonNull = (*nullValue)(nil)

type nullValue struct{}

// isDefined is Jinja's defined test: anything but undefined (gonja's nil),
// None from the conversation included.
func isDefined(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	if in.IsError() {
		return false, nil
	}
	if _, ok := in.Interface().(*nullValue); ok {
		return true, nil
	}
	return !in.IsNil(), nil
}

func isUndefined(ctx *exec.Context, in *exec.Value, args *exec.VarArgs) (bool, error) {
	d, err := isDefined(ctx, in, args)
	return !d, err
}

// fromGonja turns a value a template computed back into the JSON model, so
// tojson can write it the way Python would. Objects keep their order; Go maps
// (gonja's namespace()) are sorted.
func fromGonja(v *exec.Value, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("tojson: value nested deeper than %d levels", maxJSONDepth)
	}
	if v == nil || v.IsNil() {
		return nil, nil
	}
	if v.IsError() {
		return nil, fmt.Errorf("%s", v.Error())
	}
	switch x := v.Interface().(type) {
	case *exec.Value:
		return fromGonja(x, depth+1)
	case *exec.Dict:
		return dictFromGonja(x, depth)
	case exec.Dict:
		return dictFromGonja(&x, depth)
	case *big.Int:
		return x, nil
	case *Object:
		return x, nil
	}
	switch {
	case v.IsBool():
		return v.Bool(), nil
	case v.IsInteger():
		return int64(v.Integer()), nil
	case v.IsFloat():
		return v.Float(), nil
	case v.IsString():
		return v.String(), nil
	case v.IsList():
		n := v.Len()
		out := make([]any, 0, n)
		for i := 0; i < n; i++ {
			e, err := fromGonja(v.Index(i), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	case v.IsDict(): // a Go map; Keys sorts them
		obj := NewObject()
		for _, k := range v.Keys() {
			key, err := jsonKey(k)
			if err != nil {
				return nil, err
			}
			item, _ := v.GetItem(k.Interface())
			e, err := fromGonja(item, depth+1)
			if err != nil {
				return nil, err
			}
			obj.Set(key, e)
		}
		return obj, nil
	}
	return nil, fmt.Errorf("tojson: object of type %s is not JSON serializable", reflect.TypeOf(v.Interface()))
}

func dictFromGonja(d *exec.Dict, depth int) (*Object, error) {
	obj := NewObject()
	for _, p := range d.Pairs {
		key, err := jsonKey(p.Key)
		if err != nil {
			return nil, err
		}
		e, err := fromGonja(p.Value, depth+1)
		if err != nil {
			return nil, err
		}
		obj.Set(key, e)
	}
	return obj, nil
}

// jsonKey converts a dict key as json.dumps does: strings as they are, and
// numbers, booleans and None to their JSON spelling.
func jsonKey(k *exec.Value) (string, error) {
	switch {
	case k == nil || k.IsNil():
		return "null", nil
	case k.IsString():
		return k.String(), nil
	case k.IsBool():
		if k.Bool() {
			return "true", nil
		}
		return "false", nil
	case k.IsInteger():
		return strconv.Itoa(k.Integer()), nil
	case k.IsFloat():
		return pyJSONFloat(k.Float()), nil
	}
	return "", fmt.Errorf("tojson: keys must be str, int, float, bool or None, not %T", k.Interface())
}
