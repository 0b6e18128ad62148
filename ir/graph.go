// Package ir is Minerva's one intermediate representation: a graph of
// values in topological (SSA) order, each with an op, operands, attributes
// and a type whose shape may hold named symbols. Frontends build it, passes
// rewrite it, backends lower it, and ir/eval gives every op its meaning.
package ir

import (
	"fmt"
)

// Value is one node of the graph: the result of Op applied to Args.
type Value struct {
	ID    int
	Op    Op
	Args  []*Value
	Attrs Attrs
	Type  Type
}

// Name returns the external name of a leaf (input, weight, state), or "".
func (v *Value) Name() string { return v.Attrs.Str("name", "") }

func (v *Value) String() string { return fmt.Sprintf("%%%d", v.ID) }

// Output is a named result of the graph: logits, or the new state of a KV cache.
type Output struct {
	Name  string
	Value *Value
}

// Graph is a list of values in topological order plus the named outputs.
type Graph struct {
	Name    string
	Values  []*Value
	Outputs []Output
	// Attrs hold facts about the whole graph that passes record, such as the
	// memory plan's arena size.
	Attrs Attrs
}

// Graph attribute act_rounding: how a backend that quantizes matmul
// activations should round them, for graphs whose reference engine does not
// round as ggml's quantize_row_q8_0 does. Absent means ggml's way.
const (
	AttrActRounding = "act_rounding"
	// ActRoundingQ8_2 is ik_llama.cpp's Q8_2 recipe (the gpt-oss reference
	// engine): per 32-block d = bf16(amax/127), q = rint(x/d), ties to even.
	ActRoundingQ8_2 = "q8_2"
)

// Lookup returns the leaf value of the given op and name, or nil.
func (g *Graph) Lookup(op Op, name string) *Value {
	for _, v := range g.Values {
		if v.Op == op && v.Name() == name {
			return v
		}
	}
	return nil
}

// Output returns the value of the named output, or nil.
func (g *Graph) Output(name string) *Value {
	for _, o := range g.Outputs {
		if o.Name == name {
			return o.Value
		}
	}
	return nil
}

// Uses counts, for every value, how many operands and outputs refer to it.
func (g *Graph) Uses() map[*Value]int {
	uses := make(map[*Value]int, len(g.Values))
	for _, v := range g.Values {
		for _, a := range v.Args {
			uses[a]++
		}
	}
	for _, o := range g.Outputs {
		uses[o.Value]++
	}
	return uses
}

// Renumber gives values consecutive IDs in list order (after a pass removed or
// inserted values), so printed graphs stay readable and comparable.
func (g *Graph) Renumber() {
	for i, v := range g.Values {
		v.ID = i
	}
}

// Infer computes the type an op would produce from these operands and
// attributes. Leaf ops and reshape have no rule: their type is declared.
func Infer(op Op, args []*Value, attrs Attrs) (Type, error) {
	info, ok := ops[op]
	if !ok {
		return Type{}, fmt.Errorf("unknown op %q", op)
	}
	if len(args) < info.minArgs || len(args) > info.maxArgs {
		if info.minArgs == info.maxArgs {
			return Type{}, fmt.Errorf("%s takes %d operands, got %d", op, info.minArgs, len(args))
		}
		return Type{}, fmt.Errorf("%s takes %d to %d operands, got %d", op, info.minArgs, info.maxArgs, len(args))
	}
	for _, k := range info.attrs {
		if _, ok := attrs[k]; !ok {
			return Type{}, fmt.Errorf("%s needs attribute %q", op, k)
		}
	}
	if info.infer == nil {
		return Type{}, nil
	}
	return info.infer(args, attrs)
}

// Verify checks the structural invariants every pass must preserve: known
// ops, operands defined before use, operand counts and required attributes,
// recorded types equal to the inferred ones, unique IDs and leaf names, and
// outputs that refer to values of this graph.
func Verify(g *Graph) error {
	seen := make(map[*Value]bool, len(g.Values))
	ids := make(map[int]bool, len(g.Values))
	leafNames := make(map[string]bool)
	for i, v := range g.Values {
		if v == nil {
			return fmt.Errorf("value #%d is nil", i)
		}
		if ids[v.ID] {
			return fmt.Errorf("%v: duplicate value id", v)
		}
		ids[v.ID] = true
		if !v.Type.DType.Known() {
			return fmt.Errorf("%v (%s): unknown dtype %d", v, v.Op, uint32(v.Type.DType))
		}
		for _, d := range v.Type.Shape {
			if d.Sym == "" && d.N < 0 {
				return fmt.Errorf("%v (%s): negative dimension %d", v, v.Op, d.N)
			}
			if d.Sym != "" && !isIdent(d.Sym) {
				return fmt.Errorf("%v (%s): symbol %q is not an identifier", v, v.Op, d.Sym)
			}
		}
		for _, a := range v.Args {
			if a == nil || !seen[a] {
				return fmt.Errorf("%v (%s): operand is not defined before use", v, v.Op)
			}
		}
		want, err := Infer(v.Op, v.Args, v.Attrs)
		if err != nil {
			return fmt.Errorf("%v (%s): %w", v, v.Op, err)
		}
		switch {
		case v.Op.IsLeaf():
			key := string(v.Op) + ":" + v.Name()
			if v.Name() == "" {
				return fmt.Errorf("%v (%s): empty name", v, v.Op)
			}
			if leafNames[key] {
				return fmt.Errorf("%v: %s %q declared twice", v, v.Op, v.Name())
			}
			leafNames[key] = true
		case v.Op == OpReshape:
			if err := checkReshape(v.Args[0].Type, v.Type); err != nil {
				return fmt.Errorf("%v (reshape): %w", v, err)
			}
		default:
			if !want.Equal(v.Type) {
				return fmt.Errorf("%v (%s): type is %s, operands give %s", v, v.Op, v.Type, want)
			}
		}
		seen[v] = true
	}
	names := make(map[string]bool, len(g.Outputs))
	for _, o := range g.Outputs {
		if names[o.Name] {
			return fmt.Errorf("output %q listed twice", o.Name)
		}
		names[o.Name] = true
		if o.Value == nil || !seen[o.Value] {
			return fmt.Errorf("output %q refers to a value outside the graph", o.Name)
		}
	}
	return nil
}

// checkReshape accepts a reshape when the dtype is kept and the element counts
// agree: exactly for constant shapes, and for symbolic shapes when both sides
// hold the same symbols and the same constant product.
func checkReshape(from, to Type) error {
	if from.DType != to.DType {
		return fmt.Errorf("changes dtype from %s to %s", from.DType, to.DType)
	}
	count := func(s Shape) (int64, map[string]int) {
		n, syms := int64(1), map[string]int{}
		for _, d := range s {
			if d.Sym != "" {
				syms[d.Sym]++
			} else {
				n *= d.N
			}
		}
		return n, syms
	}
	n1, s1 := count(from.Shape)
	n2, s2 := count(to.Shape)
	if n1 != n2 || len(s1) != len(s2) {
		return fmt.Errorf("%s and %s hold different element counts", from.Shape, to.Shape)
	}
	for k, c := range s1 {
		if s2[k] != c {
			return fmt.Errorf("%s and %s hold different element counts", from.Shape, to.Shape)
		}
	}
	return nil
}
