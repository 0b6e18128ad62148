package ir

// Mixture-of-experts ops. The router and the expert block are two ops, so a
// pass or a backend sees the routing decision as an ordinary value: the dense
// per-token expert weights, zero for every expert a token does not use.
const (
	// topk_softmax(logits f32[T, E]) {k} → f32[T, E]: per row, the k largest
	// logits (on equal logits the lower expert index wins) get the softmax
	// taken over those k logits alone; the other E−k entries are 0. This is
	// a router's selection and weighting (gpt-oss, Mixtral: top-k, then
	// softmax over the chosen k). The logits themselves come from an
	// ordinary matmul (with bias), so the router matmul fuses like any other.
	OpTopKSoftmax Op = "topk_softmax"
	// moe(x f32[T, D], route f32[T, E], gate w[E, F, D], up w[E, F, D],
	//     down w[E, D, F] [, gate_bias f[E, F], up_bias f[E, F], down_bias f[E, D]])
	//     {act [, alpha, limit]} → f32[T, D]:
	//   out[t] = Σ over e with route[t, e] ≠ 0 of
	//            route[t, e] · (down_e · act(gate_e·x[t] + bg_e, up_e·x[t] + bu_e) + bd_e)
	// Experts whose route weight is 0 are not computed: a kernel reads only
	// the selected experts' weights. The biases come all three or none.
	// act "silu":       silu(g)·u
	// act "swiglu_oai": g' = min(g, limit), u' = clamp(u, −limit, limit),
	//                   g'·σ(alpha·g')·(u' + 1)   (gpt-oss: alpha 1.702, limit 7)
	// Weights are 3-D, expert-major (a GGUF ne [D, F, E] tensor is [E, F, D]).
	OpMoE Op = "moe"
)

// MoE activations (the act attribute of moe).
const (
	MoEActSiLU      = "silu"
	MoEActSwiGLUOAI = "swiglu_oai"
)

func init() {
	ops[OpTopKSoftmax] = opInfo{1, 1, []string{"k"}, inferTopKSoftmax}
	ops[OpMoE] = opInfo{5, 8, []string{"act"}, inferMoE}
}

func inferTopKSoftmax(args []*Value, a Attrs) (Type, error) {
	x := args[0]
	if err := wantFloat("topk_softmax input", x); err != nil {
		return Type{}, err
	}
	if len(x.Type.Shape) == 0 {
		return Type{}, errf("topk_softmax input is a scalar")
	}
	e := x.Type.Shape.Last()
	k := a.Int("k", 0)
	if k <= 0 || (e.IsConst() && k > e.N) {
		return Type{}, errf("topk_softmax needs 0 < k ≤ %s experts, got k=%d", e, k)
	}
	return x.Type, nil
}

func inferMoE(args []*Value, a Attrs) (Type, error) {
	if len(args) != 5 && len(args) != 8 {
		return Type{}, errf("moe takes 5 operands, or 8 with the three biases, got %d", len(args))
	}
	x, route, gate, up, down := args[0], args[1], args[2], args[3], args[4]
	if err := wantFloat("moe input", x); err != nil {
		return Type{}, err
	}
	if err := wantFloat("moe route weights", route); err != nil {
		return Type{}, err
	}
	if len(x.Type.Shape) != 2 || len(route.Type.Shape) != 2 || x.Type.Shape[0] != route.Type.Shape[0] {
		return Type{}, errf("moe wants x[T, D] and route[T, E], got %s and %s", x.Type, route.Type)
	}
	d, e := x.Type.Shape[1], route.Type.Shape[1]
	if len(gate.Type.Shape) != 3 {
		return Type{}, errf("moe gate weights must be [E, F, D], got %s", gate.Type)
	}
	f := gate.Type.Shape[1]
	for _, w := range []struct {
		what string
		v    *Value
		want Shape
	}{{"gate", gate, Shape{e, f, d}}, {"up", up, Shape{e, f, d}}, {"down", down, Shape{e, d, f}}} {
		if !w.v.Type.Shape.Equal(w.want) {
			return Type{}, errf("moe %s weights must be %s, got %s", w.what, w.want, w.v.Type)
		}
	}
	if len(args) == 8 {
		for i, want := range []Shape{{e, f}, {e, f}, {e, d}} {
			b := args[5+i]
			if !b.Type.Shape.Equal(want) || !b.Type.DType.IsFloat() {
				return Type{}, errf("moe %s bias must be float%s, got %s", []string{"gate", "up", "down"}[i], want, b.Type)
			}
		}
	}
	switch act := a.Str("act", ""); act {
	case MoEActSiLU:
	case MoEActSwiGLUOAI:
		if _, ok := a["alpha"]; !ok {
			return Type{}, errf("moe act %s needs attribute alpha", act)
		}
		if l := a.Float("limit", -1); l <= 0 {
			return Type{}, errf("moe act %s needs a positive attribute limit, got %v", act, a["limit"])
		}
	default:
		return Type{}, errf("moe act %q is not %s or %s", act, MoEActSiLU, MoEActSwiGLUOAI)
	}
	return Type{F32, Shape{x.Type.Shape[0], d}}, nil
}

// TopKSoftmax adds a router selection: the softmax over each row's k
// largest logits, zero elsewhere.
func (b *Builder) TopKSoftmax(logits *Value, k int) *Value {
	return b.Add(OpTopKSoftmax, Attrs{"k": k}, nil, logits)
}

// MoEWeights are the expert tensors of one moe; the biases are all set or
// all nil.
type MoEWeights struct {
	Gate, Up, Down             *Value
	GateBias, UpBias, DownBias *Value
}

// MoE adds a mixture-of-experts block over the route weights of
// TopKSoftmax. attrs holds act (and alpha, limit for swiglu_oai).
func (b *Builder) MoE(x, route *Value, w MoEWeights, attrs Attrs) *Value {
	args := []*Value{x, route, w.Gate, w.Up, w.Down}
	if w.GateBias != nil || w.UpBias != nil || w.DownBias != nil {
		args = append(args, w.GateBias, w.UpBias, w.DownBias)
	}
	return b.Add(OpMoE, attrs, nil, args...)
}
