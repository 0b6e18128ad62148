package eval_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/quant"
)

// TestRoundActivations: with Machine.RoundActivations naming Q8_0, a
// fused_matmul with RMSNorm and gain over Q8_0 weights equals a naive
// float64 product of the normalised rows rounded to Q8_0 (quantize then
// decode) with the decoded weights, within 1e-5·max; an F32-weight product
// in the same graph is not rounded (it equals the float product); and the
// rounding is visible: the rounded product differs from the float one by
// more than 1e-4·max.
func TestRoundActivations(t *testing.T) {
	const K, N, T = 128, 16, 3
	rng := newRNG(1700)
	w := testWeights{}
	b := ir.NewBuilder("round")
	x := b.Input("x", f32Type("T", K))
	wq, deq := w.weight(t, b, "wq", ir.Q8_0, randVals(rng, N*K, 0.5), N, K)
	wf, _ := w.weight(t, b, "wf", ir.F32, randVals(rng, N*K, 0.5), N, K)
	gain, _ := w.weight(t, b, "gain", ir.F32, randVals(rng, K, 1), K)
	attrs := ir.Attrs{"norm": 1, "gain": 1, "eps": 1e-5}
	b.Output("q", b.Add(ir.OpFusedMatMul, attrs, nil, x, wq, gain))
	b.Output("f", b.Add(ir.OpFusedMatMul, attrs, nil, x, wf, gain))
	b.Output("n", b.RMSNorm(x, gain, 1e-5))
	b.Output("fref", b.MatMul(b.RMSNorm(x, gain, 1e-5), wf, nil))
	g, err := b.Finish()
	require.NoError(t, err)
	in := map[string]eval.Tensor{"x": f32T(randVals(rng, T*K, 1.5), T, K)}

	run := func(round bool) map[string]eval.Tensor {
		m, err := eval.New(g, w, 4)
		require.NoError(t, err)
		if round {
			m.RoundActivations = func(dt ir.DType) bool { return dt == ir.Q8_0 }
		}
		out, err := m.Run(in)
		require.NoError(t, err)
		return out
	}
	out := run(true)

	n := out["n"].F32
	blocks := make([]byte, K/32*34)
	rounded := make([]float32, K)
	ref := make([]float64, T*N)
	for r := 0; r < T; r++ {
		require.NoError(t, quant.Quantize(ir.Q8_0, n[r*K:(r+1)*K], blocks))
		require.NoError(t, quant.Dequantize(ir.Q8_0, blocks, rounded))
		for j := 0; j < N; j++ {
			var acc float64
			for k := 0; k < K; k++ {
				acc += float64(rounded[k]) * deq[j*K+k]
			}
			ref[r*N+j] = acc
		}
	}
	requireClose(t, out["q"].F32, ref, 1e-5, "rounded q8_0 product")
	requireClose(t, out["f"].F32, f64(out["fref"].F32), 1e-5, "f32 product (not rounded)")

	plain := run(false)["q"].F32
	worst, scale := 0.0, 0.0
	for i, v := range plain {
		worst = math.Max(worst, math.Abs(float64(v-out["q"].F32[i])))
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	require.Greater(t, worst, 1e-4*scale, "rounding the activations changed nothing")
}
