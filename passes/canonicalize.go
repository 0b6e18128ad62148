package passes

import "github.com/minerva-llm/minerva/ir"

// canonicalize puts a graph in the normal form later passes rely on:
//
//   - add and mul whose operands have the same type take them in definition
//     order (the value defined earlier first), so that CSE sees add(a, b) and
//     add(b, a) as one value. The exception: an add keeps a matmul-family
//     result (matmul, fused_matmul) as its second operand, the shape
//     fuse-residual looks for (add(residual, matmul)); when both operands are
//     matmul-family results, definition order decides.
//   - reshape(reshape(x)) becomes one reshape of x.
//   - a reshape to its operand's own type is dropped.
//
// Operands of different types are never swapped: add and mul broadcast the
// second operand over the first, and the first must be f32. Both swaps are
// exact (IEEE addition and multiplication commute), and a reshape only
// reinterprets the same elements in the same order.
func canonicalize(g *ir.Graph) error {
	index := make(map[*ir.Value]int, len(g.Values))
	for i, v := range g.Values {
		index[v] = i
	}
	changed := false
	bypassed := map[*ir.Value]bool{} // inner reshapes of folded chains
	dead := map[*ir.Value]bool{}
	for _, v := range g.Values {
		switch v.Op {
		case ir.OpAdd, ir.OpMul:
			a, b := v.Args[0], v.Args[1]
			if a == b || !a.Type.Equal(b.Type) {
				continue
			}
			swap := index[b] < index[a]
			if v.Op == ir.OpAdd && isMatMulFamily(a) != isMatMulFamily(b) {
				swap = isMatMulFamily(a)
			}
			if swap {
				v.Args[0], v.Args[1] = b, a
				changed = true
			}
		case ir.OpReshape:
			if in := v.Args[0]; in.Op == ir.OpReshape {
				// Values are visited in order, so in's own operand is no
				// longer a reshape: one step folds a whole chain.
				v.Args[0] = in.Args[0]
				bypassed[in] = true
				changed = true
			}
			if in := v.Args[0]; in.Type.Equal(v.Type) {
				ReplaceUses(g, v, in)
				dead[v] = true
				changed = true
			}
		}
	}
	if !changed {
		return nil
	}
	// A bypassed reshape that nothing uses any more was only the inner half
	// of a chain; one still used elsewhere (or an output) stays.
	uses := g.Uses()
	for v := range bypassed {
		if uses[v] == 0 {
			dead[v] = true
		}
	}
	Remove(g, dead)
	Finish(g)
	return nil
}

// isMatMulFamily reports whether v is the result of a matmul whose epilogue a
// residual add can join.
func isMatMulFamily(v *ir.Value) bool { return v.Op == ir.OpMatMul || v.Op == ir.OpFusedMatMul }

func init() {
	register(Pass{
		Name: "canonicalize",
		Doc:  "order add/mul operands (earlier value first, a matmul result second in add), fold reshape chains, drop identity reshapes",
		Run:  canonicalize,
	})
}
