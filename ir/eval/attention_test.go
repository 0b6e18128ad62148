package eval_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
)

// refF16 rounds x to the nearest binary16 value (ties to even), written
// from the format: 11 significant bits for normals, a fixed step of 2^-24
// below 2^-14, infinity from 65520 up.
func refF16(x float32) float32 {
	f := float64(x)
	if f == 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return x
	}
	a := math.Abs(f)
	_, exp := math.Frexp(a) // a = frac · 2^exp, frac in [0.5, 1)
	e := max(exp-1, -14)
	step := math.Ldexp(1, e-10)
	q := math.RoundToEven(a/step) * step
	if q > 65504 {
		q = math.Inf(1)
	}
	return float32(math.Copysign(q, f))
}

func TestRefF16(t *testing.T) {
	for _, c := range []struct{ in, want float32 }{
		{1, 1}, {-2.5, -2.5}, {65504, 65504}, {65519, 65504}, {65520, float32(math.Inf(1))},
		{1 + 1.0/2048, 1}, {1 + 3.0/2048, 1 + 2.0/1024}, // ties to even
		{0.1, 0.0999755859375}, {float32(math.Ldexp(1, -24)), float32(math.Ldexp(1, -24))},
		{float32(math.Ldexp(1, -26)), 0}, {float32(math.Ldexp(3, -26)), float32(math.Ldexp(1, -24))},
	} {
		require.Equal(t, c.want, refF16(c.in), "refF16(%v)", c.in)
	}
}

// TestKVWrite: rows pos[i] of the cache are replaced by x[i], the rest keep
// what they held; the state persists across Runs. An f32 cache stores the
// values exactly; an f16 cache stores exactly the f16-rounded values
// (subnormals, ties and overflow to infinity included). Checked bit for bit.
func TestKVWrite(t *testing.T) {
	cases := []struct {
		name  string
		dt    ir.DType
		C, W  int
		steps [][]int32
	}{
		{"f32 one row", ir.F32, 1, 3, [][]int32{{0}}},
		{"f32 prefill then decode", ir.F32, 9, 7, [][]int32{{0, 1, 2, 3, 4, 5, 6}, {7}, {8}}},
		{"f32 out of order and overwrite", ir.F32, 6, 5, [][]int32{{4, 1}, {1}, {5, 0, 2}}},
		{"f16 prefill then decode", ir.F16, 8, 5, [][]int32{{0, 1, 2}, {3}, {2, 7}}},
		{"f16 one column", ir.F16, 4, 1, [][]int32{{3, 0}, {1}}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := newRNG(uint64(700 + i))
			b := ir.NewBuilder("kvwrite")
			cache := b.State("cache", ir.Type{DType: c.dt, Shape: ir.S("C", c.W)})
			x := b.Input("x", f32Type("T", c.W))
			pos := b.Input("pos", i32Type("T"))
			b.Output("cache", b.KVWrite(cache, x, pos))
			g, err := b.Finish()
			require.NoError(t, err)
			m, err := eval.New(g, nil, int64(c.C))
			require.NoError(t, err)

			ref := make([]float32, c.C*c.W)
			for s, ps := range c.steps {
				xs := randVals(rng, len(ps)*c.W, 3)
				if c.dt == ir.F16 && s == 0 {
					// Values f16 cannot hold exactly: a tie, a subnormal, an
					// underflow and an overflow.
					edge := []float32{1 + 1.0/2048, float32(math.Ldexp(3, -25)), 1e-9, 70000, -65520}
					copy(xs, edge[:min(len(edge), len(xs))])
				}
				out, err := m.Run(map[string]eval.Tensor{"x": f32T(xs, int64(len(ps)), int64(c.W)), "pos": i32T(ps...)})
				require.NoError(t, err)
				for r, p := range ps {
					for d := 0; d < c.W; d++ {
						v := xs[r*c.W+d]
						if c.dt == ir.F16 {
							v = refF16(v)
						}
						ref[int(p)*c.W+d] = v
					}
				}
				got := out["cache"]
				require.Equal(t, []int64{int64(c.C), int64(c.W)}, got.Shape)
				require.Equal(t, bits(ref), bits(got.F32), "cache after step %d", s)
				require.Equal(t, bits(ref), bits(m.State("cache").F32), "machine state after step %d", s)
			}
		})
	}
}

func bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

// TestKVWriteOutOfRange: writing at a position ≥ C (or negative) is an
// error, not a panic or a silent wrap.
func TestKVWriteOutOfRange(t *testing.T) {
	for _, ps := range [][]int32{{4}, {2, 3, 4}, {-1}} {
		t.Run(fmt.Sprint(ps), func(t *testing.T) {
			b := ir.NewBuilder("kvwrite")
			cache := b.State("cache", ir.Type{DType: ir.F16, Shape: ir.S("C", 2)})
			b.Output("cache", b.KVWrite(cache, b.Input("x", f32Type("T", 2)), b.Input("pos", i32Type("T"))))
			g, err := b.Finish()
			require.NoError(t, err)
			m, err := eval.New(g, nil, 4)
			require.NoError(t, err)
			_, err = m.Run(map[string]eval.Tensor{"x": f32T(randVals(newRNG(1), 2*len(ps), 1), int64(len(ps)), 2), "pos": i32T(ps...)})
			require.ErrorContains(t, err, "outside the KV cache")
		})
	}
}

type attnCase struct {
	name      string
	H, Hkv    int
	Dh, Dv, C int
	pos       []int32
	window    int
	sinks     bool
	scale     float64
}

// refAttention is the textbook computation: the kv heads are first repeated
// H/Hkv times (kv head g serves query heads g·rep … g·rep+rep−1), then every
// query head does a masked softmax over all C cache rows, the mask keeping
// rows j ≤ pos and, with a window, pos − j < window. A sink adds exp(sink)
// to the denominator only.
func refAttention(q, k, v []float32, pos []int32, sinks []float64, c attnCase) []float64 {
	rep := c.H / c.Hkv
	kr := make([][]float64, c.C) // [C][H·Dh]
	vr := make([][]float64, c.C) // [C][H·Dv]
	for j := 0; j < c.C; j++ {
		kr[j] = make([]float64, c.H*c.Dh)
		vr[j] = make([]float64, c.H*c.Dv)
		for h := 0; h < c.H; h++ {
			g := h / rep
			for d := 0; d < c.Dh; d++ {
				kr[j][h*c.Dh+d] = float64(k[j*c.Hkv*c.Dh+g*c.Dh+d])
			}
			for d := 0; d < c.Dv; d++ {
				vr[j][h*c.Dv+d] = float64(v[j*c.Hkv*c.Dv+g*c.Dv+d])
			}
		}
	}
	out := make([]float64, len(pos)*c.H*c.Dv)
	for t, p := range pos {
		for h := 0; h < c.H; h++ {
			var score []float64
			var rows []int
			for j := 0; j < c.C; j++ {
				if j > int(p) || (c.window > 0 && int(p)-j >= c.window) {
					continue
				}
				s := 0.0
				for d := 0; d < c.Dh; d++ {
					s += float64(q[t*c.H*c.Dh+h*c.Dh+d]) * kr[j][h*c.Dh+d]
				}
				score = append(score, s*c.scale)
				rows = append(rows, j)
			}
			m := math.Inf(-1)
			for _, s := range score {
				m = math.Max(m, s)
			}
			if sinks != nil {
				m = math.Max(m, sinks[h])
			}
			den := 0.0
			for _, s := range score {
				den += math.Exp(s - m)
			}
			if sinks != nil {
				den += math.Exp(sinks[h] - m)
			}
			for n, j := range rows {
				w := math.Exp(score[n]-m) / den
				for d := 0; d < c.Dv; d++ {
					out[t*c.H*c.Dv+h*c.Dv+d] += w * vr[j][h*c.Dv+d]
				}
			}
		}
	}
	return out
}

func seq(from, n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(from + i)
	}
	return s
}

// attnGraph builds q f32[T, H·Dh], k f32[C, Hkv·Dh], v f32[C, Hkv·Dv] and
// pos i32[T] inputs (sinks an f32 weight) feeding one attention.
func attnGraph(t *testing.T, c attnCase, w testWeights, sinkVals []float32) (*ir.Graph, []float64) {
	t.Helper()
	b := ir.NewBuilder("attention")
	q := b.Input("q", f32Type("T", c.H*c.Dh))
	k := b.Input("k", f32Type("C", c.Hkv*c.Dh))
	v := b.Input("v", f32Type("C", c.Hkv*c.Dv))
	pos := b.Input("pos", i32Type("T"))
	var sinks *ir.Value
	var sd []float64
	if c.sinks {
		sinks, sd = w.weight(t, b, "sinks", ir.F32, sinkVals, c.H)
	}
	attrs := ir.Attrs{"n_head": c.H, "n_kv_head": c.Hkv, "head_dim": c.Dh, "scale": c.scale}
	if c.window > 0 {
		attrs["window"] = c.window
	}
	b.Output("y", b.Attention(q, k, v, pos, sinks, attrs))
	g, err := b.Finish()
	require.NoError(t, err)
	return g, sd
}

// TestAttention: causal attention over cache rows ≤ pos, GQA (8 query heads
// over 2 kv heads) against a reference that repeats the kv heads, a sliding
// window of 3 over 10 positions, sinks, Dv ≠ Dh, T=1 decode in the middle of
// a cache whose later rows hold data that must be ignored, and T>1 prefill
// after P cached positions. Tolerance relTol.
func TestAttention(t *testing.T) {
	cases := []attnCase{
		{name: "mha T=1 last row", H: 2, Hkv: 2, Dh: 4, Dv: 4, C: 6, pos: []int32{5}, scale: 0.5},
		{name: "mha T=1 pos 0 sees one row", H: 3, Hkv: 3, Dh: 5, Dv: 5, C: 4, pos: []int32{0}, scale: 0.7},
		{name: "gqa 8/2 prefill P=3 T=7", H: 8, Hkv: 2, Dh: 8, Dv: 8, C: 10, pos: seq(3, 7), scale: 1 / math.Sqrt(8)},
		{name: "gqa 8/2 decode mid-cache", H: 8, Hkv: 2, Dh: 8, Dv: 8, C: 10, pos: []int32{4}, scale: 1 / math.Sqrt(8)},
		{name: "mqa 4/1 prefill P=0", H: 4, Hkv: 1, Dh: 3, Dv: 3, C: 5, pos: seq(0, 5), scale: 1},
		{name: "window 3 over 10", H: 4, Hkv: 2, Dh: 4, Dv: 4, C: 10, pos: seq(0, 10), window: 3, scale: 0.5},
		{name: "window wider than context", H: 2, Hkv: 1, Dh: 4, Dv: 4, C: 6, pos: seq(0, 6), window: 100, scale: 0.5},
		{name: "window 1 sees itself", H: 2, Hkv: 2, Dh: 2, Dv: 2, C: 4, pos: seq(0, 4), window: 1, scale: 1},
		{name: "sinks", H: 4, Hkv: 2, Dh: 6, Dv: 6, C: 7, pos: seq(0, 7), sinks: true, scale: 0.4},
		{name: "sinks window decode", H: 2, Hkv: 2, Dh: 5, Dv: 5, C: 8, pos: []int32{2, 7}, window: 2, sinks: true, scale: 0.4},
		{name: "Dv ≠ Dh", H: 4, Hkv: 2, Dh: 4, Dv: 6, C: 5, pos: seq(0, 5), scale: 0.5},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := newRNG(uint64(800 + i))
			w := testWeights{}
			g, sinks := attnGraph(t, c, w, randVals(rng, c.H, 1.5))
			T := len(c.pos)
			qs := randVals(rng, T*c.H*c.Dh, 1.5)
			ks := randVals(rng, c.C*c.Hkv*c.Dh, 1.5)
			vs := randVals(rng, c.C*c.Hkv*c.Dv, 1)
			m, err := eval.New(g, w, int64(c.C))
			require.NoError(t, err)
			in := map[string]eval.Tensor{
				"q":   f32T(qs, int64(T), int64(c.H*c.Dh)),
				"k":   f32T(ks, int64(c.C), int64(c.Hkv*c.Dh)),
				"v":   f32T(vs, int64(c.C), int64(c.Hkv*c.Dv)),
				"pos": i32T(c.pos...),
			}
			out, err := m.Run(in)
			require.NoError(t, err)
			require.Equal(t, []int64{int64(T), int64(c.H * c.Dv)}, out["y"].Shape)
			requireClose(t, out["y"].F32, refAttention(qs, ks, vs, c.pos, sinks, c), relTol, "attention")
		})
	}
}

// TestAttentionIgnoresFutureRows: in a T=7 prefill at positions 3…9, the
// query at position p must not read cache rows > p. Rows after p are
// overwritten with large values: the outputs of queries at ≤ p stay bit for
// bit the same, and the later queries change (so the overwrite is seen).
func TestAttentionIgnoresFutureRows(t *testing.T) {
	c := attnCase{H: 4, Hkv: 2, Dh: 4, Dv: 4, C: 10, pos: seq(3, 7), scale: 0.5}
	rng := newRNG(900)
	g, _ := attnGraph(t, c, testWeights{}, nil)
	T := len(c.pos)
	qs := randVals(rng, T*c.H*c.Dh, 1)
	ks := randVals(rng, c.C*c.Hkv*c.Dh, 1)
	vs := randVals(rng, c.C*c.Hkv*c.Dv, 1)
	run := func(ks, vs []float32) []float32 {
		m, err := eval.New(g, nil, int64(c.C))
		require.NoError(t, err)
		out, err := m.Run(map[string]eval.Tensor{
			"q": f32T(qs, int64(T), 16), "k": f32T(ks, 10, 8), "v": f32T(vs, 10, 8), "pos": i32T(c.pos...),
		})
		require.NoError(t, err)
		return out["y"].F32
	}
	base := run(ks, vs)
	W := c.H * c.Dv
	for i, p := range c.pos[:T-1] {
		k2, v2 := append([]float32(nil), ks...), append([]float32(nil), vs...)
		for j := int(p) + 1; j < c.C; j++ {
			for d := 0; d < 8; d++ {
				k2[j*8+d] += 5
				v2[j*8+d] -= 50
			}
		}
		got := run(k2, v2)
		require.Equal(t, bits(base[:(i+1)*W]), bits(got[:(i+1)*W]), "queries up to position %d read a later row", p)
		for r := i + 1; r < T; r++ {
			require.NotEqual(t, bits(base[r*W:(r+1)*W]), bits(got[r*W:(r+1)*W]), "query %d did not see row change", r)
		}
	}
}

// TestAttentionPositionOutsideCache: a query position outside [0, C) has no
// meaning (the contract reads rows ≤ pos of a C-row cache): it is an error,
// not an index panic or a 0/0.
func TestAttentionPositionOutsideCache(t *testing.T) {
	c := attnCase{H: 2, Hkv: 1, Dh: 2, Dv: 2, C: 4, scale: 1}
	g, _ := attnGraph(t, c, testWeights{}, nil)
	for _, ps := range [][]int32{{4}, {1, 9}, {-1}} {
		t.Run(fmt.Sprint(ps), func(t *testing.T) {
			m, err := eval.New(g, nil, int64(c.C))
			require.NoError(t, err)
			rng := newRNG(901)
			var out map[string]eval.Tensor
			require.NotPanics(t, func() {
				out, err = m.Run(map[string]eval.Tensor{
					"q": f32T(randVals(rng, len(ps)*4, 1), int64(len(ps)), 4), "k": f32T(randVals(rng, 8, 1), 4, 2),
					"v": f32T(randVals(rng, 8, 1), 4, 2), "pos": i32T(ps...),
				})
			})
			require.Error(t, err, "got %v", out)
			require.ErrorContains(t, err, "outside the KV cache")
		})
	}
}
