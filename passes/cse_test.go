package passes

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

// Leaves declared twice cannot be parsed (Verify rejects them), so this graph
// is built by hand: two inputs and two weights of the same name merge, two
// states of the same name do not.
func TestCSEMergesLeavesByName(t *testing.T) {
	row := ir.Type{DType: ir.F32, Shape: ir.S("T", 8)}
	mat := ir.Type{DType: ir.F32, Shape: ir.S(8, 8)}
	cache := ir.Type{DType: ir.F32, Shape: ir.S("C", 8)}
	leaf := func(op ir.Op, name string, t ir.Type) *ir.Value {
		return &ir.Value{Op: op, Attrs: ir.Attrs{"name": name}, Type: t}
	}
	x1, x2 := leaf(ir.OpInput, "x", row), leaf(ir.OpInput, "x", row)
	w1, w2 := leaf(ir.OpWeight, "w", mat), leaf(ir.OpWeight, "w", mat)
	s1, s2 := leaf(ir.OpState, "s", cache), leaf(ir.OpState, "s", cache)
	// A weight named like the input is another value: ops differ.
	wx := leaf(ir.OpWeight, "x", mat)
	m1 := &ir.Value{Op: ir.OpMatMul, Args: []*ir.Value{x1, w1}, Type: row}
	m2 := &ir.Value{Op: ir.OpMatMul, Args: []*ir.Value{x2, w2}, Type: row}
	m3 := &ir.Value{Op: ir.OpMatMul, Args: []*ir.Value{x2, wx}, Type: row}
	g := &ir.Graph{Name: "g", Values: []*ir.Value{x1, x2, w1, w2, s1, s2, wx, m1, m2, m3},
		Outputs: []ir.Output{{Name: "a", Value: m1}, {Name: "b", Value: m2}, {Name: "c", Value: m3}, {Name: "s", Value: s2}}}
	g.Renumber()
	require.NoError(t, cse(g))
	require.Equal(t, []*ir.Value{x1, w1, s1, s2, wx, m1, m3}, g.Values)
	require.Equal(t, []*ir.Value{x1, wx}, m3.Args)
	require.Same(t, m1, g.Output("b"))
	require.Same(t, s2, g.Output("s"))
}

// Attributes are compared with their Go types: an int and a float of the
// same number are different attributes, as they print differently.
func TestCSEKeyDistinguishesAttrKinds(t *testing.T) {
	x := &ir.Value{ID: 0, Op: ir.OpInput, Attrs: ir.Attrs{"name": "x"}}
	index := map[*ir.Value]int{x: 0}
	a := &ir.Value{Op: ir.OpRMSNorm, Args: []*ir.Value{x}, Attrs: ir.Attrs{"eps": int64(1)}}
	b := &ir.Value{Op: ir.OpRMSNorm, Args: []*ir.Value{x}, Attrs: ir.Attrs{"eps": float64(1)}}
	c := &ir.Value{Op: ir.OpRMSNorm, Args: []*ir.Value{x}, Attrs: ir.Attrs{"eps": float64(1)}}
	require.NotEqual(t, cseKey(a, index), cseKey(b, index))
	require.Equal(t, cseKey(b, index), cseKey(c, index))
}
