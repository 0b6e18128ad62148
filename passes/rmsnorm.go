package passes

import "github.com/minerva-llm/minerva/ir"

func init() {
	register(Pass{
		Name: "fuse-rmsnorm",
		Doc:  "rmsnorm feeding only matmul-family inputs → their norm prologue (f32 gains folded into the weights)",
		Run:  fuseRMSNorm,
	})
}

// fuseRMSNorm moves every rmsnorm n = rmsnorm(x [, gain]) {eps} whose users
// all take n as their input x (matmul, or fused_matmul / swiglu / qkv_rope
// without a norm), and which is not an output, into those users: each takes
// x with norm = 1 and n's eps; a plain matmul becomes fused_matmul. A gain is
// folded into an f32 constant weight as w' = mul(w, gain), a constant value
// computed at load (the original w stays for any other user); for other
// weight dtypes, where folding would change the stored values, the gain
// becomes the user's gain operand (gain = 1).
//
// A norm with any other user (an add, a matmul that takes it as its weight,
// an output) is left alone.
func fuseRMSNorm(g *ir.Graph) error {
	for fuseRMSNormOnce(g) {
	}
	Finish(g)
	return nil
}

// rmsFusableUser reports whether u is a matmul-family op without a norm that
// takes n as its input x and nowhere else.
func rmsFusableUser(u, n *ir.Value) bool {
	switch u.Op {
	case ir.OpMatMul:
	case ir.OpFusedMatMul, ir.OpSwiGLU, ir.OpQKVRoPE:
		if p, err := ir.MatMulParts(u); err != nil || p.Norm || p.Gain != nil {
			return false
		}
	default:
		return false
	}
	if u.Args[0] != n {
		return false
	}
	for _, a := range u.Args[1:] {
		if a == n {
			return false
		}
	}
	return true
}

// rmsReplacement is the new form of one user: an optional folded weight and
// the fused op.
type rmsReplacement struct {
	old, weight, fused *ir.Value
}

// fuseRMSNormOnce fuses the first norm that qualifies and reports whether it
// did.
func fuseRMSNormOnce(g *ir.Graph) bool {
	users := Users(g)
	outs := fzOutputs(g)
	var consts map[*ir.Value]bool
	for _, n := range g.Values {
		if n.Op != ir.OpRMSNorm || outs[n] || len(users[n]) == 0 {
			continue
		}
		ok := true
		for _, u := range users[n] {
			ok = ok && rmsFusableUser(u, n)
		}
		if !ok {
			continue
		}
		if consts == nil {
			consts = ir.ConstValues(g)
		}
		reps, ok := rmsReplacements(n, users[n], consts)
		if !ok {
			continue
		}
		id := nextID(g)
		dead := map[*ir.Value]bool{n: true}
		for _, r := range reps {
			if r.weight != nil {
				r.weight.ID = id
				id++
				InsertBefore(g, r.old, r.weight)
			}
			r.fused.ID = id
			id++
			InsertBefore(g, r.old, r.fused)
			ReplaceUses(g, r.old, r.fused)
			dead[r.old] = true
		}
		Remove(g, dead)
		return true
	}
	return false
}

// rmsReplacements builds the fused form of every user of n, or reports false
// if one cannot be built.
func rmsReplacements(n *ir.Value, us []*ir.Value, consts map[*ir.Value]bool) ([]rmsReplacement, bool) {
	x := n.Args[0]
	var gain *ir.Value
	if len(n.Args) == 2 {
		gain = n.Args[1]
	}
	var reps []rmsReplacement
	for _, u := range us {
		var p ir.Parts
		attrs := ir.Attrs{}
		op := u.Op
		if u.Op == ir.OpMatMul {
			op = ir.OpFusedMatMul
			p = ir.Parts{X: u.Args[0], W: u.Args[1]}
			if len(u.Args) == 3 {
				p.Bias = u.Args[2]
				attrs["bias"] = int64(1)
			}
		} else {
			var err error
			if p, err = ir.MatMulParts(u); err != nil {
				return nil, false
			}
			if attrs, err = u.Attrs.Clone(); err != nil {
				return nil, false
			}
			if attrs == nil { // a frontend's swiglu without flags
				attrs = ir.Attrs{}
			}
		}
		attrs["norm"] = int64(1)
		attrs["eps"] = n.Attrs.Float("eps", 0)
		delete(attrs, "gain")
		r := rmsReplacement{old: u}
		w := p.W
		var gainArg *ir.Value
		if gain != nil {
			if w.Type.DType == ir.F32 && consts[w] && consts[gain] {
				fw, err := NewValue(ir.OpMul, nil, w, gain)
				if err != nil {
					return nil, false
				}
				r.weight, w = fw, fw
			} else {
				gainArg = gain
				attrs["gain"] = int64(1)
			}
		}
		p.X, p.W, p.Gain = x, w, gainArg
		fused, err := NewValue(op, attrs, p.Operands()...)
		if err != nil || !fused.Type.Equal(u.Type) {
			return nil, false
		}
		r.fused = fused
		reps = append(reps, r)
	}
	return reps, true
}
