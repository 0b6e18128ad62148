package ir

import (
	"fmt"
	"sort"
)

// Op names an operation. The text form uses these names verbatim.
type Op string

// Leaf ops: values that come from outside the graph.
const (
	OpInput  Op = "input"  // per-step input, attr name ("tokens", "pos")
	OpWeight Op = "weight" // model tensor, attr name; dtype and shape are the file's
	OpState  Op = "state"  // buffer that persists across steps (KV cache), attr name
)

// Compute ops. Each has a reference meaning implemented by ir/eval; the
// comments here are the contract every fused kernel is held to.
const (
	// embed(table[V, D], ids i32[T]) → f32[T, D]: rows of table, dequantized.
	OpEmbed Op = "embed"
	// rmsnorm(x[..., D] [, gain[D]]) {eps} → x / sqrt(mean(x²) + eps) · gain.
	OpRMSNorm Op = "rmsnorm"
	// matmul(x[..., K], w[N, K] [, bias[N]]) → f32[..., N] = x·wᵀ (+ bias).
	// w may have any dtype; rows of w are the output features, as in GGUF.
	OpMatMul Op = "matmul"
	// add(a, b), mul(a, b): elementwise; b has a's shape or a's trailing dims.
	OpAdd Op = "add"
	OpMul Op = "mul"
	// silu(x) = x·σ(x); gelu(x) with the tanh approximation.
	OpSiLU Op = "silu"
	OpGELU Op = "gelu"
	// softmax(x) over the last axis.
	OpSoftmax Op = "softmax"
	// rope(x f32[T, H·Dh], pos i32[T]) {head_dim, n_rot, base, freq_scale,
	// mode = "normal"|"neox", and YaRN: ext_factor, attn_factor, beta_fast,
	// beta_slow, orig_ctx} rotates the first n_rot dims of every head.
	OpRoPE Op = "rope"
	// kvwrite(cache[C, W], x f32[T, W], pos i32[T]) → cache with row pos[i]
	// replaced by x[i] (converted to the cache dtype). The result is the same
	// buffer: consumers of the cache must use the kvwrite result, which orders
	// reads after the write.
	OpKVWrite Op = "kvwrite"
	// attention(q f32[T, H·Dh], k[C, Hkv·Dh], v[C, Hkv·Dv], pos i32[T] [, sinks f32[H]])
	// {n_head, n_kv_head, head_dim, scale, window} → f32[T, H·Dv].
	// Query i (at position pos[i]) attends to cache rows j ≤ pos[i] (causal),
	// and with window > 0 only to rows with pos[i] − j < window. Query head h
	// reads kv head h / (H / Hkv) (GQA). A sink adds exp(sink[h]) to the
	// softmax denominator without a value row.
	OpAttention Op = "attention"
	// reshape(x) → the value's own type; element counts must agree.
	OpReshape Op = "reshape"
)

// opInfo is the static description of an op: its arity and its shape rule.
type opInfo struct {
	minArgs, maxArgs int
	// attrs lists the attributes that must be present.
	attrs []string
	// infer computes the result type from the operands and attributes. Leaf
	// ops and reshape carry their type explicitly, so infer is nil for them.
	infer func(args []*Value, a Attrs) (Type, error)
}

var ops = map[Op]opInfo{
	OpInput:     {0, 0, []string{"name"}, nil},
	OpWeight:    {0, 0, []string{"name"}, nil},
	OpState:     {0, 0, []string{"name"}, nil},
	OpEmbed:     {2, 2, nil, inferEmbed},
	OpRMSNorm:   {1, 2, []string{"eps"}, inferRMSNorm},
	OpMatMul:    {2, 3, nil, inferMatMul},
	OpAdd:       {2, 2, nil, inferBinary},
	OpMul:       {2, 2, nil, inferBinary},
	OpSiLU:      {1, 1, nil, inferUnary},
	OpGELU:      {1, 1, nil, inferUnary},
	OpSoftmax:   {1, 1, nil, inferUnary},
	OpRoPE:      {2, 2, []string{"head_dim", "n_rot", "base"}, inferRoPE},
	OpKVWrite:   {3, 3, nil, inferKVWrite},
	OpAttention: {4, 5, []string{"n_head", "n_kv_head", "head_dim", "scale"}, inferAttention},
	OpReshape:   {1, 1, nil, nil},
}

// Known reports whether op is part of the IR.
func (op Op) Known() bool { _, ok := ops[op]; return ok }

// IsLeaf reports whether op takes no operands and names external data.
func (op Op) IsLeaf() bool { return op == OpInput || op == OpWeight || op == OpState }

func errf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func wantFloat(what string, v *Value) error {
	if v.Type.DType != F32 {
		return errf("%s must be f32, got %s", what, v.Type)
	}
	return nil
}

func wantIDs(what string, v *Value, t Dim) error {
	if v.Type.DType != I32 || len(v.Type.Shape) != 1 {
		return errf("%s must be i32[T], got %s", what, v.Type)
	}
	if v.Type.Shape[0] != t {
		return errf("%s has %s rows, want %s", what, v.Type.Shape[0], t)
	}
	return nil
}

func inferEmbed(args []*Value, _ Attrs) (Type, error) {
	table, ids := args[0], args[1]
	if len(table.Type.Shape) != 2 {
		return Type{}, errf("embed table must be 2-D, got %s", table.Type)
	}
	if ids.Type.DType != I32 || len(ids.Type.Shape) != 1 {
		return Type{}, errf("embed ids must be i32[T], got %s", ids.Type)
	}
	return Type{F32, Shape{ids.Type.Shape[0], table.Type.Shape[1]}}, nil
}

func inferRMSNorm(args []*Value, _ Attrs) (Type, error) {
	x := args[0]
	if err := wantFloat("rmsnorm input", x); err != nil {
		return Type{}, err
	}
	if len(x.Type.Shape) == 0 {
		return Type{}, errf("rmsnorm input is a scalar")
	}
	if len(args) == 2 {
		g := args[1]
		if len(g.Type.Shape) != 1 || g.Type.Shape[0] != x.Type.Shape.Last() || !g.Type.DType.IsFloat() {
			return Type{}, errf("rmsnorm gain must be float[%s], got %s", x.Type.Shape.Last(), g.Type)
		}
	}
	return x.Type, nil
}

func inferMatMul(args []*Value, _ Attrs) (Type, error) {
	x, w := args[0], args[1]
	if err := wantFloat("matmul input", x); err != nil {
		return Type{}, err
	}
	if len(x.Type.Shape) == 0 || len(w.Type.Shape) != 2 {
		return Type{}, errf("matmul wants x[..., K] and w[N, K], got %s and %s", x.Type, w.Type)
	}
	if x.Type.Shape.Last() != w.Type.Shape[1] {
		return Type{}, errf("matmul inner dims differ: x %s, w %s", x.Type, w.Type)
	}
	if len(args) == 3 {
		b := args[2]
		if len(b.Type.Shape) != 1 || b.Type.Shape[0] != w.Type.Shape[0] || !b.Type.DType.IsFloat() {
			return Type{}, errf("matmul bias must be float[%s], got %s", w.Type.Shape[0], b.Type)
		}
	}
	out := append(Shape{}, x.Type.Shape[:len(x.Type.Shape)-1]...)
	return Type{F32, append(out, w.Type.Shape[0])}, nil
}

func inferBinary(args []*Value, _ Attrs) (Type, error) {
	a, b := args[0], args[1]
	if err := wantFloat("left operand", a); err != nil {
		return Type{}, err
	}
	if !b.Type.DType.IsFloat() {
		return Type{}, errf("right operand must be float, got %s", b.Type)
	}
	as, bs := a.Type.Shape, b.Type.Shape
	if len(bs) > len(as) || !as[len(as)-len(bs):].Equal(bs) {
		return Type{}, errf("shapes %s and %s do not broadcast", as, bs)
	}
	return a.Type, nil
}

func inferUnary(args []*Value, _ Attrs) (Type, error) {
	if err := wantFloat("operand", args[0]); err != nil {
		return Type{}, err
	}
	return args[0].Type, nil
}

func inferRoPE(args []*Value, a Attrs) (Type, error) {
	x, pos := args[0], args[1]
	if err := wantFloat("rope input", x); err != nil {
		return Type{}, err
	}
	if len(x.Type.Shape) != 2 {
		return Type{}, errf("rope input must be [T, H·Dh], got %s", x.Type)
	}
	if err := wantIDs("rope positions", pos, x.Type.Shape[0]); err != nil {
		return Type{}, err
	}
	hd, nrot := a.Int("head_dim", 0), a.Int("n_rot", 0)
	if hd <= 0 || nrot <= 0 || nrot > hd || nrot%2 != 0 {
		return Type{}, errf("rope needs 0 < n_rot ≤ head_dim with n_rot even, got n_rot=%d head_dim=%d", nrot, hd)
	}
	if w := x.Type.Shape[1]; w.IsConst() && w.N%hd != 0 {
		return Type{}, errf("rope row width %d is not a multiple of head_dim %d", w.N, hd)
	}
	if m := a.Str("mode", "normal"); m != "normal" && m != "neox" {
		return Type{}, errf("rope mode %q is not normal or neox", m)
	}
	return x.Type, nil
}

func inferKVWrite(args []*Value, _ Attrs) (Type, error) {
	cache, x, pos := args[0], args[1], args[2]
	if len(cache.Type.Shape) != 2 || len(x.Type.Shape) != 2 {
		return Type{}, errf("kvwrite wants cache[C, W] and x[T, W], got %s and %s", cache.Type, x.Type)
	}
	if cache.Type.Shape[1] != x.Type.Shape[1] {
		return Type{}, errf("kvwrite row widths differ: cache %s, x %s", cache.Type, x.Type)
	}
	if !cache.Type.DType.IsFloat() && cache.Type.DType != Q8_0 {
		return Type{}, errf("kv cache must be a float type or q8_0, got %s", cache.Type)
	}
	if err := wantFloat("kvwrite rows", x); err != nil {
		return Type{}, err
	}
	if err := wantIDs("kvwrite positions", pos, x.Type.Shape[0]); err != nil {
		return Type{}, err
	}
	return cache.Type, nil
}

func inferAttention(args []*Value, a Attrs) (Type, error) {
	q, k, v, pos := args[0], args[1], args[2], args[3]
	nh, nkv, hd := a.Int("n_head", 0), a.Int("n_kv_head", 0), a.Int("head_dim", 0)
	if nh <= 0 || nkv <= 0 || hd <= 0 || nh%nkv != 0 {
		return Type{}, errf("attention needs n_head a positive multiple of n_kv_head and head_dim > 0, got %d, %d, %d", nh, nkv, hd)
	}
	if a.Int("window", 0) < 0 {
		return Type{}, errf("attention window %d is negative", a.Int("window", 0))
	}
	if err := wantFloat("attention query", q); err != nil {
		return Type{}, err
	}
	if len(q.Type.Shape) != 2 || q.Type.Shape[1] != D(nh*hd) {
		return Type{}, errf("attention query must be [T, %d], got %s", nh*hd, q.Type)
	}
	if len(k.Type.Shape) != 2 || k.Type.Shape[1] != D(nkv*hd) {
		return Type{}, errf("attention keys must be [C, %d], got %s", nkv*hd, k.Type)
	}
	if len(v.Type.Shape) != 2 || v.Type.Shape[0] != k.Type.Shape[0] || !v.Type.Shape[1].IsConst() || v.Type.Shape[1].N%nkv != 0 {
		return Type{}, errf("attention values must be [%s, n_kv_head·Dv], got %s", k.Type.Shape[0], v.Type)
	}
	if err := wantIDs("attention positions", pos, q.Type.Shape[0]); err != nil {
		return Type{}, err
	}
	if len(args) == 5 {
		s := args[4]
		if len(s.Type.Shape) != 1 || s.Type.Shape[0] != D(nh) || !s.Type.DType.IsFloat() {
			return Type{}, errf("attention sinks must be float[%d], got %s", nh, s.Type)
		}
	}
	dv := v.Type.Shape[1].N / nkv
	return Type{F32, Shape{q.Type.Shape[0], D(nh * dv)}}, nil
}

// Ops lists every op of the table, leaf ops included, sorted by name: the
// rows of the op × backend coverage test (internal/opcover).
func Ops() []Op {
	out := make([]Op, 0, len(ops))
	for o := range ops {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
