package eval_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
)

// The fused ops are held to the unfused graphs they replace: each test
// builds one graph holding the fused op and its composition of unfused ops
// on the same operands, runs it on random (never zero) inputs and weights,
// and requires
//
//	max|fused − unfused| ≤ 1e-5 · max|unfused|     (relTol)
//
// for every output, and for state buffers after every step. The unfused ops
// are themselves checked against naive references in the other tests of
// this package.

// fusedFlags lists the flag combinations of the matmul-family prologue:
// no norm, norm without gain, norm with gain.
var fusedNorms = []struct {
	name       string
	norm, gain bool
}{{"plain", false, false}, {"norm", true, false}, {"norm+gain", true, true}}

func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestFusedMatMul: fused_matmul(x, w [, gain] [, bias] [, residual]) against
// rmsnorm?(x, gain?) → matmul(·, w, bias?) → add(·, residual)?, for every
// flag combination, f32 and q8_0 weights, 2-D and 3-D inputs.
func TestFusedMatMul(t *testing.T) {
	const K, N = 64, 24
	seed := uint64(1100)
	for _, dt := range []ir.DType{ir.F32, ir.Q8_0} {
		for _, nm := range fusedNorms {
			for _, bias := range []bool{false, true} {
				for _, res := range []bool{false, true} {
					for _, rank := range []int{2, 3} {
						name := fmt.Sprintf("%s/%s/bias=%v/residual=%v/rank%d", dt, nm.name, bias, res, rank)
						seed++
						t.Run(name, func(t *testing.T) {
							rng := newRNG(seed)
							w := testWeights{}
							b := ir.NewBuilder("fused_matmul")
							lead := []any{"T"}
							lead3 := []int64{5}
							if rank == 3 {
								lead, lead3 = []any{"T", 2}, []int64{5, 2}
							}
							x := b.Input("x", f32Type(append(lead, K)...))
							r := b.Input("r", f32Type(append(lead, N)...))
							wt, _ := w.weight(t, b, "w", dt, randVals(rng, N*K, 0.5), N, K)
							gain, _ := w.weight(t, b, "gain", ir.F32, randVals(rng, K, 1), K)
							bv, _ := w.weight(t, b, "bias", ir.F32, randVals(rng, N, 1), N)

							attrs := ir.Attrs{"norm": flag(nm.norm), "gain": flag(nm.gain), "bias": flag(bias), "residual": flag(res)}
							args := []*ir.Value{x, wt}
							ref := x
							if nm.norm {
								attrs["eps"] = 1e-5
								var g *ir.Value
								if nm.gain {
									g = gain
									args = append(args, gain)
								}
								ref = b.RMSNorm(x, g, 1e-5)
							}
							var bb *ir.Value
							if bias {
								bb = bv
								args = append(args, bv)
							}
							ref = b.MatMul(ref, wt, bb)
							if res {
								args = append(args, r)
								ref = b.AddV(ref, r)
							}
							b.Output("fused", b.Add(ir.OpFusedMatMul, attrs, nil, args...))
							b.Output("ref", ref)
							shape := func(last int64) []int64 { return append(append([]int64{}, lead3...), last) }
							out := runOnce(t, b, w, 8, map[string]eval.Tensor{
								"x": f32T(randVals(rng, prod(shape(K)), 1.5), shape(K)...),
								"r": f32T(randVals(rng, prod(shape(N)), 2), shape(N)...),
							})
							require.Equal(t, shape(N), out["fused"].Shape)
							requireClose(t, out["fused"].F32, f64(out["ref"].F32), relTol, "fused_matmul")
						})
					}
				}
			}
		}
	}
}

// TestSwiGLU: swiglu(x, w [, gain]) with w = concat(gate, up) (the merged
// weight fuse-swiglu builds) against silu(norm?(x)·gateᵀ) · (norm?(x)·upᵀ);
// and with w a single stored weight whose first F rows are the gate rows,
// against the same computation on two weights holding those rows' bytes.
func TestSwiGLU(t *testing.T) {
	const K, F = 64, 40
	seed := uint64(1200)
	for _, dt := range []ir.DType{ir.F32, ir.F16, ir.Q8_0} {
		for _, nm := range fusedNorms {
			for _, merged := range []bool{true, false} {
				seed++
				t.Run(fmt.Sprintf("%s/%s/concat=%v", dt, nm.name, merged), func(t *testing.T) {
					rng := newRNG(seed)
					w := testWeights{}
					b := ir.NewBuilder("swiglu")
					x := b.Input("x", f32Type("T", K))
					gate, _ := w.weight(t, b, "gate", dt, randVals(rng, F*K, 0.5), F, K)
					up, _ := w.weight(t, b, "up", dt, randVals(rng, F*K, 0.5), F, K)
					gain, _ := w.weight(t, b, "gain", ir.F32, randVals(rng, K, 1), K)
					var wt *ir.Value
					if merged {
						wt = b.Add(ir.OpConcat, nil, nil, gate, up)
					} else {
						// Rows are independent blocks in every dtype here,
						// so the gate bytes then the up bytes are the
						// [2F, K] weight.
						w["gate_up"] = append(append([]byte{}, w["gate"]...), w["up"]...)
						wt = b.Weight("gate_up", ir.Type{DType: dt, Shape: ir.S(2*F, K)})
					}
					attrs := ir.Attrs{"norm": flag(nm.norm), "gain": flag(nm.gain)}
					args := []*ir.Value{x, wt}
					n := x
					if nm.norm {
						attrs["eps"] = 1e-5
						var g *ir.Value
						if nm.gain {
							g = gain
							args = append(args, gain)
						}
						n = b.RMSNorm(x, g, 1e-5)
					}
					b.Output("fused", b.Add(ir.OpSwiGLU, attrs, nil, args...))
					b.Output("ref", b.Mul(b.SiLU(b.MatMul(n, gate, nil)), b.MatMul(n, up, nil)))
					out := runOnce(t, b, w, 8, map[string]eval.Tensor{"x": f32T(randVals(rng, 5*K, 1.5), 5, K)})
					require.Equal(t, []int64{5, F}, out["fused"].Shape)
					requireClose(t, out["fused"].F32, f64(out["ref"].F32), relTol, "swiglu")
				})
			}
		}
	}
}

// TestQKVRoPE: qkv_rope(x, concat(wq, wk, wv), pos, kcache, vcache [, gain]
// [, concat(bq, bk, bv)]) against three matmuls, two ropes and two kvwrites
// into a second pair of caches, over a prefill of 5 tokens and two decode
// steps. q is compared after every step, and both caches after every step
// (f32 and f16 caches; rope normal and neox, partial rotation, GQA).
func TestQKVRoPE(t *testing.T) {
	const K, H, Hkv, Dh, C = 32, 4, 2, 8, 8
	type variant struct {
		name       string
		norm, gain bool
		bias       bool
		rope       ir.Attrs
		wdt        ir.DType
	}
	normal := ir.Attrs{"head_dim": Dh, "n_rot": Dh, "base": 10000.0, "mode": "normal"}
	neox := ir.Attrs{"head_dim": Dh, "n_rot": 4, "base": 500.0, "mode": "neox", "freq_scale": 0.5}
	variants := []variant{
		{"plain", false, false, false, normal, ir.F32},
		{"norm", true, false, false, normal, ir.Q8_0},
		{"norm+gain", true, true, false, neox, ir.F32},
		{"bias", false, false, true, neox, ir.Q8_0},
		{"norm+gain+bias", true, true, true, normal, ir.F16},
		{"norm+bias neox partial", true, false, true, neox, ir.F32},
	}
	seed := uint64(1300)
	for _, cdt := range []ir.DType{ir.F32, ir.F16} {
		for _, vr := range variants {
			seed++
			t.Run(fmt.Sprintf("%s cache/%s", cdt, vr.name), func(t *testing.T) {
				rng := newRNG(seed)
				w := testWeights{}
				b := ir.NewBuilder("qkv_rope")
				x := b.Input("x", f32Type("T", K))
				pos := b.Input("pos", i32Type("T"))
				wq, _ := w.weight(t, b, "wq", vr.wdt, randVals(rng, H*Dh*K, 0.5), H*Dh, K)
				wk, _ := w.weight(t, b, "wk", vr.wdt, randVals(rng, Hkv*Dh*K, 0.5), Hkv*Dh, K)
				wv, _ := w.weight(t, b, "wv", vr.wdt, randVals(rng, Hkv*Dh*K, 0.5), Hkv*Dh, K)
				bq, _ := w.weight(t, b, "bq", ir.F32, randVals(rng, H*Dh, 1), H*Dh)
				bk, _ := w.weight(t, b, "bk", ir.F32, randVals(rng, Hkv*Dh, 1), Hkv*Dh)
				bv, _ := w.weight(t, b, "bv", ir.F32, randVals(rng, Hkv*Dh, 1), Hkv*Dh)
				gain, _ := w.weight(t, b, "gain", ir.F32, randVals(rng, K, 1), K)
				cache := ir.Type{DType: cdt, Shape: ir.S("C", Hkv*Dh)}
				fk, fv := b.State("fused.k", cache), b.State("fused.v", cache)
				rk, rv := b.State("ref.k", cache), b.State("ref.v", cache)

				attrs, err := vr.rope.Clone()
				require.NoError(t, err)
				for k, v := range map[string]any{"n_head": int64(H), "n_kv_head": int64(Hkv), "norm": flag(vr.norm), "gain": flag(vr.gain), "bias": flag(vr.bias)} {
					attrs[k] = v
				}
				args := []*ir.Value{x, b.Add(ir.OpConcat, nil, nil, wq, wk, wv), pos, fk, fv}
				n := x
				if vr.norm {
					attrs["eps"] = 1e-5
					var g *ir.Value
					if vr.gain {
						g = gain
						args = append(args, gain)
					}
					n = b.RMSNorm(x, g, 1e-5)
				}
				var biases [3]*ir.Value
				if vr.bias {
					args = append(args, b.Add(ir.OpConcat, nil, nil, bq, bk, bv))
					biases = [3]*ir.Value{bq, bk, bv}
				}
				b.Output("q", b.Add(ir.OpQKVRoPE, attrs, nil, args...))
				b.Output("qref", b.RoPE(b.MatMul(n, wq, biases[0]), pos, vr.rope))
				b.Output("ref.k", b.KVWrite(rk, b.RoPE(b.MatMul(n, wk, biases[1]), pos, vr.rope), pos))
				b.Output("ref.v", b.KVWrite(rv, b.MatMul(n, wv, biases[2]), pos))
				g, err := b.Finish()
				require.NoError(t, err)
				m, err := eval.New(g, w, C)
				require.NoError(t, err)
				p := 0
				for s, T := range []int{5, 1, 1} {
					out, err := m.Run(map[string]eval.Tensor{"x": f32T(randVals(rng, T*K, 1.5), int64(T), K), "pos": i32T(seq(p, T)...)})
					require.NoError(t, err)
					p += T
					requireClose(t, out["q"].F32, f64(out["qref"].F32), relTol, fmt.Sprintf("q, step %d", s))
					requireClose(t, m.State("fused.k").F32, f64(m.State("ref.k").F32), relTol, fmt.Sprintf("k cache, step %d", s))
					requireClose(t, m.State("fused.v").F32, f64(m.State("ref.v").F32), relTol, fmt.Sprintf("v cache, step %d", s))
					if cdt == ir.F16 {
						for i, e := range m.State("fused.k").F32 {
							require.Equal(t, refF16(e), e, "k cache element %d is not an f16 value", i)
						}
					}
				}
			})
		}
	}
}

// TestConcat: concat of quantized (and f16, f32) weights holds exactly the
// dequantized rows of each operand, stacked in order (checked bit for bit);
// a matmul against the concatenation gives the column blocks of the matmuls
// against each part (relTol); concat of per-step values stacks them too.
func TestConcat(t *testing.T) {
	const K = 64
	for i, dt := range []ir.DType{ir.Q8_0, ir.Q4_0, ir.F16, ir.F32} {
		t.Run(dt.String(), func(t *testing.T) {
			rng := newRNG(uint64(1400 + i))
			w := testWeights{}
			b := ir.NewBuilder("concat")
			rows := []int{3, 1, 5}
			var parts []*ir.Value
			var want []float64
			for j, n := range rows {
				v, deq := w.weight(t, b, fmt.Sprintf("p%d", j), dt, randVals(rng, n*K, 0.7), n, K)
				parts = append(parts, v)
				want = append(want, deq...)
			}
			c := b.Add(ir.OpConcat, nil, nil, parts...)
			require.Equal(t, ir.Type{DType: dt, Shape: ir.S(9, K)}, c.Type)
			x := b.Input("x", f32Type("T", K))
			b.Output("c", c)
			b.Output("merged", b.MatMul(x, c, nil))
			for j, p := range parts {
				b.Output(fmt.Sprintf("part%d", j), b.MatMul(x, p, nil))
			}
			const T = 4
			out := runOnce(t, b, w, 8, map[string]eval.Tensor{"x": f32T(randVals(rng, T*K, 1), T, K)})
			require.Equal(t, []int64{9, K}, out["c"].Shape)
			got := f64(out["c"].F32)
			require.Equal(t, want, got, "concat must hold the dequantized rows, in order")

			// Column blocks of the merged product.
			var ref []float64
			for r := 0; r < T; r++ {
				for j, n := range rows {
					ref = append(ref, f64(out[fmt.Sprintf("part%d", j)].F32[r*n:(r+1)*n])...)
				}
			}
			requireClose(t, out["merged"].F32, ref, relTol, "matmul against the concatenation")
		})
	}
	t.Run("values", func(t *testing.T) {
		rng := newRNG(1410)
		b := ir.NewBuilder("concat")
		a := b.Input("a", f32Type(2, 3))
		c := b.Input("c", f32Type(4, 3))
		b.Output("y", b.Add(ir.OpConcat, nil, nil, a, c))
		av, cv := randVals(rng, 6, 1), randVals(rng, 12, 1)
		out := runOnce(t, b, nil, 8, map[string]eval.Tensor{"a": f32T(av, 2, 3), "c": f32T(cv, 4, 3)})
		require.Equal(t, []int64{6, 3}, out["y"].Shape)
		require.Equal(t, append(append([]float32{}, av...), cv...), out["y"].F32)
	})
}

// TestFlashAttentionTiling: flash_attention against attention on the same
// operands, for every combination of tile_q ∈ {1, 2, 3, 16}, tile_kv ∈
// {1, 2, 3, 7, 64} (one row per tile up to tiles larger than the context)
// and kv_splits ∈ {1, 2, 3, 5, 16} (16 splits of a range of 1 to 10 visible
// rows leave most splits empty), over prefill and decode, GQA and MQA,
// sliding windows, sinks and Dv ≠ Dh. attention itself is checked against
// the textbook reference (refAttention) on the same inputs.
func TestFlashAttentionTiling(t *testing.T) {
	cases := []attnCase{
		{name: "prefill gqa 8/2", H: 8, Hkv: 2, Dh: 8, Dv: 8, C: 12, pos: seq(0, 9), scale: 1 / math.Sqrt(8)},
		{name: "prefill after 3 cached", H: 4, Hkv: 2, Dh: 4, Dv: 4, C: 10, pos: seq(3, 7), scale: 0.5},
		{name: "decode late", H: 8, Hkv: 2, Dh: 8, Dv: 8, C: 12, pos: []int32{10}, scale: 1 / math.Sqrt(8)},
		{name: "decode pos 0 (one visible row)", H: 2, Hkv: 1, Dh: 4, Dv: 4, C: 6, pos: []int32{0}, scale: 0.7},
		{name: "window 3 prefill", H: 4, Hkv: 2, Dh: 4, Dv: 4, C: 10, pos: seq(0, 10), window: 3, scale: 0.5},
		{name: "window 4 decode", H: 4, Hkv: 4, Dh: 4, Dv: 4, C: 12, pos: []int32{11}, window: 4, scale: 0.5},
		{name: "sinks prefill", H: 4, Hkv: 2, Dh: 6, Dv: 6, C: 7, pos: seq(0, 7), sinks: true, scale: 0.4},
		{name: "sinks decode", H: 4, Hkv: 2, Dh: 6, Dv: 6, C: 9, pos: []int32{8}, sinks: true, scale: 0.4},
		{name: "sinks window", H: 2, Hkv: 2, Dh: 5, Dv: 5, C: 8, pos: []int32{2, 7, 3}, window: 2, sinks: true, scale: 0.4},
		{name: "mqa Dv≠Dh", H: 4, Hkv: 1, Dh: 4, Dv: 6, C: 6, pos: seq(0, 6), scale: 0.5},
	}
	tileQs := []int{1, 2, 3, 16}
	tileKVs := []int{1, 2, 3, 7, 64}
	splits := []int{1, 2, 3, 5, 16}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := newRNG(uint64(1500 + i))
			w := testWeights{}
			b := ir.NewBuilder("flash")
			q := b.Input("q", f32Type("T", c.H*c.Dh))
			k := b.Input("k", f32Type("C", c.Hkv*c.Dh))
			v := b.Input("v", f32Type("C", c.Hkv*c.Dv))
			pos := b.Input("pos", i32Type("T"))
			var sinks *ir.Value
			var sinkRef []float64
			args := []*ir.Value{q, k, v, pos}
			if c.sinks {
				sinks, sinkRef = w.weight(t, b, "sinks", ir.F32, randVals(rng, c.H, 1.5), c.H)
				args = append(args, sinks)
			}
			attrs := ir.Attrs{"n_head": c.H, "n_kv_head": c.Hkv, "head_dim": c.Dh, "scale": c.scale}
			if c.window > 0 {
				attrs["window"] = c.window
			}
			b.Output("attention", b.Attention(q, k, v, pos, sinks, attrs))
			for _, tq := range tileQs {
				for _, tkv := range tileKVs {
					for _, s := range splits {
						fa, err := attrs.Clone()
						require.NoError(t, err)
						fa["tile_q"], fa["tile_kv"], fa["kv_splits"] = int64(tq), int64(tkv), int64(s)
						b.Output(fmt.Sprintf("q%d kv%d s%d", tq, tkv, s), b.Add(ir.OpFlashAttention, fa, nil, args...))
					}
				}
			}
			T := len(c.pos)
			qs := randVals(rng, T*c.H*c.Dh, 1.5)
			ks := randVals(rng, c.C*c.Hkv*c.Dh, 1.5)
			vs := randVals(rng, c.C*c.Hkv*c.Dv, 1)
			out := runOnce(t, b, w, int64(c.C), map[string]eval.Tensor{
				"q":   f32T(qs, int64(T), int64(c.H*c.Dh)),
				"k":   f32T(ks, int64(c.C), int64(c.Hkv*c.Dh)),
				"v":   f32T(vs, int64(c.C), int64(c.Hkv*c.Dv)),
				"pos": i32T(c.pos...),
			})
			ref := out["attention"]
			requireClose(t, ref.F32, refAttention(qs, ks, vs, c.pos, sinkRef, c), relTol, "attention")
			n := 0
			for name, got := range out {
				if name == "attention" {
					continue
				}
				n++
				require.Equal(t, ref.Shape, got.Shape, name)
				requireClose(t, got.F32, f64(ref.F32), relTol, "flash_attention "+name)
			}
			require.Equal(t, len(tileQs)*len(tileKVs)*len(splits), n)
		})
	}
}

// TestFusedInferErrors: operand counts that disagree with the flags, flags
// an op does not have, bad flag values and malformed operands are errors of
// ir.Infer (and so of the builder and ir.Verify), never a misread operand.
func TestFusedInferErrors(t *testing.T) {
	val := func(dt ir.DType, dims ...any) *ir.Value {
		return &ir.Value{Type: ir.Type{DType: dt, Shape: ir.S(dims...)}}
	}
	x := val(ir.F32, "T", 32)
	w := val(ir.Q8_0, 48, 32)
	vec := func(n int) *ir.Value { return val(ir.F32, n) }
	pos := val(ir.I32, "T")
	kc, vc := val(ir.F16, "C", 16), val(ir.F16, "C", 16)
	wqkv := val(ir.F32, 64, 32) // (4 + 2·2)·8 rows
	qkvAttrs := func(extra ir.Attrs) ir.Attrs {
		a := ir.Attrs{"n_head": int64(4), "n_kv_head": int64(2), "head_dim": int64(8), "n_rot": int64(8), "base": 10000.0}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	q, k, v := val(ir.F32, "T", 32), val(ir.F32, "C", 16), val(ir.F32, "C", 16)
	flash := func(extra ir.Attrs) ir.Attrs {
		a := ir.Attrs{"n_head": int64(4), "n_kv_head": int64(2), "head_dim": int64(8), "scale": 0.5, "tile_q": int64(16), "tile_kv": int64(64), "kv_splits": int64(4)}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	cases := []struct {
		name  string
		op    ir.Op
		args  []*ir.Value
		attrs ir.Attrs
		want  string
	}{
		{"bias flag without operand", ir.OpFusedMatMul, []*ir.Value{x, w}, ir.Attrs{"bias": int64(1)}, "fused_matmul with these flags takes 3 operands, got 2"},
		{"operand without flag", ir.OpFusedMatMul, []*ir.Value{x, w, vec(48)}, nil, "takes 2 operands, got 3"},
		{"residual and bias flags, one operand", ir.OpFusedMatMul, []*ir.Value{x, w, val(ir.F32, "T", 48)}, ir.Attrs{"bias": int64(1), "residual": int64(1)}, "takes 4 operands, got 3"},
		{"too many operands", ir.OpFusedMatMul, []*ir.Value{x, w, x, x, x, x}, nil, "fused_matmul takes 2 to 5 operands, got 6"},
		{"gain without norm", ir.OpFusedMatMul, []*ir.Value{x, w, vec(32)}, ir.Attrs{"gain": int64(1)}, "a gain operand needs norm = 1"},
		{"norm without eps", ir.OpFusedMatMul, []*ir.Value{x, w}, ir.Attrs{"norm": int64(1)}, "norm = 1 needs attribute eps"},
		{"norm flag 2", ir.OpFusedMatMul, []*ir.Value{x, w}, ir.Attrs{"norm": int64(2), "eps": 1e-5}, "flag norm must be 0 or 1, got 2"},
		{"bias flag -1", ir.OpFusedMatMul, []*ir.Value{x, w}, ir.Attrs{"bias": int64(-1)}, "flag bias must be 0 or 1, got -1"},
		{"bias of the wrong size", ir.OpFusedMatMul, []*ir.Value{x, w, vec(32)}, ir.Attrs{"bias": int64(1)}, "bias must be float[48]"},
		{"gain of the wrong size", ir.OpFusedMatMul, []*ir.Value{x, w, vec(48)}, ir.Attrs{"norm": int64(1), "eps": 1e-5, "gain": int64(1)}, "gain must be float[32]"},
		{"residual of the wrong type", ir.OpFusedMatMul, []*ir.Value{x, w, val(ir.F32, "T", 32)}, ir.Attrs{"residual": int64(1)}, "residual must be f32[T, 48]"},
		{"inner dims", ir.OpFusedMatMul, []*ir.Value{val(ir.F32, "T", 16), w}, nil, "inner dims differ"},
		{"swiglu residual", ir.OpSwiGLU, []*ir.Value{x, w, x}, ir.Attrs{"residual": int64(1)}, "swiglu has no residual operand"},
		{"swiglu bias", ir.OpSwiGLU, []*ir.Value{x, w, vec(48)}, ir.Attrs{"bias": int64(1)}, "swiglu has no bias operand"},
		{"swiglu gain flag without operand", ir.OpSwiGLU, []*ir.Value{x, w}, ir.Attrs{"norm": int64(1), "eps": 1e-5, "gain": int64(1)}, "swiglu with these flags takes 3 operands, got 2"},
		{"swiglu odd rows", ir.OpSwiGLU, []*ir.Value{x, val(ir.F32, 7, 32)}, nil, "must be an even constant"},
		{"qkv_rope too few operands", ir.OpQKVRoPE, []*ir.Value{x, wqkv, pos, kc}, qkvAttrs(nil), "qkv_rope takes 5 to 9 operands, got 4"},
		{"qkv_rope residual", ir.OpQKVRoPE, []*ir.Value{x, wqkv, pos, kc, vc, x}, qkvAttrs(ir.Attrs{"residual": int64(1)}), "qkv_rope has no residual operand"},
		{"qkv_rope bias flag without operand", ir.OpQKVRoPE, []*ir.Value{x, wqkv, pos, kc, vc}, qkvAttrs(ir.Attrs{"bias": int64(1)}), "takes 6 operands, got 5"},
		{"qkv_rope missing n_rot", ir.OpQKVRoPE, []*ir.Value{x, wqkv, pos, kc, vc}, ir.Attrs{"n_head": int64(4), "n_kv_head": int64(2), "head_dim": int64(8), "base": 1.0}, `qkv_rope needs attribute "n_rot"`},
		{"qkv_rope weight rows", ir.OpQKVRoPE, []*ir.Value{x, val(ir.F32, 48, 32), pos, kc, vc}, qkvAttrs(nil), "weight rows 48 ≠ (n_head + 2·n_kv_head)·head_dim = 64"},
		{"qkv_rope cache width", ir.OpQKVRoPE, []*ir.Value{x, wqkv, pos, val(ir.F32, "C", 8), vc}, qkvAttrs(nil), "kvwrite row widths differ"},
		{"flash_attention tile_kv 0", ir.OpFlashAttention, []*ir.Value{q, k, v, pos}, flash(ir.Attrs{"tile_kv": int64(0)}), "tile_kv must be a positive integer"},
		{"flash_attention float tile", ir.OpFlashAttention, []*ir.Value{q, k, v, pos}, flash(ir.Attrs{"tile_q": 16.0}), "tile_q must be a positive integer"},
		{"flash_attention without kv_splits", ir.OpFlashAttention, []*ir.Value{q, k, v, pos}, ir.Attrs{"n_head": int64(4), "n_kv_head": int64(2), "head_dim": int64(8), "scale": 0.5, "tile_q": int64(1), "tile_kv": int64(1)}, `flash_attention needs attribute "kv_splits"`},
		{"flash_attention three operands", ir.OpFlashAttention, []*ir.Value{q, k, v}, flash(nil), "flash_attention takes 4 to 5 operands, got 3"},
		{"flash_attention query width", ir.OpFlashAttention, []*ir.Value{val(ir.F32, "T", 16), k, v, pos}, flash(nil), "attention query must be [T, 32]"},
		{"flash_attention sinks", ir.OpFlashAttention, []*ir.Value{q, k, v, pos, vec(2)}, flash(nil), "attention sinks must be float[4]"},
		{"concat dtypes", ir.OpConcat, []*ir.Value{w, val(ir.F16, 8, 32)}, nil, "operand 1 is f16[8, 32], not stackable on q8_0[48, 32]"},
		{"concat trailing dims", ir.OpConcat, []*ir.Value{w, val(ir.Q8_0, 8, 64)}, nil, "not stackable"},
		{"concat symbolic rows", ir.OpConcat, []*ir.Value{w, val(ir.Q8_0, "C", 32)}, nil, "operand 1 has symbolic rows C"},
		{"concat of nothing", ir.OpConcat, nil, nil, "concat takes 1 to 64 operands, got 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ir.Infer(c.op, c.args, c.attrs)
			require.ErrorContains(t, err, c.want)
		})
	}

	// The builder reports the same errors, naming the op.
	b := ir.NewBuilder("bad")
	bx := b.Input("x", f32Type("T", 32))
	bw := b.Weight("w", ir.Type{DType: ir.F32, Shape: ir.S(48, 32)})
	b.Add(ir.OpFusedMatMul, ir.Attrs{"bias": 1}, nil, bx, bw)
	_, err := b.Finish()
	require.ErrorContains(t, err, "fused_matmul: fused_matmul with these flags takes 3 operands, got 2")

	// And a graph whose flags were edited after it was built fails Verify.
	b = ir.NewBuilder("edited")
	bx = b.Input("x", f32Type("T", 32))
	bw = b.Weight("w", ir.Type{DType: ir.F32, Shape: ir.S(48, 32)})
	fm := b.Add(ir.OpFusedMatMul, nil, nil, bx, bw)
	b.Output("y", fm)
	g, err := b.Finish()
	require.NoError(t, err)
	fm.Attrs = ir.Attrs{"residual": int64(1)}
	require.ErrorContains(t, ir.Verify(g), "takes 3 operands, got 2")
}
