package cpu_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime/cpu"
)

// Matmuls of one input reuse the activation rows the one before encoded
// when they read the same rows, norm (eps, gain) and encoding: the bits of
// encoding them again, and only then. A Q4_K_M layer's apart q, k and v
// projections are the case this serves (b reuses a's rows: Q4_K and Q6_K
// both read Q8_K); each of the others differs from the matmul before it in
// one thing alone (the gain, eps, the encoding, with as many bytes under
// Q8_2 rounding; the norm, which without it has eps 0 too), so a key that
// missed it would reuse the wrong rows and change the logits.
func TestMatMulReusesActs(t *testing.T) {
	for _, q82 := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "q8_2"}[q82], func(t *testing.T) { testActsReuse(t, q82) })
	}
}

// testActsReuse builds TestMatMulReusesActs' graph, rounding activations as
// ik_llama.cpp's Q8_2 when q82: then Q4_K weights read float rows rounded
// as Q8_2 and F32 weights plain float rows, as many bytes (m and n).
func testActsReuse(t *testing.T, q82 bool) {
	const V, D = 40, 256
	r := rand.New(rand.NewPCG(3, 9))
	b := ir.NewBuilder("acts")
	w := memWeights{}
	weight := func(name string, dt ir.DType, shape ...any) *ir.Value {
		n := 1
		for _, d := range shape {
			n *= d.(int)
		}
		w[name] = quantized(t, dt, normals(r, n, 0.3))
		return b.Weight(name, ir.Type{DType: dt, Shape: ir.S(shape...)})
	}
	tok := b.Input("tokens", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	x := b.Embed(weight("emb", ir.F32, V, D), tok)
	g1, g2 := weight("g1", ir.F32, D), weight("g2", ir.F32, D)
	xn := b.RMSNorm(x, g1, 1e-5)
	proj := func(in *ir.Value, name string, dt ir.DType) *ir.Value {
		return b.MatMul(in, weight(name, dt, V, D), nil)
	}
	logits := proj(xn, "a", ir.Q4_K)
	for _, m := range []*ir.Value{
		proj(xn, "b", ir.Q6_K),                      // reuses a's rows
		proj(x, "c", ir.Q4_K),                       // no norm
		proj(b.RMSNorm(x, g2, 1e-5), "d", ir.Q4_K),  // another gain
		proj(b.RMSNorm(x, g2, 1e-5), "e", ir.Q8_0),  // another encoding
		proj(b.RMSNorm(x, g1, 1e-5), "f", ir.Q8_0),  // another gain
		proj(b.RMSNorm(x, nil, 1e-5), "g", ir.Q8_0), // no gain
		proj(x, "h", ir.Q8_0),                       // no norm
		proj(b.RMSNorm(x, nil, 1e-5), "i", ir.Q8_0), // norm again
		proj(b.RMSNorm(x, nil, 1e-2), "j", ir.Q8_0), // another eps
		proj(b.RMSNorm(x, nil, 1e-2), "m", ir.Q4_K), // another encoding
		proj(b.RMSNorm(x, nil, 1e-2), "n", ir.F32),  // with q82, as many bytes
	} {
		logits = b.AddV(logits, m)
	}
	b.Output("logits", logits)
	g, err := b.Finish()
	require.NoError(t, err)
	if q82 {
		g.Attrs = ir.Attrs{ir.AttrActRounding: ir.ActRoundingQ8_2}
	}
	fuse(t, g)

	prompt, more := []int32{1, 5, 9, 2, 33, 7}, []int32{3, 39, 0}
	n, restore := cpu.CountActsReuse()
	defer restore()
	got := run(t, cpu.Backend{Threads: 2}, g, w, prompt, more)
	require.Equal(t, int64(1+len(more)), n.Load(), "b reuses a's rows in every step, no other matmul reuses")
	off := cpu.SetActsReuse(false)
	want := run(t, cpu.Backend{Threads: 2}, g, w, prompt, more)
	off()
	require.Equal(t, want, got, "reused rows give the bits of encoding them again")
	requireClose(t, run(t, reference(t), g, w, prompt, more), got, 2e-2, "against the reference")
}
