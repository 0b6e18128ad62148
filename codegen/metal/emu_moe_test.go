package metal_test

import (
	"github.com/minerva-llm/minerva/codegen/gpu/gputest"
	"github.com/minerva-llm/minerva/ir"
)

// The gpt-oss kernels: router selection (topk_softmax), the expert block
// (moe: selected experts only, biases, clamped SwiGLU), YaRN RoPE, and f16
// gain, bias, sink and broadcast operands. Same tolerances as emu_test.go:
// 1e-5 of max |ref| for float weights, 1e-4 for quantized ones.
func moeEmuCases(seeds *gputest.Seeds) []gputest.Case {
	// topk_softmax: E = 8 (gpt-oss G1), E = 40 (two logits per lane) and
	// k = E = 33, with logits on a 0.5 grid.
	cases := gputest.Cases(seeds, []gputest.TopK{{E: 8, K: 2, T: 3}, {E: 40, K: 4, T: 5}, {E: 33, K: 33, T: 2}}...)

	// moe: router logits → topk_softmax → moe, as the gpt-oss graph has it
	// (slots = k), for MXFP4, Q8_0 and F32 experts; and a route given as an
	// input (slots = E) whose rows select 0, 1 and 3 experts. The clamp
	// limit is small enough that both clamps bite on these inputs: with
	// either clamp removed from the kernel, every swiglu_oai case fails by
	// 3e-2…0.74 of max |ref| (checked by hand, last with the f32 biases in).
	oai := ir.Attrs{"act": ir.MoEActSwiGLUOAI, "alpha": 1.702, "limit": 3.0}
	cases = append(cases, gputest.Cases(seeds, []gputest.MoE{
		{Name: "mxfp4/oai/bias", DT: ir.MXFP4, Down: ir.MXFP4, Biases: true, Attrs: oai, E: 8, K: 2, T: 3, F: 96, D: 64},
		{Name: "q8_0/oai/bias_f16", DT: ir.Q8_0, Down: ir.Q8_0, Biases: true, BiasDT: ir.F16, Attrs: oai, E: 6, K: 3, T: 2, F: 64, D: 96},
		{Name: "f32/oai/bias", DT: ir.F32, Down: ir.F32, Biases: true, Attrs: oai, E: 8, K: 2, T: 2, F: 40, D: 24},
		{Name: "q8_0_mxfp4/silu/route_input", DT: ir.Q8_0, Down: ir.MXFP4, Attrs: ir.Attrs{"act": ir.MoEActSiLU}, Route: gputest.RouteSparse, E: 5, T: 3, F: 64, D: 64},
	}...)...)

	// qkv_rope with YaRN as gpt-oss configures it, and with an
	// attn_factor ≠ 1, normal mode, n_rot < head_dim, f16 cache.
	cases = append(cases, gputest.Cases(seeds, gputest.YaRNCases()...)...)

	// f16 small operands: matvec gain and bias, rmsnorm gain, a broadcast
	// factor, attention sinks.
	cases = append(cases, gputest.MatVec{Name: "f16_operands/fused_matmul", DT: ir.Q8_0, Norm: true, Gain: true, Bias: true,
		GainDT: ir.F16, BiasDT: ir.F16, T: 2, N: 10, K: 128}.Case(seeds.Next()))
	cases = append(cases, gputest.Cases(seeds, gputest.RowOps("f16_operands/", "rmsnorm_f16gain", "mul_broadcast_f16")...)...)
	return append(cases, gputest.Attention{Name: "f16_operands/attention_sinks", Cache: ir.F32, Splits: 2, Window: 8, Sinks: true, SinksDT: ir.F16,
		HD: 16, DV: 16, H: 4, KV: 2, Ctx: 40, Scale: 0.25, Pos: []int32{5, 39}}.Case(seeds.Next()))
}
