package eval_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
)

const (
	blkD, blkH, blkHkv, blkDh = 32, 4, 2, 8
	blkKV                     = blkHkv * blkDh
)

// blockGraph is one attention block of a decoder: rmsnorm, q (q8_0), k (f16,
// with bias), v (f32) projections, rope, kvwrite into caches of cacheDT,
// GQA attention and a residual output projection.
func blockGraph(t *testing.T, cacheDT ir.DType) (*ir.Graph, testWeights) {
	t.Helper()
	rng := newRNG(1000)
	w := testWeights{}
	b := ir.NewBuilder("block")
	x := b.Input("x", f32Type("T", blkD))
	pos := b.Input("pos", i32Type("T"))
	gain, _ := w.weight(t, b, "gain", ir.F32, randVals(rng, blkD, 1), blkD)
	wq, _ := w.weight(t, b, "wq", ir.Q8_0, randVals(rng, blkD*blkD, 0.3), blkD, blkD)
	wk, _ := w.weight(t, b, "wk", ir.F16, randVals(rng, blkKV*blkD, 0.3), blkKV, blkD)
	bk, _ := w.weight(t, b, "bk", ir.F32, randVals(rng, blkKV, 0.1), blkKV)
	wv, _ := w.weight(t, b, "wv", ir.F32, randVals(rng, blkKV*blkD, 0.3), blkKV, blkD)
	wo, _ := w.weight(t, b, "wo", ir.F32, randVals(rng, blkD*blkD, 0.3), blkD, blkD)
	n := b.RMSNorm(x, gain, 1e-5)
	rope := ir.Attrs{"head_dim": blkDh, "n_rot": blkDh, "base": 10000.0, "mode": "normal"}
	q := b.RoPE(b.MatMul(n, wq, nil), pos, rope)
	k := b.RoPE(b.MatMul(n, wk, bk), pos, rope)
	v := b.MatMul(n, wv, nil)
	cache := ir.Type{DType: cacheDT, Shape: ir.S("C", blkKV)}
	kc := b.KVWrite(b.State("cache.k", cache), k, pos)
	vc := b.KVWrite(b.State("cache.v", cache), v, pos)
	a := b.Attention(q, kc, vc, pos, nil, ir.Attrs{"n_head": blkH, "n_kv_head": blkHkv, "head_dim": blkDh, "scale": 1 / math.Sqrt(blkDh)})
	b.Output("y", b.AddV(x, b.MatMul(a, wo, nil)))
	b.Output("cache.k", kc)
	b.Output("cache.v", vc)
	g, err := b.Finish()
	require.NoError(t, err)
	return g, w
}

// runChunks feeds the rows of xs to m in consecutive Runs of the given
// sizes, starting at position 0, and returns the y rows concatenated.
func runChunks(t *testing.T, m *eval.Machine, xs []float32, chunks []int) []float32 {
	t.Helper()
	var y []float32
	p := 0
	for _, n := range chunks {
		out, err := m.Run(map[string]eval.Tensor{
			"x":   f32T(xs[p*blkD:(p+n)*blkD], int64(n), blkD),
			"pos": i32T(seq(p, n)...),
		})
		require.NoError(t, err)
		y = append(y, out["y"].F32...)
		p += n
	}
	return y
}

// TestPromptEqualsTokenByToken: a 7-token prompt computed in one Run equals
// the same prompt computed one token at a time, or in uneven chunks, with
// the KV cache persisting in the Machine between Runs; the caches end up
// equal too. f32 and f16 caches. Tolerance relTol · max|one-Run result|.
func TestPromptEqualsTokenByToken(t *testing.T) {
	const prompt, ctx = 7, 9
	xs := randVals(newRNG(1001), prompt*blkD, 1)
	for _, dt := range []ir.DType{ir.F32, ir.F16} {
		t.Run(dt.String(), func(t *testing.T) {
			g, w := blockGraph(t, dt)
			whole, err := eval.New(g, w, ctx)
			require.NoError(t, err)
			ref := runChunks(t, whole, xs, []int{prompt})
			for _, chunks := range [][]int{{1, 1, 1, 1, 1, 1, 1}, {3, 4}, {2, 5}, {6, 1}} {
				m, err := eval.New(g, w, ctx)
				require.NoError(t, err)
				got := runChunks(t, m, xs, chunks)
				requireClose(t, got, f64(ref), relTol, "y")
				for _, name := range []string{"cache.k", "cache.v"} {
					requireClose(t, m.State(name).F32[:prompt*blkKV], f64(whole.State(name).F32[:prompt*blkKV]), relTol, name)
					require.Equal(t, make([]float32, (ctx-prompt)*blkKV), m.State(name).F32[prompt*blkKV:], "%s rows after the prompt stay empty", name)
				}
			}
		})
	}
}

// TestReset: Reset zeroes every state buffer, so a machine that ran a
// prompt and was reset computes a step at position 3 exactly like a fresh
// machine (rows 0…2 empty); without Reset the stale rows change the result.
func TestReset(t *testing.T) {
	g, w := blockGraph(t, ir.F32)
	xs := randVals(newRNG(1002), 7*blkD, 1)
	step := map[string]eval.Tensor{"x": f32T(xs[:blkD], 1, blkD), "pos": i32T(3)}

	fresh, err := eval.New(g, w, 8)
	require.NoError(t, err)
	want, err := fresh.Run(step)
	require.NoError(t, err)

	m, err := eval.New(g, w, 8)
	require.NoError(t, err)
	runChunks(t, m, xs, []int{7})
	stale, err := m.Run(step)
	require.NoError(t, err)
	require.NotEqual(t, bits(want["y"].F32), bits(stale["y"].F32), "stale cache rows must matter, or this test proves nothing")

	runChunks(t, m, xs, []int{7})
	m.Reset()
	for _, name := range []string{"cache.k", "cache.v"} {
		require.Equal(t, make([]float32, 8*blkKV), m.State(name).F32, "%s after Reset", name)
	}
	got, err := m.Run(step)
	require.NoError(t, err)
	require.Equal(t, bits(want["y"].F32), bits(got["y"].F32))
}

// TestRunInputErrors: missing inputs, wrong ranks and sizes, a symbol bound
// to two values, data that does not fill the shape and data of the wrong
// element type are all errors naming the input.
func TestRunInputErrors(t *testing.T) {
	b := ir.NewBuilder("errs")
	x := b.Input("x", f32Type("T", 4))
	pos := b.Input("pos", i32Type("T"))
	k := b.Input("k", f32Type("C", 4))
	b.Output("y", b.RoPE(x, pos, ir.Attrs{"head_dim": 4, "n_rot": 4, "base": 10000.0}))
	b.Output("k", b.SiLU(k))
	g, err := b.Finish()
	require.NoError(t, err)
	rng := newRNG(1003)
	good := func() map[string]eval.Tensor {
		return map[string]eval.Tensor{
			"x":   f32T(randVals(rng, 8, 1), 2, 4),
			"pos": i32T(5, 6),
			"k":   f32T(randVals(rng, 24, 1), 6, 4),
		}
	}
	cases := []struct {
		name   string
		change func(map[string]eval.Tensor)
		want   string
	}{
		{"missing x", func(in map[string]eval.Tensor) { delete(in, "x") }, `input "x" not given`},
		{"missing pos", func(in map[string]eval.Tensor) { delete(in, "pos") }, `input "pos" not given`},
		{"x rank 1", func(in map[string]eval.Tensor) { in["x"] = f32T(randVals(rng, 4, 1), 4) }, `input "x"`},
		{"x rank 3", func(in map[string]eval.Tensor) { in["x"] = f32T(randVals(rng, 8, 1), 1, 2, 4) }, `input "x"`},
		{"x width 5", func(in map[string]eval.Tensor) { in["x"] = f32T(randVals(rng, 10, 1), 2, 5) }, `input "x"`},
		{"T bound twice", func(in map[string]eval.Tensor) { in["pos"] = i32T(5, 6, 7) }, "symbol T"},
		{"C differs from the context", func(in map[string]eval.Tensor) { in["k"] = f32T(randVals(rng, 20, 1), 5, 4) }, "symbol C"},
		{"too few values", func(in map[string]eval.Tensor) { in["x"] = f32T(randVals(rng, 7, 1), 2, 4) }, `input "x"`},
		{"too many values", func(in map[string]eval.Tensor) { in["pos"] = eval.Tensor{Shape: []int64{2}, I32: []int32{1, 2, 3}} }, `input "pos"`},
		{"ids given as f32", func(in map[string]eval.Tensor) { in["pos"] = f32T([]float32{5, 6}, 2) }, `input "pos"`},
		{"floats given as i32", func(in map[string]eval.Tensor) {
			in["x"] = eval.Tensor{Shape: []int64{2, 4}, I32: []int32{1, 2, 3, 4, 5, 6, 7, 8}}
		}, `input "x"`},
	}
	m, err := eval.New(g, nil, 6)
	require.NoError(t, err)
	_, err = m.Run(good())
	require.NoError(t, err, "the unchanged inputs must run")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := good()
			c.change(in)
			_, err := m.Run(in)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// TestNewErrors: a non-positive context and a graph that does not verify
// are rejected when the machine is made.
func TestNewErrors(t *testing.T) {
	b := ir.NewBuilder("ok")
	b.Output("y", b.SiLU(b.Input("x", f32Type("T", 3))))
	g, err := b.Finish()
	require.NoError(t, err)
	for _, ctx := range []int64{0, -1} {
		_, err := eval.New(g, nil, ctx)
		require.ErrorContains(t, err, "context length")
	}
	g.Values[1].Type = f32Type("T", 4) // silu's recorded type no longer matches its operand
	_, err = eval.New(g, nil, 4)
	require.ErrorContains(t, err, "invalid graph")
}

// TestWeightErrors: weight bytes of the wrong length for the declared dtype
// and shape, a weight the source does not have, and no source at all are
// errors naming the weight.
func TestWeightErrors(t *testing.T) {
	cases := []struct {
		name  string
		dt    ir.DType
		N, K  int
		bytes int // stored length; -1: not stored
		src   bool
		want  string
	}{
		{"f32 one byte short", ir.F32, 3, 4, 47, true, `weight "w" has 47 bytes`},
		{"f32 one element long", ir.F32, 3, 4, 52, true, `weight "w" has 52 bytes`},
		{"f16 stored as f32", ir.F16, 3, 4, 48, true, `weight "w" has 48 bytes`},
		{"q8_0 one block short", ir.Q8_0, 2, 32, 34, true, `weight "w" has 34 bytes`},
		{"missing from the source", ir.F32, 3, 4, -1, true, `"w"`},
		{"no source", ir.F32, 3, 4, 48, false, `"w"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := ir.NewBuilder("w")
			x := b.Input("x", f32Type("T", c.K))
			wv := b.Weight("w", ir.Type{DType: c.dt, Shape: ir.S(c.N, c.K)})
			b.Output("y", b.MatMul(x, wv, nil))
			g, err := b.Finish()
			require.NoError(t, err)
			w := testWeights{}
			if c.bytes >= 0 {
				w["w"] = make([]byte, c.bytes)
			}
			var src eval.Weights
			if c.src {
				src = w
			}
			m, err := eval.New(g, src, 1)
			require.NoError(t, err)
			_, err = m.Run(map[string]eval.Tensor{"x": f32T(randVals(newRNG(1004), c.K, 1), 1, int64(c.K))})
			require.ErrorContains(t, err, c.want)
		})
	}
}
