package ir

import "fmt"

// Fused ops are ordinary ops that passes introduce. Each still has a
// reference meaning (implemented by ir/eval), so a fused graph can be run and
// compared with the unfused one. The matmul family shares one shape:
//
//	prologue  optional RMSNorm of the input rows     attrs norm=1, eps, gain=0|1
//	body      one matmul against a (possibly merged) weight
//	epilogue  what happens to the product            depends on the op
//
// Optional operands follow the fixed ones in a fixed order, and attribute
// flags say which are present, so a kernel template can be chosen from the
// attributes alone.
const (
	// fused_matmul(x, w [, gain] [, bias] [, residual]) {norm, eps, gain, bias, residual}
	//   = norm?(x)·wᵀ (+ bias) (+ residual)
	OpFusedMatMul Op = "fused_matmul"
	// swiglu(x, w[2F, K] [, gain]) {norm, eps, gain} → f32[..., F]:
	//   h = norm?(x)·wᵀ; silu(h[:, :F]) · h[:, F:]   (w = gate rows, then up rows)
	OpSwiGLU Op = "swiglu"
	// qkv_rope(x, w[(H+2·Hkv)·Dh, K], pos, kcache, vcache [, gain] [, bias] [, qnorm, knorm])
	//   {n_head, n_kv_head, head_dim, rope attrs…, norm, eps, gain, bias, qk_norm, qk_eps} → f32[T, H·Dh]:
	//   h = norm?(x)·wᵀ (+ bias); q, k, v = the three column blocks of h;
	//   with qk_norm, every head of q and of k is RMS-normalised (qk_eps) and
	//   multiplied by qnorm or knorm [Dh] (Qwen3) before the rotation;
	//   writes rope(k) and v into row pos[i] of the caches; returns rope(q).
	// Like kvwrite it writes state: ops that read the caches must depend on its
	// result (attention takes q from it), which orders them after the write.
	OpQKVRoPE Op = "qkv_rope"
	// flash_attention: attention (same operands, attributes and meaning)
	// computed tile by tile with an online softmax; tile_q, tile_kv and
	// kv_splits (partial results over KV ranges, merged at the end) are attrs.
	OpFlashAttention Op = "flash_attention"
	// concat(a[N1, ...], b[N2, ...], ...) stacks rows; dtypes and trailing dims
	// agree. On weights it is folded at load time (merged projections).
	OpConcat Op = "concat"
)

func init() {
	ops[OpFusedMatMul] = opInfo{2, 5, nil, inferFusedMatMul}
	ops[OpSwiGLU] = opInfo{2, 3, nil, inferSwiGLU}
	ops[OpQKVRoPE] = opInfo{5, 9, []string{"n_head", "n_kv_head", "head_dim", "n_rot", "base"}, inferQKVRoPE}
	ops[OpFlashAttention] = opInfo{4, 5, []string{"n_head", "n_kv_head", "head_dim", "scale", "tile_q", "tile_kv", "kv_splits"}, inferFlashAttention}
	ops[OpConcat] = opInfo{1, 64, nil, inferConcat}
}

// Parts names the operands of a matmul-family op; absent ones are nil.
type Parts struct {
	X, W     *Value
	Pos      *Value // qkv_rope
	KCache   *Value // qkv_rope
	VCache   *Value // qkv_rope
	Gain     *Value
	Bias     *Value
	Residual *Value // fused_matmul
	QNorm    *Value // qkv_rope with qk_norm: the per-head gains of q and k
	KNorm    *Value
	Norm     bool
	Eps      float64
	QKEps    float64 // qkv_rope with qk_norm
}

// MatMulParts decodes the operands of fused_matmul, swiglu or qkv_rope from
// the attribute flags, checking that the operand count agrees with them.
func MatMulParts(v *Value) (Parts, error) {
	return partsOf(v.Op, v.Args, v.Attrs)
}

func partsOf(op Op, args []*Value, a Attrs) (Parts, error) {
	p := Parts{Norm: a.Int("norm", 0) == 1, Eps: a.Float("eps", 0), QKEps: a.Float("qk_eps", 0)}
	fixed := 2
	if op == OpQKVRoPE {
		fixed = 5
	}
	want := fixed
	flags := []string{"gain", "bias", "residual"}
	allowed := map[Op][]string{OpFusedMatMul: flags, OpSwiGLU: flags[:1], OpQKVRoPE: flags[:2]}[op]
	for _, f := range flags {
		switch a.Int(f, 0) {
		case 0:
		case 1:
			if !contains(allowed, f) {
				return p, fmt.Errorf("%s has no %s operand", op, f)
			}
			want++
		default:
			return p, fmt.Errorf("flag %s must be 0 or 1, got %d", f, a.Int(f, 0))
		}
	}
	if n := a.Int("norm", 0); n != 0 && n != 1 {
		return p, fmt.Errorf("flag norm must be 0 or 1, got %d", n)
	}
	switch n := a.Int("qk_norm", 0); {
	case n == 1 && op != OpQKVRoPE:
		return p, fmt.Errorf("%s has no qk_norm operands", op)
	case n == 1:
		if _, ok := a["qk_eps"]; !ok {
			return p, fmt.Errorf("qk_norm = 1 needs attribute qk_eps")
		}
		want += 2
	case n != 0:
		return p, fmt.Errorf("flag qk_norm must be 0 or 1, got %d", n)
	}
	if len(args) != want {
		return p, fmt.Errorf("%s with these flags takes %d operands, got %d", op, want, len(args))
	}
	if a.Int("gain", 0) == 1 && !p.Norm {
		return p, fmt.Errorf("a gain operand needs norm = 1")
	}
	if p.Norm {
		if _, ok := a["eps"]; !ok {
			return p, fmt.Errorf("norm = 1 needs attribute eps")
		}
	}
	p.X, p.W = args[0], args[1]
	i := 2
	if op == OpQKVRoPE {
		p.Pos, p.KCache, p.VCache = args[2], args[3], args[4]
		i = 5
	}
	next := func(flag string) *Value {
		if a.Int(flag, 0) == 1 {
			i++
			return args[i-1]
		}
		return nil
	}
	p.Gain, p.Bias, p.Residual = next("gain"), next("bias"), next("residual")
	if a.Int("qk_norm", 0) == 1 {
		p.QNorm, p.KNorm = args[i], args[i+1]
	}
	return p, nil
}

// Operands lists p's operands in the order partsOf reads them: x, w, the
// qkv_rope positions and caches, then the optional ones (gain, bias,
// residual, the qk_norm gains) that are present.
func (p Parts) Operands() []*Value {
	args := []*Value{p.X, p.W}
	if p.Pos != nil {
		args = append(args, p.Pos, p.KCache, p.VCache)
	}
	for _, a := range []*Value{p.Gain, p.Bias, p.Residual, p.QNorm, p.KNorm} {
		if a != nil {
			args = append(args, a)
		}
	}
	return args
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkBody checks the shared prologue and matmul body and returns N, the
// weight's row count.
func checkBody(p Parts) (Dim, error) {
	if err := wantFloat("input", p.X); err != nil {
		return Dim{}, err
	}
	if len(p.X.Type.Shape) == 0 || len(p.W.Type.Shape) != 2 {
		return Dim{}, errf("wants x[..., K] and w[N, K], got %s and %s", p.X.Type, p.W.Type)
	}
	k := p.X.Type.Shape.Last()
	if k != p.W.Type.Shape[1] {
		return Dim{}, errf("inner dims differ: x %s, w %s", p.X.Type, p.W.Type)
	}
	if p.Gain != nil && (len(p.Gain.Type.Shape) != 1 || p.Gain.Type.Shape[0] != k || !p.Gain.Type.DType.IsFloat()) {
		return Dim{}, errf("gain must be float[%s], got %s", k, p.Gain.Type)
	}
	n := p.W.Type.Shape[0]
	if p.Bias != nil && (len(p.Bias.Type.Shape) != 1 || p.Bias.Type.Shape[0] != n || !p.Bias.Type.DType.IsFloat()) {
		return Dim{}, errf("bias must be float[%s], got %s", n, p.Bias.Type)
	}
	return n, nil
}

func rowsOf(x *Value, n Dim) Shape {
	out := append(Shape{}, x.Type.Shape[:len(x.Type.Shape)-1]...)
	return append(out, n)
}

func inferFusedMatMul(args []*Value, a Attrs) (Type, error) {
	p, err := partsOf(OpFusedMatMul, args, a)
	if err != nil {
		return Type{}, err
	}
	n, err := checkBody(p)
	if err != nil {
		return Type{}, err
	}
	t := Type{F32, rowsOf(p.X, n)}
	if p.Residual != nil && !p.Residual.Type.Equal(t) {
		return Type{}, errf("residual must be %s, got %s", t, p.Residual.Type)
	}
	return t, nil
}

func inferSwiGLU(args []*Value, a Attrs) (Type, error) {
	p, err := partsOf(OpSwiGLU, args, a)
	if err != nil {
		return Type{}, err
	}
	n, err := checkBody(p)
	if err != nil {
		return Type{}, err
	}
	if !n.IsConst() || n.N%2 != 0 {
		return Type{}, errf("swiglu weight rows %s must be an even constant (gate rows, then up rows)", n)
	}
	return Type{F32, rowsOf(p.X, D(n.N/2))}, nil
}

func inferQKVRoPE(args []*Value, a Attrs) (Type, error) {
	p, err := partsOf(OpQKVRoPE, args, a)
	if err != nil {
		return Type{}, err
	}
	n, err := checkBody(p)
	if err != nil {
		return Type{}, err
	}
	nh, nkv, hd := a.Int("n_head", 0), a.Int("n_kv_head", 0), a.Int("head_dim", 0)
	if nh <= 0 || nkv <= 0 || hd <= 0 || nh%nkv != 0 {
		return Type{}, errf("needs n_head a positive multiple of n_kv_head and head_dim > 0, got %d, %d, %d", nh, nkv, hd)
	}
	if n != D((nh+2*nkv)*hd) {
		return Type{}, errf("weight rows %s ≠ (n_head + 2·n_kv_head)·head_dim = %d", n, (nh+2*nkv)*hd)
	}
	if len(p.X.Type.Shape) != 2 {
		return Type{}, errf("input must be [T, K], got %s", p.X.Type)
	}
	for _, g := range []*Value{p.QNorm, p.KNorm} {
		if g != nil && (len(g.Type.Shape) != 1 || g.Type.Shape[0] != D(hd) || !g.Type.DType.IsFloat()) {
			return Type{}, errf("qk_norm gains must be float[%d], got %s", hd, g.Type)
		}
	}
	// The rope and kvwrite rules apply to the q/k/v blocks.
	q := &Value{Type: Type{F32, Shape{p.X.Type.Shape[0], D(nh * hd)}}}
	if _, err := inferRoPE([]*Value{q, p.Pos}, a); err != nil {
		return Type{}, err
	}
	kv := &Value{Type: Type{F32, Shape{p.X.Type.Shape[0], D(nkv * hd)}}}
	for _, c := range []*Value{p.KCache, p.VCache} {
		if _, err := inferKVWrite([]*Value{c, kv, p.Pos}, nil); err != nil {
			return Type{}, err
		}
	}
	return q.Type, nil
}

func inferFlashAttention(args []*Value, a Attrs) (Type, error) {
	for _, k := range []string{"tile_q", "tile_kv", "kv_splits"} {
		if a.Int(k, 0) <= 0 {
			return Type{}, errf("%s must be a positive integer, got %v", k, a[k])
		}
	}
	return inferAttention(args, a)
}

func inferConcat(args []*Value, _ Attrs) (Type, error) {
	first := args[0].Type
	if len(first.Shape) == 0 {
		return Type{}, errf("concat of a scalar")
	}
	rows := int64(0)
	for i, a := range args {
		t := a.Type
		if t.DType != first.DType || len(t.Shape) != len(first.Shape) || !t.Shape[1:].Equal(first.Shape[1:]) {
			return Type{}, errf("operand %d is %s, not stackable on %s", i, t, first)
		}
		if !t.Shape[0].IsConst() {
			return Type{}, errf("operand %d has symbolic rows %s", i, t.Shape[0])
		}
		rows += t.Shape[0].N
	}
	return Type{first.DType, append(Shape{D(rows)}, first.Shape[1:]...)}, nil
}

// ConstValues returns the values that depend only on weights: merged or
// rescaled weights, computed once at load rather than per step.
func ConstValues(g *Graph) map[*Value]bool {
	c := make(map[*Value]bool)
	for _, v := range g.Values {
		switch {
		case v.Op == OpWeight:
			c[v] = true
		case v.Op.IsLeaf() || len(v.Args) == 0:
		default:
			all := true
			for _, a := range v.Args {
				all = all && c[a]
			}
			c[v] = all
		}
	}
	return c
}

// stateWrites is the op table's column of in-place writes: the operands an
// op writes into (KV caches, states or earlier writes into them) and the
// operand holding the rows it writes (i32 positions). Passes, the memory
// planner and the runtimes read it here rather than switching on ops.
var stateWrites = map[Op]struct {
	operands []int
	pos      int
}{
	OpKVWrite: {[]int{0}, 2},    // kvwrite(cache, x, pos)
	OpQKVRoPE: {[]int{3, 4}, 2}, // qkv_rope(x, w, pos, kcache, vcache, ...)
}

// WritesState reports whether op writes into a state operand.
func WritesState(op Op) bool { _, ok := stateWrites[op]; return ok }

// WrittenOperands are the operands of v that v writes in place (nil for
// an op that writes none).
func WrittenOperands(v *Value) []*Value {
	w, ok := stateWrites[v.Op]
	if !ok {
		return nil
	}
	out := make([]*Value, 0, len(w.operands))
	for _, i := range w.operands {
		if i < len(v.Args) {
			out = append(out, v.Args[i])
		}
	}
	return out
}

// WritePos is the positions operand of a state-writing op v: the rows it
// writes; nil for other ops.
func WritePos(v *Value) *Value {
	w, ok := stateWrites[v.Op]
	if !ok || w.pos >= len(v.Args) {
		return nil
	}
	return v.Args[w.pos]
}
