package ir

import (
	"fmt"
	"strconv"
	"strings"
)

// Dim is one dimension of a shape: either a constant size or a named symbol
// bound by the runtime per step. The symbols in use are:
//
//	T  tokens in this step      (prefill: the prompt length; decode: 1)
//	P  positions already in the KV cache before this step
//	C  context length: rows of the KV cache (bound once per session)
//
// One graph serves prefill and decode because only the bindings change.
type Dim struct {
	Sym string // non-empty for a symbolic dimension
	N   int64  // the size when Sym is empty
}

// D returns a constant dimension.
func D(n int64) Dim { return Dim{N: n} }

// Sym returns a symbolic dimension.
func Sym(name string) Dim { return Dim{Sym: name} }

// IsConst reports whether the dimension has a fixed size.
func (d Dim) IsConst() bool { return d.Sym == "" }

func (d Dim) String() string {
	if d.Sym != "" {
		return d.Sym
	}
	return strconv.FormatInt(d.N, 10)
}

// Shape is a row-major list of dimensions: the last one varies fastest.
// A weight with GGUF dims ne=[K, N] has IR shape [N, K].
type Shape []Dim

// S builds a shape from ints (constants) and strings (symbols).
func S(dims ...any) Shape {
	s := make(Shape, len(dims))
	for i, d := range dims {
		switch d := d.(type) {
		case int:
			s[i] = D(int64(d))
		case int64:
			s[i] = D(d)
		case string:
			s[i] = Sym(d)
		case Dim:
			s[i] = d
		default:
			panic(fmt.Sprintf("ir.S: unsupported dimension %T", d))
		}
	}
	return s
}

// Equal reports whether two shapes have the same dims, symbols included.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// Last returns the innermost dimension (the zero Dim for a scalar).
func (s Shape) Last() Dim {
	if len(s) == 0 {
		return Dim{}
	}
	return s[len(s)-1]
}

// Bind resolves every symbol through env and returns the concrete sizes.
func (s Shape) Bind(env map[string]int64) ([]int64, error) {
	out := make([]int64, len(s))
	for i, d := range s {
		if d.Sym == "" {
			out[i] = d.N
			continue
		}
		v, ok := env[d.Sym]
		if !ok {
			return nil, fmt.Errorf("symbol %s is not bound", d.Sym)
		}
		out[i] = v
	}
	return out, nil
}

func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Type is a value's element type and shape.
type Type struct {
	DType DType
	Shape Shape
}

func (t Type) String() string { return t.DType.String() + t.Shape.String() }

// Equal reports whether two types are identical.
func (t Type) Equal(o Type) bool { return t.DType == o.DType && t.Shape.Equal(o.Shape) }
