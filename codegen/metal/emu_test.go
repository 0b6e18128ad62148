package metal_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/codegen/metal"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/quant"
)

// emuCase is one single-op graph run both by ir/eval and by the emulated
// kernels. Tolerances are relative to the largest reference magnitude, as
// in the CPU backend's tests: 1e-5 for float weights; 1e-4 for quantized
// weights (the Metal kernels multiply float activations by the dequantized
// weights, so the reference is the float product, not ggml's 8-bit
// activation path; the bound covers float32 against float64 accumulation).
type emuCase struct {
	name   string
	ctx, T int
	tol    float64
	build  func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor)
}

// graphKit builds a test graph with random weights.
type graphKit struct {
	t   *testing.T
	b   *ir.Builder
	rng *rand.Rand
	w   weightMap
}

func newKit(t *testing.T, name string, seed uint64) *graphKit {
	return &graphKit{t: t, b: ir.NewBuilder(name), rng: rand.New(rand.NewPCG(seed, 7)), w: weightMap{}}
}

// vals returns n random values in ±scale, never exactly zero.
func (k *graphKit) vals(n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32((k.rng.Float64()*2 - 1) * scale)
		if out[i] == 0 {
			out[i] = float32(scale) / 3
		}
	}
	return out
}

// weight quantizes random values into a weight of dtype dt.
func (k *graphKit) weight(name string, dt ir.DType, scale float64, dims ...int) *ir.Value {
	n := 1
	shape := ir.Shape{}
	for _, d := range dims {
		n *= d
		shape = append(shape, ir.D(int64(d)))
	}
	nb, err := dt.RowBytes(int64(n))
	if err != nil {
		k.t.Fatal(err)
	}
	raw := make([]byte, nb)
	if err := quant.Quantize(dt, k.vals(n, scale), raw); err != nil {
		k.t.Fatal(err)
	}
	k.w[name] = raw
	return k.b.Weight(name, ir.Type{DType: dt, Shape: shape})
}

func (k *graphKit) finish(out *ir.Value, states ...*ir.Value) *ir.Graph {
	k.b.Output("out", out)
	for _, s := range states {
		k.b.Output(s.Name(), s)
	}
	g, err := k.b.Finish()
	if err != nil {
		k.t.Fatal(err)
	}
	return g
}

func f32T(dims ...any) ir.Type { return ir.Type{DType: ir.F32, Shape: ir.S(dims...)} }

func bit(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func emuCases() []emuCase {
	var cases []emuCase
	seed := uint64(800)
	// Matrix products: every dtype with the full prologue and epilogue
	// (norm, gain, bias, residual); F32 and Q4_0 also bare. At T = 1 the
	// schedule runs the matrix-vector kernels (N = 13 leaves a threadgroup
	// with idle simdgroups); at T = 3 the tiled prefill kernels.
	type mv struct {
		dt                    ir.DType
		norm, gain, bias, res bool
		T, N, K               int
		op                    ir.Op
	}
	var mvs []mv
	for _, dt := range metal.WeightDTypes() {
		mvs = append(mvs, mv{dt, true, true, true, true, 1, 13, 256, ir.OpFusedMatMul}, mv{dt, true, true, true, true, 3, 13, 256, ir.OpFusedMatMul})
	}
	mvs = append(mvs, mv{ir.F32, false, false, false, false, 1, 13, 256, ir.OpFusedMatMul}, mv{ir.Q4_0, false, false, false, true, 1, 13, 256, ir.OpFusedMatMul},
		mv{ir.Q8_0, true, false, false, false, 1, 13, 256, ir.OpFusedMatMul})
	// The tiled kernels at T = 2, 9 (one partial token tile) and 33 (a full
	// tile and a partial one), with odd output sizes (N = 45: a full feature
	// tile and a partial one; N = 7: one partial), for F32 (also K = 100, a
	// partial K chunk), Q4_0, Q8_0 and Q4_K; and plain matmul (bias only).
	for _, T := range []int{2, 9, 33} {
		for _, dt := range []ir.DType{ir.F32, ir.Q4_0, ir.Q8_0, ir.Q4_K} {
			mvs = append(mvs, mv{dt, true, true, true, true, T, 45, 256, ir.OpFusedMatMul})
		}
		mvs = append(mvs, mv{ir.F32, true, false, false, true, T, 7, 100, ir.OpFusedMatMul}, mv{ir.Q8_0, false, false, true, false, T, 45, 128, ir.OpMatMul})
	}
	for _, c := range mvs {
		seed++
		s := seed
		tol := 1e-4
		if c.dt == ir.F32 {
			tol = 1e-5
		}
		name := fmt.Sprintf("%s/%s/norm=%v,gain=%v,bias=%v,res=%v/T=%d,N=%d,K=%d", c.op, c.dt, c.norm, c.gain, c.bias, c.res, c.T, c.N, c.K)
		cases = append(cases, emuCase{name: name, ctx: 1, T: c.T, tol: tol, build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
			T, N, K := c.T, c.N, c.K
			k := newKit(t, "mv", s)
			x := k.b.Input("x", f32T("T", K))
			args := []*ir.Value{x, k.weight("w", c.dt, 1, N, K)}
			var attrs ir.Attrs
			if c.op == ir.OpFusedMatMul {
				attrs = ir.Attrs{"norm": bit(c.norm), "gain": bit(c.gain), "bias": bit(c.bias), "residual": bit(c.res)}
				if c.norm {
					attrs["eps"] = 1e-5
				}
			}
			if c.gain {
				args = append(args, k.weight("gain", ir.F32, 1, K))
			}
			if c.bias {
				args = append(args, k.weight("bias", ir.F32, 1, N))
			}
			if c.res {
				args = append(args, k.b.Input("res", f32T("T", N)))
			}
			g := k.finish(k.b.Add(c.op, attrs, nil, args...))
			return g, k.w, map[string]eval.Tensor{
				"x":   {Shape: []int64{int64(T), int64(K)}, F32: k.vals(T*K, 2)},
				"res": {Shape: []int64{int64(T), int64(N)}, F32: k.vals(T*N, 1)},
			}
		}})
	}
	// swiglu: matrix-vector at T = 1, tiled at T = 2 and 33 (F = 18 and 41:
	// partial feature tiles).
	for _, c := range []struct {
		dt   ir.DType
		T, F int
	}{{ir.F32, 1, 18}, {ir.Q4_K, 1, 18}, {ir.F32, 2, 18}, {ir.Q4_K, 2, 18}, {ir.F32, 33, 41}, {ir.Q4_0, 33, 41}} {
		seed++
		s := seed
		cases = append(cases, emuCase{name: fmt.Sprintf("swiglu/%s/T=%d,F=%d", c.dt, c.T, c.F), ctx: 1, T: c.T, tol: map[bool]float64{true: 1e-5, false: 1e-4}[c.dt == ir.F32],
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				const K = 256
				k := newKit(t, "swiglu", s)
				x := k.b.Input("x", f32T("T", K))
				out := k.b.Add(ir.OpSwiGLU, ir.Attrs{"norm": int64(1), "eps": 1e-5, "gain": int64(1)}, nil,
					x, k.weight("w", c.dt, 1, 2*c.F, K), k.weight("gain", ir.F32, 1, K))
				return k.finish(out), k.w, map[string]eval.Tensor{"x": {Shape: []int64{int64(c.T), K}, F32: k.vals(c.T*K, 2)}}
			}})
	}
	// qkv_rope: normal and neox RoPE, f32 and f16 caches, a position past
	// 1000 (where a float32 angle would lose 1e-4), GQA, bias.
	for _, c := range []struct {
		dt    ir.DType
		cache ir.DType
		mode  string
		nrot  int64
		bias  bool
	}{{ir.F32, ir.F32, "normal", 16, false}, {ir.Q8_0, ir.F16, "neox", 8, true}} {
		seed++
		s := seed
		tol := 1e-5
		if c.dt != ir.F32 {
			tol = 1e-4
		}
		cases = append(cases, emuCase{name: fmt.Sprintf("qkv_rope/%s/%s/cache=%s", c.dt, c.mode, c.cache), ctx: 1200, T: 3, tol: tol,
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				const K, H, HKV, HD = 64, 4, 2, 16
				k := newKit(t, "qkv", s)
				x := k.b.Input("x", f32T("T", K))
				pos := k.b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
				kc := k.b.State("cache.k", ir.Type{DType: c.cache, Shape: ir.S("C", HKV*HD)})
				vc := k.b.State("cache.v", ir.Type{DType: c.cache, Shape: ir.S("C", HKV*HD)})
				attrs := ir.Attrs{"n_head": int64(H), "n_kv_head": int64(HKV), "head_dim": int64(HD), "n_rot": c.nrot,
					"base": 10000.0, "freq_scale": 0.5, "mode": c.mode, "norm": int64(1), "eps": 1e-5, "gain": int64(1), "bias": bit(c.bias)}
				args := []*ir.Value{x, k.weight("w", c.dt, 1, (H+2*HKV)*HD, K), pos, kc, vc, k.weight("gain", ir.F32, 1, K)}
				if c.bias {
					args = append(args, k.weight("bias", ir.F32, 1, (H+2*HKV)*HD))
				}
				out := k.b.Add(ir.OpQKVRoPE, attrs, nil, args...)
				return k.finish(out, kc, vc), k.w, map[string]eval.Tensor{
					"x":   {Shape: []int64{3, K}, F32: k.vals(3*K, 2)},
					"pos": {Shape: []int64{3}, I32: []int32{0, 7, 1187}},
				}
			}})
	}
	// Attention over a filled cache (given as weights, so f16 caches hold
	// real f16 values): decode (T = 1) and a prefill-like step (T = 4),
	// kv splits, GQA, a window, sinks.
	for _, c := range []struct {
		name          string
		cache         ir.DType
		T             int
		splits        int64
		window        int64
		sinks         bool
		hd, dv, h, kv int
	}{
		{"decode/f32/s4", ir.F32, 1, 4, 0, false, 32, 32, 4, 2},
		{"decode/f16/s3/window", ir.F16, 1, 3, 20, false, 16, 16, 4, 1},
		{"prefill/f32/s2/sinks", ir.F32, 4, 2, 0, true, 16, 24, 2, 2},
	} {
		seed++
		s := seed
		cases = append(cases, emuCase{name: "flash_attention/" + c.name, ctx: 80, T: c.T, tol: 1e-5,
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				const C = 80
				k := newKit(t, "attn", s)
				q := k.b.Input("q", f32T("T", c.h*c.hd))
				pos := k.b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
				kc := k.weight("k", c.cache, 1, C, c.kv*c.hd)
				vc := k.weight("v", c.cache, 1, C, c.kv*c.dv)
				attrs := ir.Attrs{"n_head": int64(c.h), "n_kv_head": int64(c.kv), "head_dim": int64(c.hd), "scale": 0.3,
					"tile_q": int64(16), "tile_kv": int64(8), "kv_splits": c.splits}
				if c.window > 0 {
					attrs["window"] = c.window
				}
				args := []*ir.Value{q, kc, vc, pos}
				if c.sinks {
					args = append(args, k.weight("sinks", ir.F32, 2, c.h))
				}
				out := k.b.Add(ir.OpFlashAttention, attrs, nil, args...)
				ps := []int32{77}
				if c.T == 4 {
					ps = []int32{2, 3, 40, 79} // row 2 has fewer rows than splits·32
				}
				return k.finish(out), k.w, map[string]eval.Tensor{
					"q":   {Shape: []int64{int64(c.T), int64(c.h * c.hd)}, F32: k.vals(c.T*c.h*c.hd, 1)},
					"pos": {Shape: []int64{int64(c.T)}, I32: ps},
				}
			}})
	}
	// Embedding gathers and the small row ops.
	for _, dt := range []ir.DType{ir.F16, ir.Q4_K, ir.Q6_K} {
		seed++
		s := seed
		cases = append(cases, emuCase{name: "embed/" + dt.String(), ctx: 1, T: 3, tol: 1e-6, // fp contraction (fma) may differ from the reference in the last bit
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				k := newKit(t, "embed", s)
				ids := k.b.Input("ids", ir.Type{DType: ir.I32, Shape: ir.S("T")})
				out := k.b.Embed(k.weight("table", dt, 1, 10, 256), ids)
				return k.finish(out), k.w, map[string]eval.Tensor{"ids": {Shape: []int64{3}, I32: []int32{9, 0, 4}}}
			}})
	}
	rowOps := []struct {
		name string
		op   func(k *graphKit, x *ir.Value) *ir.Value
	}{
		{"rmsnorm", func(k *graphKit, x *ir.Value) *ir.Value { return k.b.RMSNorm(x, k.weight("g", ir.F32, 1, 70), 1e-6) }},
		{"softmax", func(k *graphKit, x *ir.Value) *ir.Value { return k.b.Softmax(x) }},
		{"add", func(k *graphKit, x *ir.Value) *ir.Value { return k.b.AddV(x, k.b.Input("y", f32T("T", 70))) }},
		{"mul_broadcast", func(k *graphKit, x *ir.Value) *ir.Value { return k.b.Mul(x, k.weight("g", ir.F32, 1, 70)) }},
		{"silu", func(k *graphKit, x *ir.Value) *ir.Value { return k.b.SiLU(x) }},
		{"gelu", func(k *graphKit, x *ir.Value) *ir.Value { return k.b.GELU(x) }},
	}
	for _, c := range rowOps {
		seed++
		s := seed
		cases = append(cases, emuCase{name: c.name, ctx: 1, T: 3, tol: 1e-5,
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				k := newKit(t, c.name, s)
				x := k.b.Input("x", f32T("T", 70))
				out := c.op(k, x)
				return k.finish(out), k.w, map[string]eval.Tensor{
					"x": {Shape: []int64{3, 70}, F32: k.vals(210, 3)},
					"y": {Shape: []int64{3, 70}, F32: k.vals(210, 1)},
				}
			}})
	}
	return append(cases, moeEmuCases(&seed)...)
}

// TestEmulate runs every case's kernels on the CPU through the shim and
// compares outputs and KV-cache writes with ir/eval.
func TestEmulate(t *testing.T) {
	clang := clangOrSkip(t)
	for _, c := range emuCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g, w, inputs := c.build(t)
			// eval rejects inputs the graph does not declare only by
			// ignoring them; drop them so both sides see the same set.
			used := map[string]eval.Tensor{}
			for _, v := range g.Values {
				if v.Op == ir.OpInput {
					used[v.Name()] = inputs[v.Name()]
				}
			}
			lib, err := metal.Emit(g)
			if err != nil {
				t.Fatal(err)
			}
			m, err := eval.New(g, w, int64(c.ctx))
			if err != nil {
				t.Fatal(err)
			}
			want, err := m.Run(used)
			if err != nil {
				t.Fatal(err)
			}
			// The schedule runs the matrix-vector kernels at T = 1 and the
			// tiled ones for prefill, never both.
			family := map[string]string{}
			for _, k := range lib.Kernels {
				family[k.Name] = k.Family
			}
			for _, l := range lib.Step(c.T) {
				f := family[l.Kernel]
				if c.T == 1 && strings.HasSuffix(f, "_tiled") || c.T > 1 && (f == "matvec" || f == "swiglu") {
					t.Errorf("a step of %d tokens runs %s (%s)", c.T, l.Kernel, f)
				}
			}
			got := emulate(t, clang, g, lib, w, used, c.ctx, c.T)
			for _, o := range g.Outputs {
				ref := want[o.Name].F32
				b, ok := got[o.Value.ID]
				if !ok {
					t.Fatalf("output %s (%v) was never written by a launch", o.Name, o.Value)
				}
				e, err := relErr(floats(b, o.Value.Type.DType), ref)
				if err != nil {
					t.Fatalf("output %s: %v", o.Name, err)
				}
				t.Logf("output %s: max error %.3g of max |ref| (tolerance %.0e)", o.Name, e, c.tol)
				if e > c.tol {
					t.Errorf("output %s: max error %.3g of max |ref| > %.0e", o.Name, e, c.tol)
				}
			}
		})
	}
}
