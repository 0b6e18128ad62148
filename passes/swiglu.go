package passes

import "github.com/minerva-llm/minerva/ir"

func init() {
	register(Pass{
		Name: "fuse-swiglu",
		Doc:  "silu(x·wgᵀ) · (x·wuᵀ) → swiglu(x, concat(wg, wu))",
		Run:  fuseSwiGLU,
	})
}

// fuseSwiGLU rewrites mul(silu(matmul(x, wg)), matmul(x, wu)), in either
// operand order, into swiglu(x, concat(wg, wu)) {norm = 0}. Both matmuls take
// the same x, have no bias, and their weights are constants of one dtype and
// shape; the matmuls and the silu have no other users and are not outputs.
// Anything else (a gate without an up projection, different inputs or
// dtypes, an extra user) is left alone.
func fuseSwiGLU(g *ir.Graph) error {
	users := Users(g)
	outs := fzOutputs(g)
	consts := ir.ConstValues(g)
	only := func(v, user *ir.Value) bool {
		return !outs[v] && len(users[v]) == 1 && users[v][0] == user
	}
	plainMatMul := func(v *ir.Value) bool {
		return v.Op == ir.OpMatMul && len(v.Args) == 2 && consts[v.Args[1]]
	}
	dead := map[*ir.Value]bool{}
	for _, mul := range append([]*ir.Value(nil), g.Values...) {
		if mul.Op != ir.OpMul {
			continue
		}
		for i := 0; i < 2; i++ {
			s, mu := mul.Args[i], mul.Args[1-i]
			if s.Op != ir.OpSiLU || s == mu || !only(s, mul) {
				continue
			}
			mg := s.Args[0]
			if !plainMatMul(mg) || !plainMatMul(mu) || mg == mu || !only(mg, s) || !only(mu, mul) {
				continue
			}
			x, wg, wu := mg.Args[0], mg.Args[1], mu.Args[1]
			if mu.Args[0] != x || !wg.Type.Equal(wu.Type) {
				continue
			}
			w, err := NewValue(ir.OpConcat, nil, wg, wu)
			if err != nil {
				continue
			}
			sw, err := NewValue(ir.OpSwiGLU, ir.Attrs{"norm": 0}, x, w)
			if err != nil || !sw.Type.Equal(mul.Type) {
				continue
			}
			w.ID = nextID(g)
			sw.ID = w.ID + 1
			InsertBefore(g, mul, w, sw)
			ReplaceUses(g, mul, sw)
			dead[mul], dead[s], dead[mg], dead[mu] = true, true, true, true
			break
		}
	}
	Remove(g, dead)
	Finish(g)
	return nil
}
