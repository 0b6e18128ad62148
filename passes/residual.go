package passes

import (
	"fmt"

	"github.com/minerva-llm/minerva/ir"
)

// fuseResidual moves a residual add into the epilogue of the matmul it adds:
//
//	add(r, m)   m = matmul(x, w [, bias])              → fused_matmul(x, w [, bias], r)
//	add(r, m)   m = fused_matmul(x, w [, gain] [, bias]) → the same with r appended
//
// with residual = 1 and m's other flags (a plain matmul gets norm = 0,
// gain = 0 and bias = 0|1). add(m, r) is accepted too: addition commutes
// exactly. The rewrite fires only when r has exactly m's type (an add that
// broadcasts a bias vector is not a residual), m has no residual yet, and the
// add is m's only use: m is not a graph output and no other op reads it, so
// nothing needs the product without r. When both operands qualify, the
// second one (canonicalize's place for the matmul) takes the first as r.
func fuseResidual(g *ir.Graph) error {
	uses := g.Uses()
	type rewrite struct {
		add, fused, m *ir.Value
	}
	var todo []rewrite
	for _, v := range g.Values {
		if v.Op != ir.OpAdd {
			continue
		}
		for _, mi := range []int{1, 0} {
			m, r := v.Args[mi], v.Args[1-mi]
			if !residualCandidate(m, uses) || !r.Type.Equal(m.Type) || !v.Type.Equal(m.Type) {
				continue
			}
			f, err := withResidual(m, r)
			if err != nil {
				return fmt.Errorf("%v: %w", v, err)
			}
			f.ID = nextID(g) + len(todo)
			todo = append(todo, rewrite{v, f, m})
			break
		}
	}
	if len(todo) == 0 {
		return nil
	}
	// Insert every fused value before redirecting any use: a fused value
	// may take an earlier rewritten add as its input or residual (one
	// layer's residual stream feeds the next), and ReplaceUses only
	// reaches values in the graph.
	for _, t := range todo {
		InsertBefore(g, t.add, t.fused)
	}
	dead := map[*ir.Value]bool{}
	for _, t := range todo {
		ReplaceUses(g, t.add, t.fused)
		dead[t.add], dead[t.m] = true, true
	}
	Remove(g, dead)
	Finish(g)
	return nil
}

// residualCandidate reports whether m is a matmul-family result with no
// residual whose only use is one operand of one add.
func residualCandidate(m *ir.Value, uses map[*ir.Value]int) bool {
	switch m.Op {
	case ir.OpMatMul:
	case ir.OpFusedMatMul:
		p, err := ir.MatMulParts(m)
		if err != nil || p.Residual != nil {
			return false
		}
	default:
		return false
	}
	// Graph outputs count in uses, so 1 means the add alone; add(m, m)
	// counts 2.
	return uses[m] == 1
}

// withResidual builds the fused_matmul computing m + r.
func withResidual(m, r *ir.Value) (*ir.Value, error) {
	var attrs ir.Attrs
	var args []*ir.Value
	switch m.Op {
	case ir.OpMatMul:
		bias := int64(0)
		if len(m.Args) == 3 {
			bias = 1
		}
		attrs = ir.Attrs{"norm": int64(0), "gain": int64(0), "bias": bias, "residual": int64(1)}
		args = append(args, m.Args...)
	case ir.OpFusedMatMul:
		attrs = ir.Attrs{}
		for k, a := range m.Attrs {
			attrs[k] = a
		}
		attrs["residual"] = int64(1)
		args = append(args, m.Args...)
	}
	return NewValue(ir.OpFusedMatMul, attrs, append(args, r)...)
}

func init() {
	register(Pass{
		Name: "fuse-residual",
		Doc:  "add(r, matmul(...)) → fused_matmul with the residual in its epilogue",
		Run:  fuseResidual,
	})
}
