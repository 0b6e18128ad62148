package gputest

import (
	"fmt"
	"math"
	"testing"

	"github.com/minerva-llm/minerva/codegen/gpu"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
)

// Case is one small graph run both by ir/eval and by a language's kernels
// (emulated, or on a device). Tol is relative to the largest reference
// magnitude of each output (of each output row with PerRow).
type Case struct {
	Name   string
	Ctx, T int
	Tol    float64
	PerRow bool
	// Slot is the slot every row of the step belongs to: the states hold
	// Slot+1 slots of Ctx rows, the step's cache bases are Slot·Ctx, and
	// the rows of the other slots must stay untouched (zero).
	Slot int
	// Check, when set, checks the case's emitted library further (CUDA:
	// which weight path its matrix-vector kernels take).
	Check func(t *testing.T, lib *gpu.Library)
	// Build declares the graph, its weights and its inputs.
	Build func(t *testing.T) (*ir.Graph, WeightMap, map[string]eval.Tensor)
}

// Spec is a case description; Case builds it with the random source r.
type Spec interface{ Case(r Rand) Case }

// Cases builds specs in order, each with the next seed of s.
func Cases[S Spec](s *Seeds, specs ...S) []Case {
	out := make([]Case, 0, len(specs))
	for _, sp := range specs {
		out = append(out, sp.Case(s.Next()))
	}
	return out
}

// MatVec is a matrix product x·Wᵀ, x [T, K] and W [N, K]: fused_matmul with
// any of its prologue and epilogue (RMSNorm, gain, bias, residual), or a
// plain matmul (with a bias or none). Inputs: x in ±2, the residual in ±1.
type MatVec struct {
	Op                    ir.Op // ir.OpFusedMatMul (also when empty) or ir.OpMatMul
	DT                    ir.DType
	Norm, Gain, Bias, Res bool
	GainDT, BiasDT        ir.DType // default (zero) F32
	T, N, K               int
	// Name replaces the derived name, Prefix goes before it.
	Name, Prefix string
	Tol          float64 // default Tol(DT)
	Check        func(t *testing.T, lib *gpu.Library)
}

// Case builds c.
func (c MatVec) Case(r Rand) Case {
	op := c.Op
	if op == "" {
		op = ir.OpFusedMatMul
	}
	name := c.Name
	if name == "" {
		name = fmt.Sprintf("%s%s/%s/norm=%v,gain=%v,bias=%v(%s),res=%v/T=%d,N=%d,K=%d", c.Prefix, op, c.DT, c.Norm, c.Gain, c.Bias, c.BiasDT, c.Res, c.T, c.N, c.K)
	}
	return Case{Name: name, Ctx: 1, T: c.T, Tol: tolOr(c.Tol, c.DT), Check: c.Check, Build: func(t *testing.T) (*ir.Graph, WeightMap, map[string]eval.Tensor) {
		T, N, K := c.T, c.N, c.K
		k := r.Kit(t, "mv")
		x := k.B.Input("x", F32("T", K))
		args := []*ir.Value{x, k.Weight("w", c.DT, 1, N, K)}
		var attrs ir.Attrs
		if op == ir.OpFusedMatMul {
			attrs = ir.Attrs{"norm": Bit(c.Norm), "gain": Bit(c.Gain), "bias": Bit(c.Bias), "residual": Bit(c.Res)}
			if c.Norm {
				attrs["eps"] = 1e-5
			}
		}
		if c.Gain {
			args = append(args, k.Weight("gain", c.GainDT, 1, K))
		}
		if c.Bias {
			args = append(args, k.Weight("bias", c.BiasDT, 1, N))
		}
		if c.Res {
			args = append(args, k.B.Input("res", F32("T", N)))
		}
		g := k.Finish(k.B.Add(op, attrs, nil, args...))
		xs := k.Vals(T*K, 2)
		res := k.Vals(T*N, 1)
		return g, k.W, map[string]eval.Tensor{
			"x":   {Shape: []int64{int64(T), int64(K)}, F32: xs},
			"res": {Shape: []int64{int64(T), int64(N)}, F32: res},
		}
	}}
}

// SwiGLU is a swiglu with RMSNorm and gain: x [T, K] (K default 256) in
// ±2, gate and up weights [2F, K].
type SwiGLU struct {
	DT     ir.DType
	T, F   int
	K      int      // default 256
	GainDT ir.DType // default (zero) F32
	Name   string   // replaces the derived name
	Check  func(t *testing.T, lib *gpu.Library)
}

// Case builds c.
func (c SwiGLU) Case(r Rand) Case {
	K := c.K
	if K == 0 {
		K = 256
	}
	name := c.Name
	if name == "" {
		name = fmt.Sprintf("swiglu/%s/T=%d,F=%d", c.DT, c.T, c.F)
	}
	return Case{Name: name, Ctx: 1, T: c.T, Tol: Tol(c.DT), Check: c.Check, Build: func(t *testing.T) (*ir.Graph, WeightMap, map[string]eval.Tensor) {
		k := r.Kit(t, "swiglu")
		x := k.B.Input("x", F32("T", K))
		out := k.B.Add(ir.OpSwiGLU, ir.Attrs{"norm": int64(1), "eps": 1e-5, "gain": int64(1)}, nil,
			x, k.Weight("w", c.DT, 1, 2*c.F, K), k.Weight("gain", c.GainDT, 1, K))
		return k.Finish(out), k.W, map[string]eval.Tensor{"x": {Shape: []int64{int64(c.T), int64(K)}, F32: k.Vals(c.T*K, 2)}}
	}}
}

// QKVRoPE is a qkv_rope with RMSNorm (and a gain unless YaRN), RoPE at
// positions Pos into caches of dtype Cache, which are outputs too. RoPE and
// YaRN give the two standard shapes.
type QKVRoPE struct {
	DT, Cache  ir.DType
	Mode       string
	NRot       int64
	Gain, Bias bool
	// YaRN is gpt-oss's (base 150000, freq_scale 1/32, orig_ctx 4096,
	// beta_fast 32, beta_slow 1, ext_factor 1) with AttnFactor; without
	// it, Base and FreqScale.
	YaRN            bool
	AttnFactor      float64
	Base, FreqScale float64
	K, H, HKV, HD   int
	Ctx             int
	Pos             []int32 // one per token
	Name            string  // replaces the derived name
	Check           func(t *testing.T, lib *gpu.Library)
	// QKNorm normalises each q and k head before the rotation (Qwen3),
	// gains in ±1 around 1; Factors are Llama 3.1's per-pair frequency
	// divisors (freq_factors).
	QKNorm  bool
	Factors []float64
}

// RoPE is the standard qkv_rope case: K = 64, four heads of 16 over two KV
// heads (GQA), base 10000, freq_scale 0.5, a gain, positions 0, 7 and 1187
// (past 1000, where a float32 angle would lose 1e-4).
func RoPE(dt, cache ir.DType, mode string, nrot int64, bias bool) QKVRoPE {
	return QKVRoPE{DT: dt, Cache: cache, Mode: mode, NRot: nrot, Gain: true, Bias: bias, Base: 10000, FreqScale: 0.5,
		K: 64, H: 4, HKV: 2, HD: 16, Ctx: 1200, Pos: []int32{0, 7, 1187}}
}

// YaRN is qkv_rope with YaRN as gpt-oss configures it (attn_factor af,
// scaled by 1 + 0.1·ln 32 inside), a bias and no gain, positions up to
// 3071.
func YaRN(dt, cache ir.DType, mode string, nrot int64, af float64) QKVRoPE {
	return QKVRoPE{DT: dt, Cache: cache, Mode: mode, NRot: nrot, Bias: true, YaRN: true, AttnFactor: af,
		K: 64, H: 4, HKV: 2, HD: 16, Ctx: 3100, Pos: []int32{0, 45, 3071}}
}

// RoPECases are the qkv_rope cases every language runs: normal RoPE into
// an f32 cache, neox with partial rotation and a bias into an f16 cache.
func RoPECases() []QKVRoPE {
	return []QKVRoPE{RoPE(ir.F32, ir.F32, "normal", 16, false), RoPE(ir.Q8_0, ir.F16, "neox", 8, true)}
}

// YaRNCases are the YaRN cases every language runs: gpt-oss's (neox, f32
// cache), and with attn_factor ≠ 1, normal mode, n_rot < head_dim, an f16
// cache and MXFP4 weights.
func YaRNCases() []QKVRoPE {
	return []QKVRoPE{YaRN(ir.F32, ir.F32, "neox", 16, 1), YaRN(ir.MXFP4, ir.F16, "normal", 12, 0.8)}
}

// QKNormCases are the qkv_rope cases of the newer families every language
// runs: Qwen3's per-head q/k norms (neox, Q8_0 weights, an f16 cache; and
// F32 with a bias), which lower to the product and rope_kv, and Llama
// 3.1's frequency factors.
func QKNormCases() []QKVRoPE {
	qn := RoPE(ir.Q8_0, ir.F16, "neox", 16, false)
	qn.QKNorm = true
	qb := RoPE(ir.F32, ir.F32, "neox", 8, true)
	qb.QKNorm = true
	ff := RoPE(ir.F32, ir.F32, "normal", 16, false)
	ff.Factors = []float64{1, 1, 2.44226, 8, 8, 8, 8, 8}
	return []QKVRoPE{qn, qb, ff}
}

// Case builds c.
func (c QKVRoPE) Case(r Rand) Case {
	name := c.Name
	if name == "" {
		kind := "qkv_rope"
		if c.YaRN {
			kind = "qkv_rope_yarn"
		}
		if c.QKNorm {
			kind += "_qknorm"
		}
		if c.Factors != nil {
			kind += "_freq_factors"
		}
		name = fmt.Sprintf("%s/%s/%s/cache=%s", kind, c.DT, c.Mode, c.Cache)
	}
	T := len(c.Pos)
	return Case{Name: name, Ctx: c.Ctx, T: T, Tol: Tol(c.DT), Check: c.Check, Build: func(t *testing.T) (*ir.Graph, WeightMap, map[string]eval.Tensor) {
		K, H, HKV, HD := c.K, c.H, c.HKV, c.HD
		k := r.Kit(t, "qkv")
		x := k.B.Input("x", F32("T", K))
		pos := k.B.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
		kc := k.B.State("cache.k", ir.Type{DType: c.Cache, Shape: ir.S("C", HKV*HD)})
		vc := k.B.State("cache.v", ir.Type{DType: c.Cache, Shape: ir.S("C", HKV*HD)})
		attrs := ir.Attrs{"n_head": int64(H), "n_kv_head": int64(HKV), "head_dim": int64(HD), "n_rot": c.NRot,
			"mode": c.Mode, "norm": int64(1), "eps": 1e-5, "bias": Bit(c.Bias)}
		if c.Gain {
			attrs["gain"] = int64(1)
		}
		if c.QKNorm {
			attrs["qk_norm"], attrs["qk_eps"] = int64(1), 1e-6
		}
		if c.Factors != nil {
			attrs["freq_factors"] = c.Factors
		}
		if c.YaRN {
			for key, v := range (ir.Attrs{"base": 150000.0, "freq_scale": 1.0 / 32, "ext_factor": 1.0, "attn_factor": c.AttnFactor,
				"beta_fast": 32.0, "beta_slow": 1.0, "orig_ctx": int64(4096)}) {
				attrs[key] = v
			}
		} else {
			attrs["base"], attrs["freq_scale"] = c.Base, c.FreqScale
		}
		args := []*ir.Value{x, k.Weight("w", c.DT, 1, (H+2*HKV)*HD, K), pos, kc, vc}
		if c.Gain {
			args = append(args, k.Weight("gain", ir.F32, 1, K))
		}
		if c.Bias {
			args = append(args, k.Weight("bias", ir.F32, 1, (H+2*HKV)*HD))
		}
		if c.QKNorm {
			args = append(args, k.Gains("qnorm", HD), k.Gains("knorm", HD))
		}
		out := k.B.Add(ir.OpQKVRoPE, attrs, nil, args...)
		return k.Finish(out, kc, vc), k.W, map[string]eval.Tensor{
			"x":   {Shape: []int64{int64(T), int64(K)}, F32: k.Vals(T*K, 2)},
			"pos": {Shape: []int64{int64(T)}, I32: c.Pos},
		}
	}}
}

// Attention is flash attention over a filled cache of Ctx rows, given as
// weights (so an f16 cache holds real f16 values): H query heads of HD
// over KV heads (values DV wide), kv splits, an optional window and sinks
// (in ±2), queries in ±1 at positions Pos.
type Attention struct {
	Name           string
	Cache          ir.DType
	Splits, Window int64
	Sinks          bool
	SinksDT        ir.DType // default (zero) F32
	HD, DV, H, KV  int
	Ctx            int     // default 80
	Scale          float64 // default 0.3
	Pos            []int32 // one per token
}

// AttentionCases are the attention cases every language runs: split-KV
// decode and merge with GQA, with a window over an f16 cache, and a
// prefill-like step of four tokens at positions prefill (one row with fewer
// rows than the splits cover) with sinks and DV ≠ HD.
func AttentionCases(prefill []int32) []Attention {
	return []Attention{
		{Name: "flash_attention/decode/f32/s4", Cache: ir.F32, Splits: 4, HD: 32, DV: 32, H: 4, KV: 2, Pos: []int32{77}},
		{Name: "flash_attention/decode/f16/s3/window", Cache: ir.F16, Splits: 3, Window: 20, HD: 16, DV: 16, H: 4, KV: 1, Pos: []int32{77}},
		{Name: "flash_attention/prefill/f32/s2/sinks", Cache: ir.F32, Splits: 2, Sinks: true, HD: 16, DV: 24, H: 2, KV: 2, Pos: prefill},
		// A decode step whose splits are longer than a warp (every lane
		// holds rows) with Dv a multiple of 32 above it (each lane sums
		// two columns of the lanes' accumulators).
		{Name: "flash_attention/decode/f16/s2/deep", Cache: ir.F16, Splits: 2, HD: 64, DV: 64, H: 8, KV: 2, Ctx: 160, Pos: []int32{150}},
	}
}

// Case builds c.
func (c Attention) Case(r Rand) Case {
	C, T := c.Ctx, len(c.Pos)
	if C == 0 {
		C = 80
	}
	scale := c.Scale
	if scale == 0 {
		scale = 0.3
	}
	return Case{Name: c.Name, Ctx: C, T: T, Tol: 1e-5, Build: func(t *testing.T) (*ir.Graph, WeightMap, map[string]eval.Tensor) {
		k := r.Kit(t, "attn")
		q := k.B.Input("q", F32("T", c.H*c.HD))
		pos := k.B.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
		kc := k.Weight("k", c.Cache, 1, C, c.KV*c.HD)
		vc := k.Weight("v", c.Cache, 1, C, c.KV*c.DV)
		attrs := ir.Attrs{"n_head": int64(c.H), "n_kv_head": int64(c.KV), "head_dim": int64(c.HD), "scale": scale,
			"tile_q": int64(16), "tile_kv": int64(8), "kv_splits": c.Splits}
		if c.Window > 0 {
			attrs["window"] = c.Window
		}
		args := []*ir.Value{q, kc, vc, pos}
		if c.Sinks {
			args = append(args, k.Weight("sinks", c.SinksDT, 2, c.H))
		}
		out := k.B.Add(ir.OpFlashAttention, attrs, nil, args...)
		return k.Finish(out), k.W, map[string]eval.Tensor{
			"q":   {Shape: []int64{int64(T), int64(c.H * c.HD)}, F32: k.Vals(T*c.H*c.HD, 1)},
			"pos": {Shape: []int64{int64(T)}, I32: c.Pos},
		}
	}}
}

// Embed gathers rows 9, 0 and 4 of a [10, 256] table of dtype DT.
type Embed struct{ DT ir.DType }

// Case builds c. Tolerance 1e-6: fp contraction (fma) may make the kernel
// differ from the reference in the last bit.
func (c Embed) Case(r Rand) Case {
	return Case{Name: "embed/" + c.DT.String(), Ctx: 1, T: 3, Tol: 1e-6, Build: func(t *testing.T) (*ir.Graph, WeightMap, map[string]eval.Tensor) {
		k := r.Kit(t, "embed")
		ids := k.B.Input("ids", ir.Type{DType: ir.I32, Shape: ir.S("T")})
		out := k.B.Embed(k.Weight("table", c.DT, 1, 10, 256), ids)
		return k.Finish(out), k.W, map[string]eval.Tensor{"ids": {Shape: []int64{3}, I32: []int32{9, 0, 4}}}
	}}
}

// Embeds lists an Embed per dtype.
func Embeds(dts ...ir.DType) []Embed {
	var out []Embed
	for _, dt := range dts {
		out = append(out, Embed{dt})
	}
	return out
}

// RowOp is one of the row ops on x [3, 70] in ±3 (70: two partial lane
// rounds); y, the second operand of add, is in ±1.
type RowOp struct {
	Name string
	Op   func(k *Kit, x *ir.Value) *ir.Value
}

// rowOps are the row ops by name.
var rowOps = map[string]func(k *Kit, x *ir.Value) *ir.Value{
	"rmsnorm":           func(k *Kit, x *ir.Value) *ir.Value { return k.B.RMSNorm(x, k.Weight("g", ir.F32, 1, 70), 1e-6) },
	"rmsnorm_f16gain":   func(k *Kit, x *ir.Value) *ir.Value { return k.B.RMSNorm(x, k.Weight("g", ir.F16, 1, 70), 1e-6) },
	"softmax":           func(k *Kit, x *ir.Value) *ir.Value { return k.B.Softmax(x) },
	"add":               func(k *Kit, x *ir.Value) *ir.Value { return k.B.AddV(x, k.B.Input("y", F32("T", 70))) },
	"mul_broadcast":     func(k *Kit, x *ir.Value) *ir.Value { return k.B.Mul(x, k.Weight("g", ir.F32, 1, 70)) },
	"mul_broadcast_f16": func(k *Kit, x *ir.Value) *ir.Value { return k.B.Mul(x, k.Weight("g", ir.F16, 1, 70)) },
	"silu":              func(k *Kit, x *ir.Value) *ir.Value { return k.B.SiLU(x) },
	"gelu":              func(k *Kit, x *ir.Value) *ir.Value { return k.B.GELU(x) },
}

// RowOps lists the row ops of the given names (rmsnorm, rmsnorm_f16gain,
// softmax, add, mul_broadcast, mul_broadcast_f16, silu, gelu), each case
// named prefix + name.
func RowOps(prefix string, names ...string) []RowOp {
	var out []RowOp
	for _, n := range names {
		op, ok := rowOps[n]
		if !ok {
			panic("gputest: no row op " + n)
		}
		out = append(out, RowOp{prefix + n, op})
	}
	return out
}

// Case builds c.
func (c RowOp) Case(r Rand) Case {
	return Case{Name: c.Name, Ctx: 1, T: 3, Tol: 1e-5, Build: func(t *testing.T) (*ir.Graph, WeightMap, map[string]eval.Tensor) {
		k := r.Kit(t, "rowop")
		x := k.B.Input("x", F32("T", 70))
		out := c.Op(k, x)
		g := k.Finish(out)
		xs := k.Vals(210, 3)
		return g, k.W, map[string]eval.Tensor{
			"x": {Shape: []int64{3, 70}, F32: xs},
			"y": {Shape: []int64{3, 70}, F32: k.Vals(210, 1)},
		}
	}}
}

// TopK is topk_softmax of K of E router logits per token, the logits on a
// 0.5 grid in ±2, so that equal logits are common and the lower index must
// win as in ir/eval's stable sort.
type TopK struct{ E, K, T int }

// Case builds c.
func (c TopK) Case(r Rand) Case {
	return Case{Name: fmt.Sprintf("topk_softmax/e%d_k%d", c.E, c.K), Ctx: 1, T: c.T, Tol: 1e-5, Build: func(t *testing.T) (*ir.Graph, WeightMap, map[string]eval.Tensor) {
		k := r.Kit(t, "topk")
		x := k.B.Input("x", F32("T", c.E))
		logits := k.Vals(c.T*c.E, 2)
		for i := range logits {
			logits[i] = float32(math.Round(float64(logits[i])*2) / 2)
		}
		return k.Finish(k.B.TopKSoftmax(x, c.K)), k.W, map[string]eval.Tensor{
			"x": {Shape: []int64{int64(c.T), int64(c.E)}, F32: logits}}
	}}
}

// How a MoE case routes its tokens.
const (
	// RouteTopK: router logits (in ±3) → topk_softmax of K → moe, as the
	// gpt-oss graph has it (slots = K).
	RouteTopK = iota
	// RouteSparse: a route given as an input (slots = E) whose rows select
	// no expert, one (3) and three (0, 2 and E-1); T must be 3.
	RouteSparse
	// RouteDense: a route input with every weight non-zero, some negative.
	RouteDense
)

// MoE is the expert block of gpt-oss: x [T, D] in ±2, E experts of gate
// and up [F, D] and down [D, F] weights (dtypes DT and Down, in ±0.5) and,
// with Biases, biases (in ±1) of dtype BiasDT, with activation attributes
// Attrs.
type MoE struct {
	Name     string // "moe/" + Name
	DT, Down ir.DType
	Biases   bool
	BiasDT   ir.DType // default (zero) F32
	Attrs    ir.Attrs
	Route    int
	E, K, T  int
	F, D     int
}

// Case builds c. Tolerance: Tol of f32 experts when both dtypes are F32,
// of quantized ones otherwise.
func (c MoE) Case(r Rand) Case {
	tol := 1e-4
	if c.DT == ir.F32 && c.Down == ir.F32 {
		tol = 1e-5
	}
	return Case{Name: "moe/" + c.Name, Ctx: 1, T: c.T, Tol: tol, Build: func(t *testing.T) (*ir.Graph, WeightMap, map[string]eval.Tensor) {
		k := r.Kit(t, "moe")
		x := k.B.Input("x", F32("T", c.D))
		var route *ir.Value
		in := map[string]eval.Tensor{"x": {Shape: []int64{int64(c.T), int64(c.D)}, F32: k.Vals(c.T*c.D, 2)}}
		switch c.Route {
		case RouteTopK:
			route = k.B.TopKSoftmax(k.B.Input("logits", F32("T", c.E)), c.K)
			in["logits"] = eval.Tensor{Shape: []int64{int64(c.T), int64(c.E)}, F32: k.Vals(c.T*c.E, 3)}
		case RouteSparse:
			route = k.B.Input("route", F32("T", c.E))
			rt := make([]float32, c.T*c.E)
			rt[1*c.E+3] = 0.7                                         // row 1: one expert
			rt[2*c.E+0], rt[2*c.E+2], rt[2*c.E+c.E-1] = 0.2, 0.5, 0.3 // row 2: three; row 0: none
			in["route"] = eval.Tensor{Shape: []int64{int64(c.T), int64(c.E)}, F32: rt}
		case RouteDense:
			route = k.B.Input("route", F32("T", c.E))
			in["route"] = eval.Tensor{Shape: []int64{int64(c.T), int64(c.E)}, F32: k.Vals(c.T*c.E, 1)}
		default:
			t.Fatalf("route %d", c.Route)
		}
		w := ir.MoEWeights{
			Gate: k.Weight("gate", c.DT, 0.5, c.E, c.F, c.D),
			Up:   k.Weight("up", c.DT, 0.5, c.E, c.F, c.D),
			Down: k.Weight("down", c.Down, 0.5, c.E, c.D, c.F),
		}
		if c.Biases {
			w.GateBias = k.Weight("bg", c.BiasDT, 1, c.E, c.F)
			w.UpBias = k.Weight("bu", c.BiasDT, 1, c.E, c.F)
			w.DownBias = k.Weight("bd", c.BiasDT, 1, c.E, c.D)
		}
		return k.Finish(k.B.MoE(x, route, w, c.Attrs)), k.W, in
	}}
}

func tolOr(tol float64, dt ir.DType) float64 {
	if tol != 0 {
		return tol
	}
	return Tol(dt)
}

// Unfused is the attention input of a graph whose projections did not fuse
// (the q/k and v weights of differing types, as in Q4_K_M files): three
// matmuls, optionally Qwen3's per-head norms (reshape → rmsnorm with a
// [head_dim] gain → reshape), standalone rope on q and k, and kvwrite of
// k and v into caches that are outputs too.
type Unfused struct {
	QDT, VDT ir.DType
	Cache    ir.DType
	Mode     string
	QKNorm   bool
	Pos      []int32
}

// UnfusedCases are the unfused cases every language runs.
func UnfusedCases() []Unfused {
	return []Unfused{
		{QDT: ir.Q4_K, VDT: ir.Q8_0, Cache: ir.F32, Mode: "neox", QKNorm: true, Pos: []int32{0, 5, 77}},
		{QDT: ir.F32, VDT: ir.F16, Cache: ir.F16, Mode: "normal", Pos: []int32{3, 9}},
	}
}

// Case builds c.
func (c Unfused) Case(r Rand) Case {
	name := fmt.Sprintf("unfused/%s+%s/%s/cache=%s", c.QDT, c.VDT, c.Mode, c.Cache)
	if c.QKNorm {
		name += "/qknorm"
	}
	T := len(c.Pos)
	return Case{Name: name, Ctx: 80, T: T, Tol: max(Tol(c.QDT), Tol(c.VDT)), Build: func(t *testing.T) (*ir.Graph, WeightMap, map[string]eval.Tensor) {
		const K, H, HKV, HD = 256, 4, 2, 32
		k := r.Kit(t, "unfused")
		x := k.B.Input("x", F32("T", K))
		pos := k.B.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
		rope := ir.Attrs{"head_dim": int64(HD), "n_rot": int64(HD), "base": 10000.0, "freq_scale": 1.0, "mode": c.Mode}
		proj := func(name string, dt ir.DType, heads int) *ir.Value {
			m := k.B.MatMul(x, k.Weight(name, dt, 1, heads*HD, K), nil)
			if !c.QKNorm || name == "wv" {
				return m
			}
			split := k.B.Reshape(m, ir.S("T", heads, HD))
			return k.B.Reshape(k.B.RMSNorm(split, k.Gains(name+"_norm", HD), 1e-6), ir.S("T", heads*HD))
		}
		q := k.B.RoPE(proj("wq", c.QDT, H), pos, rope)
		kr := k.B.RoPE(proj("wk", c.QDT, HKV), pos, rope)
		kc := k.B.KVWrite(k.B.State("cache.k", ir.Type{DType: c.Cache, Shape: ir.S("C", HKV*HD)}), kr, pos)
		vc := k.B.KVWrite(k.B.State("cache.v", ir.Type{DType: c.Cache, Shape: ir.S("C", HKV*HD)}), proj("wv", c.VDT, HKV), pos)
		k.B.Output("cache.k", kc)
		k.B.Output("cache.v", vc)
		return k.Finish(q), k.W, map[string]eval.Tensor{
			"x":   {Shape: []int64{int64(T), K}, F32: k.Vals(T*K, 2)},
			"pos": {Shape: []int64{int64(T)}, I32: c.Pos},
		}
	}}
}

// SlotCases are cases whose step belongs to slot 2 of three (cache bases
// 2·Ctx): qkv_rope at T = 1 (the matrix-vector epilogue) and T = 3 (CUDA's
// tiled product and rope_kv), Qwen3's rope_kv and the standalone kv_write.
// Each must write its slot's cache rows and no other's.
func SlotCases(s *Seeds) []Case {
	// An f32 cache: an f16 one may round a value the other way than the
	// reference (one f16 step, 5e-4 of it), which says nothing of the slot.
	decode := RoPE(ir.Q8_0, ir.F32, "neox", 8, true)
	decode.Pos = []int32{1187}
	decode.Name = "qkv_rope/q8_0/neox/cache=f32/T=1"
	qkn := RoPE(ir.F32, ir.F32, "neox", 8, true)
	qkn.QKNorm = true
	cases := Cases(s, decode, RoPE(ir.F32, ir.F32, "normal", 16, false), qkn)
	cases = append(cases, Cases(s, UnfusedCases()[1])...)
	for i := range cases {
		cases[i].Name = "slot2/" + cases[i].Name
		cases[i].Slot = 2
	}
	return cases
}
