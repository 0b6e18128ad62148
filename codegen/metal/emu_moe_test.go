package metal_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
)

// The gpt-oss kernels: router selection (topk_softmax), the expert block
// (moe: selected experts only, biases, clamped SwiGLU), YaRN RoPE, and f16
// gain, bias, sink and broadcast operands. Same tolerances as emu_test.go:
// 1e-5 of max |ref| for float weights, 1e-4 for quantized ones.
func moeEmuCases(seed *uint64) []emuCase {
	var cases []emuCase
	next := func() uint64 { *seed++; return *seed }

	// topk_softmax: E = 8 (gpt-oss G1), and E = 40 (two logits per lane)
	// with logits on a 0.5 grid, so equal logits are common and the lower
	// index must win as in ir/eval's stable sort.
	for _, c := range []struct{ e, k, T int }{{8, 2, 3}, {40, 4, 5}, {33, 33, 2}} {
		s := next()
		cases = append(cases, emuCase{name: fmt.Sprintf("topk_softmax/e%d_k%d", c.e, c.k), ctx: 1, T: c.T, tol: 1e-5,
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				k := newKit(t, "topk", s)
				x := k.b.Input("x", f32T("T", c.e))
				logits := k.vals(c.T*c.e, 2)
				for i := range logits {
					logits[i] = float32(math.Round(float64(logits[i])*2) / 2)
				}
				return k.finish(k.b.TopKSoftmax(x, c.k)), k.w, map[string]eval.Tensor{
					"x": {Shape: []int64{int64(c.T), int64(c.e)}, F32: logits}}
			}})
	}

	// moe: router logits → topk_softmax → moe, as the gpt-oss graph has it
	// (slots = k), for MXFP4, Q8_0 and F32 experts; and a route given as an
	// input (slots = E) whose rows select 0, 1 and 3 experts. The clamp
	// limit is small enough that both clamps bite on these inputs: with
	// either clamp removed from the kernel, every swiglu_oai case fails by
	// 1e-2…1 of max |ref| (checked by hand when the kernels were written).
	oai := ir.Attrs{"act": ir.MoEActSwiGLUOAI, "alpha": 1.702, "limit": 3.0}
	for _, c := range []struct {
		name     string
		dt, down ir.DType
		bias     ir.DType // 0: no biases
		attrs    ir.Attrs
		topk     bool
		e, k, T  int
		f, d     int
	}{
		{"mxfp4/oai/bias", ir.MXFP4, ir.MXFP4, ir.F32, oai, true, 8, 2, 3, 96, 64},
		{"q8_0/oai/bias_f16", ir.Q8_0, ir.Q8_0, ir.F16, oai, true, 6, 3, 2, 64, 96},
		{"f32/oai/bias", ir.F32, ir.F32, ir.F32, oai, true, 8, 2, 2, 40, 24},
		{"q8_0_mxfp4/silu/route_input", ir.Q8_0, ir.MXFP4, 0, ir.Attrs{"act": ir.MoEActSiLU}, false, 5, 0, 3, 64, 64},
	} {
		s := next()
		tol := 1e-4
		if c.dt == ir.F32 && c.down == ir.F32 {
			tol = 1e-5
		}
		cases = append(cases, emuCase{name: "moe/" + c.name, ctx: 1, T: c.T, tol: tol,
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				k := newKit(t, "moe", s)
				x := k.b.Input("x", f32T("T", c.d))
				var route *ir.Value
				in := map[string]eval.Tensor{"x": {Shape: []int64{int64(c.T), int64(c.d)}, F32: k.vals(c.T*c.d, 2)}}
				if c.topk {
					route = k.b.TopKSoftmax(k.b.Input("logits", f32T("T", c.e)), c.k)
					in["logits"] = eval.Tensor{Shape: []int64{int64(c.T), int64(c.e)}, F32: k.vals(c.T*c.e, 3)}
				} else {
					route = k.b.Input("route", f32T("T", c.e))
					r := make([]float32, c.T*c.e)
					r[1*c.e+3] = 0.7                                       // row 1: one expert
					r[2*c.e+0], r[2*c.e+2], r[2*c.e+c.e-1] = 0.2, 0.5, 0.3 // row 2: three; row 0: none
					in["route"] = eval.Tensor{Shape: []int64{int64(c.T), int64(c.e)}, F32: r}
				}
				w := ir.MoEWeights{
					Gate: k.weight("gate", c.dt, 0.5, c.e, c.f, c.d),
					Up:   k.weight("up", c.dt, 0.5, c.e, c.f, c.d),
					Down: k.weight("down", c.down, 0.5, c.e, c.d, c.f),
				}
				if c.bias != 0 {
					w.GateBias = k.weight("bg", c.bias, 1, c.e, c.f)
					w.UpBias = k.weight("bu", c.bias, 1, c.e, c.f)
					w.DownBias = k.weight("bd", c.bias, 1, c.e, c.d)
				}
				out := k.b.MoE(x, route, w, c.attrs)
				return k.finish(out), k.w, in
			}})
	}

	// qkv_rope with YaRN as gpt-oss configures it (neox, base 150000,
	// freq_scale 1/32, orig_ctx 4096, attn_factor 1 scaled by
	// 1 + 0.1·ln 32), positions up to 3000; and with an attn_factor ≠ 1,
	// normal mode, n_rot < head_dim, f16 cache.
	for _, c := range []struct {
		dt, cache ir.DType
		mode      string
		nrot      int64
		af        float64
	}{{ir.F32, ir.F32, "neox", 16, 1}, {ir.MXFP4, ir.F16, "normal", 12, 0.8}} {
		s := next()
		tol := 1e-5
		if c.dt != ir.F32 {
			tol = 1e-4
		}
		cases = append(cases, emuCase{name: fmt.Sprintf("qkv_rope_yarn/%s/%s/cache=%s", c.dt, c.mode, c.cache), ctx: 3100, T: 3, tol: tol,
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				const K, H, HKV, HD = 64, 4, 2, 16
				k := newKit(t, "qkv", s)
				x := k.b.Input("x", f32T("T", K))
				pos := k.b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
				kc := k.b.State("cache.k", ir.Type{DType: c.cache, Shape: ir.S("C", HKV*HD)})
				vc := k.b.State("cache.v", ir.Type{DType: c.cache, Shape: ir.S("C", HKV*HD)})
				attrs := ir.Attrs{"n_head": int64(H), "n_kv_head": int64(HKV), "head_dim": int64(HD), "n_rot": c.nrot,
					"base": 150000.0, "freq_scale": 1.0 / 32, "mode": c.mode, "ext_factor": 1.0, "attn_factor": c.af,
					"beta_fast": 32.0, "beta_slow": 1.0, "orig_ctx": int64(4096), "norm": int64(1), "eps": 1e-5, "bias": int64(1)}
				args := []*ir.Value{x, k.weight("w", c.dt, 1, (H+2*HKV)*HD, K), pos, kc, vc, k.weight("bias", ir.F32, 1, (H+2*HKV)*HD)}
				out := k.b.Add(ir.OpQKVRoPE, attrs, nil, args...)
				return k.finish(out, kc, vc), k.w, map[string]eval.Tensor{
					"x":   {Shape: []int64{3, K}, F32: k.vals(3*K, 2)},
					"pos": {Shape: []int64{3}, I32: []int32{0, 45, 3071}},
				}
			}})
	}

	// f16 small operands: matvec gain and bias, rmsnorm gain, a broadcast
	// factor, attention sinks.
	{
		s := next()
		cases = append(cases, emuCase{name: "f16_operands/fused_matmul", ctx: 1, T: 2, tol: 1e-4,
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				const K, N = 128, 10
				k := newKit(t, "f16ops", s)
				x := k.b.Input("x", f32T("T", K))
				out := k.b.Add(ir.OpFusedMatMul, ir.Attrs{"norm": int64(1), "eps": 1e-5, "gain": int64(1), "bias": int64(1)}, nil,
					x, k.weight("w", ir.Q8_0, 1, N, K), k.weight("gain", ir.F16, 1, K), k.weight("bias", ir.F16, 1, N))
				return k.finish(out), k.w, map[string]eval.Tensor{"x": {Shape: []int64{2, K}, F32: k.vals(2*K, 2)}}
			}})
	}
	for _, c := range []struct {
		name string
		op   func(k *graphKit, x *ir.Value) *ir.Value
	}{
		{"rmsnorm", func(k *graphKit, x *ir.Value) *ir.Value { return k.b.RMSNorm(x, k.weight("g", ir.F16, 1, 70), 1e-6) }},
		{"mul_broadcast", func(k *graphKit, x *ir.Value) *ir.Value { return k.b.Mul(x, k.weight("g", ir.F16, 1, 70)) }},
	} {
		s := next()
		cases = append(cases, emuCase{name: "f16_operands/" + c.name, ctx: 1, T: 3, tol: 1e-5,
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				k := newKit(t, c.name, s)
				x := k.b.Input("x", f32T("T", 70))
				return k.finish(c.op(k, x)), k.w, map[string]eval.Tensor{"x": {Shape: []int64{3, 70}, F32: k.vals(210, 3)}}
			}})
	}
	{
		s := next()
		cases = append(cases, emuCase{name: "f16_operands/attention_sinks", ctx: 40, T: 2, tol: 1e-5,
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				const C, H, KV, HD = 40, 4, 2, 16
				k := newKit(t, "sinks", s)
				q := k.b.Input("q", f32T("T", H*HD))
				pos := k.b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
				attrs := ir.Attrs{"n_head": int64(H), "n_kv_head": int64(KV), "head_dim": int64(HD), "scale": 0.25,
					"tile_q": int64(16), "tile_kv": int64(8), "kv_splits": int64(2), "window": int64(8)}
				out := k.b.Add(ir.OpFlashAttention, attrs, nil, q, k.weight("k", ir.F32, 1, C, KV*HD), k.weight("v", ir.F32, 1, C, KV*HD),
					pos, k.weight("sinks", ir.F16, 2, H))
				return k.finish(out), k.w, map[string]eval.Tensor{
					"q":   {Shape: []int64{2, H * HD}, F32: k.vals(2*H*HD, 1)},
					"pos": {Shape: []int64{2}, I32: []int32{5, 39}},
				}
			}})
	}
	return cases
}
