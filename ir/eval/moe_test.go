package eval_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
)

// refTopKSoftmax follows the topk_softmax contract by repeated selection: k
// times, the largest logit not yet chosen (the lowest index on a tie); then
// the softmax over the chosen logits.
func refTopKSoftmax(x []float32, T, E, k int) []float64 {
	out := make([]float64, T*E)
	for t := 0; t < T; t++ {
		row := x[t*E : (t+1)*E]
		chosen := map[int]bool{}
		for n := 0; n < k; n++ {
			best := -1
			for e := range row {
				if !chosen[e] && (best < 0 || row[e] > row[best]) {
					best = e
				}
			}
			chosen[best] = true
		}
		m := math.Inf(-1)
		for e := range chosen {
			m = math.Max(m, float64(row[e]))
		}
		var sum float64
		for e := range chosen {
			sum += math.Exp(float64(row[e]) - m)
		}
		for e := range chosen {
			out[t*E+e] = math.Exp(float64(row[e])-m) / sum
		}
	}
	return out
}

// TestTopKSoftmax: the router selection against repeated selection, for k
// from 1 to E, and a row of ties (the lower index must win). Tolerance
// relTol; the set of non-zero entries must be exactly the reference's.
func TestTopKSoftmax(t *testing.T) {
	cases := []struct {
		name    string
		T, E, k int
		logits  []float32 // nil: random
	}{
		{"gpt-oss 32 experts top 4", 5, 32, 4, nil},
		{"top 1", 3, 8, 1, nil},
		{"top 2 of 8 decode", 1, 8, 2, nil},
		{"k = E is a plain softmax", 2, 6, 6, nil},
		{"ties go to the lower index", 2, 6, 3, []float32{1, 2, 2, 2, 2, 0.5, -1, 3, -1, -1, 3, -1}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := c.logits
			if x == nil {
				x = randVals(newRNG(uint64(900+i)), c.T*c.E, 2)
			}
			b := ir.NewBuilder("topk")
			in := b.Input("x", f32Type("T", c.E))
			b.Output("y", b.TopKSoftmax(in, c.k))
			out := runOnce(t, b, nil, 1, map[string]eval.Tensor{"x": f32T(x, int64(c.T), int64(c.E))})["y"]
			ref := refTopKSoftmax(x, c.T, c.E, c.k)
			for j := range ref {
				require.Equalf(t, ref[j] != 0, out.F32[j] != 0, "element %d: selection differs", j)
			}
			requireClose(t, out.F32, ref, relTol, "topk_softmax")
		})
	}
}

// moeCase is one mixture-of-experts configuration.
type moeCase struct {
	name       string
	T, D, F, E int
	k          int
	dt         ir.DType
	bias       bool
	act        string
}

// refMoE computes the moe contract in float64 from the dequantized weights:
// for every expert with a non-zero route weight, g = Wg·x + bg, u = Wu·x + bu,
// a = act(g, u), y = Wd·a + bd, summed with the route weights. It also counts
// the pre-activations the swiglu_oai clamp changed.
func refMoE(c moeCase, x, route []float32, wg, wu, wd, bg, bu, bd []float64) (out []float64, clamped int) {
	out = make([]float64, c.T*c.D)
	for t := 0; t < c.T; t++ {
		for e := 0; e < c.E; e++ {
			r := float64(route[t*c.E+e])
			if r == 0 {
				continue
			}
			a := make([]float64, c.F)
			for f := 0; f < c.F; f++ {
				var g, u float64
				for d := 0; d < c.D; d++ {
					g += wg[(e*c.F+f)*c.D+d] * float64(x[t*c.D+d])
					u += wu[(e*c.F+f)*c.D+d] * float64(x[t*c.D+d])
				}
				if bg != nil {
					g += bg[e*c.F+f]
					u += bu[e*c.F+f]
				}
				switch c.act {
				case ir.MoEActSiLU:
					a[f] = g / (1 + math.Exp(-g)) * u
				case ir.MoEActSwiGLUOAI:
					if g > 7 {
						g, clamped = 7, clamped+1
					}
					if math.Abs(u) > 7 {
						u, clamped = math.Copysign(7, u), clamped+1
					}
					a[f] = g / (1 + math.Exp(-1.702*g)) * (u + 1)
				}
			}
			for d := 0; d < c.D; d++ {
				y := 0.0
				for f := 0; f < c.F; f++ {
					y += wd[(e*c.D+d)*c.F+f] * a[f]
				}
				if bd != nil {
					y += bd[e*c.D+d]
				}
				out[t*c.D+d] += r * y
			}
		}
	}
	return out, clamped
}

// randRoute gives every token k distinct experts with positive weights
// (not summing to 1, which moe does not need) and zeros elsewhere.
func randRoute(seed uint64, T, E, k int) []float32 {
	rng := newRNG(seed)
	route := make([]float32, T*E)
	for t := 0; t < T; t++ {
		for _, e := range rng.Perm(E)[:k] {
			route[t*E+e] = float32(0.1 + rng.Float64())
		}
	}
	return route
}

// TestMoE: the moe op against refMoE with f32 and MXFP4 expert weights, with
// and without biases, both activations, prefill and decode. Gate and up are
// scaled (as in the gpt-oss fixtures) so that the ±7 clamp is hit, which the
// test checks. Tolerance relTol.
func TestMoE(t *testing.T) {
	cases := []moeCase{
		{"swiglu_oai f32 biases prefill", 5, 64, 96, 8, 2, ir.F32, true, ir.MoEActSwiGLUOAI},
		{"swiglu_oai mxfp4 biases decode", 1, 64, 32, 8, 4, ir.MXFP4, true, ir.MoEActSwiGLUOAI},
		{"swiglu_oai mxfp4 prefill", 6, 96, 64, 4, 2, ir.MXFP4, true, ir.MoEActSwiGLUOAI},
		{"silu f32 no biases", 3, 16, 24, 6, 3, ir.F32, false, ir.MoEActSiLU},
		{"one expert of one", 2, 32, 32, 1, 1, ir.F32, true, ir.MoEActSwiGLUOAI},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := newRNG(uint64(1000 + i))
			w := testWeights{}
			b := ir.NewBuilder("moe")
			x := b.Input("x", f32Type("T", c.D))
			route := b.Input("route", f32Type("T", c.E))
			gain := 3 / math.Sqrt(float64(c.D))
			gate, wg := w.weight(t, b, "gate", c.dt, randVals(rng, c.E*c.F*c.D, gain), c.E, c.F, c.D)
			up, wu := w.weight(t, b, "up", c.dt, randVals(rng, c.E*c.F*c.D, gain), c.E, c.F, c.D)
			down, wd := w.weight(t, b, "down", c.dt, randVals(rng, c.E*c.D*c.F, 0.5/math.Sqrt(float64(c.F))), c.E, c.D, c.F)
			mw := ir.MoEWeights{Gate: gate, Up: up, Down: down}
			var bg, bu, bd []float64
			if c.bias {
				mw.GateBias, bg = w.weight(t, b, "gate_b", ir.F32, randVals(rng, c.E*c.F, 0.3), c.E, c.F)
				mw.UpBias, bu = w.weight(t, b, "up_b", ir.F32, randVals(rng, c.E*c.F, 0.3), c.E, c.F)
				mw.DownBias, bd = w.weight(t, b, "down_b", ir.F32, randVals(rng, c.E*c.D, 0.3), c.E, c.D)
			}
			attrs := ir.Attrs{"act": c.act}
			if c.act == ir.MoEActSwiGLUOAI {
				attrs["alpha"], attrs["limit"] = 1.702, 7.0
			}
			b.Output("y", b.MoE(x, route, mw, attrs))
			xs := randVals(rng, c.T*c.D, 1)
			rs := randRoute(uint64(1100+i), c.T, c.E, c.k)
			out := runOnce(t, b, w, 1, map[string]eval.Tensor{
				"x": f32T(xs, int64(c.T), int64(c.D)), "route": f32T(rs, int64(c.T), int64(c.E)),
			})["y"]
			require.Equal(t, []int64{int64(c.T), int64(c.D)}, out.Shape)
			ref, clamped := refMoE(c, xs, rs, wg, wu, wd, bg, bu, bd)
			if c.act == ir.MoEActSwiGLUOAI && c.F*c.T*c.k >= 512 {
				require.Positive(t, clamped, "the inputs never reach the clamp, so the test would not see it")
			}
			requireClose(t, out.F32, ref, relTol, "moe")
		})
	}
}

// TestMoEReadsOnlySelectedExperts: experts a token does not select are not
// computed, so infinite weights in them do not reach the output. A kernel may
// rely on this to read only the selected experts' weights.
func TestMoEReadsOnlySelectedExperts(t *testing.T) {
	const T, D, F, E = 2, 32, 32, 4
	rng := newRNG(77)
	w := testWeights{}
	b := ir.NewBuilder("moe")
	x := b.Input("x", f32Type("T", D))
	route := b.Input("route", f32Type("T", E))
	poison := func(vals []float32, e int) []float32 {
		per := len(vals) / E
		for i := e * per; i < (e+1)*per; i++ {
			vals[i] = float32(math.Inf(1))
		}
		return vals
	}
	gate, wg := w.weight(t, b, "gate", ir.F32, poison(randVals(rng, E*F*D, 0.3), 2), E, F, D)
	up, wu := w.weight(t, b, "up", ir.F32, poison(randVals(rng, E*F*D, 0.3), 2), E, F, D)
	down, wd := w.weight(t, b, "down", ir.F32, poison(randVals(rng, E*D*F, 0.3), 2), E, D, F)
	b.Output("y", b.MoE(x, route, ir.MoEWeights{Gate: gate, Up: up, Down: down}, ir.Attrs{"act": ir.MoEActSiLU}))
	xs := randVals(rng, T*D, 1)
	rs := []float32{0.7, 0.3, 0, 0, 0, 0, 0, 1} // expert 2 (infinite weights) is never selected
	out := runOnce(t, b, w, 1, map[string]eval.Tensor{"x": f32T(xs, T, D), "route": f32T(rs, T, E)})["y"]
	ref, _ := refMoE(moeCase{T: T, D: D, F: F, E: E, act: ir.MoEActSiLU}, xs, rs, wg, wu, wd, nil, nil, nil)
	requireClose(t, out.F32, ref, relTol, "moe with a poisoned unselected expert")
}

// TestRouterThenMoE: matmul + bias → topk_softmax → moe, the gpt-oss block,
// against the references composed by hand.
func TestRouterThenMoE(t *testing.T) {
	const T, D, F, E, k = 4, 32, 64, 8, 2
	c := moeCase{T: T, D: D, F: F, E: E, k: k, act: ir.MoEActSwiGLUOAI}
	rng := newRNG(78)
	w := testWeights{}
	b := ir.NewBuilder("router")
	x := b.Input("x", f32Type("T", D))
	wr, wrd := w.weight(t, b, "router", ir.F32, randVals(rng, E*D, 1.5/math.Sqrt(D)), E, D)
	br, brd := w.weight(t, b, "router_b", ir.F32, randVals(rng, E, 0.3), E)
	gate, wg := w.weight(t, b, "gate", ir.F32, randVals(rng, E*F*D, 3/math.Sqrt(D)), E, F, D)
	up, wu := w.weight(t, b, "up", ir.F32, randVals(rng, E*F*D, 3/math.Sqrt(D)), E, F, D)
	down, wd := w.weight(t, b, "down", ir.F32, randVals(rng, E*D*F, 0.5/math.Sqrt(F)), E, D, F)
	route := b.TopKSoftmax(b.MatMul(x, wr, br), k)
	b.Output("route", route)
	b.Output("y", b.MoE(x, route, ir.MoEWeights{Gate: gate, Up: up, Down: down}, ir.Attrs{"act": ir.MoEActSwiGLUOAI, "alpha": 1.702, "limit": 7.0}))
	xs := randVals(rng, T*D, 1)
	out := runOnce(t, b, w, 1, map[string]eval.Tensor{"x": f32T(xs, T, D)})

	logits := make([]float32, T*E)
	for i := 0; i < T; i++ {
		for e := 0; e < E; e++ {
			s := brd[e]
			for d := 0; d < D; d++ {
				s += wrd[e*D+d] * float64(xs[i*D+d])
			}
			logits[i*E+e] = float32(s)
		}
	}
	refRoute := refTopKSoftmax(logits, T, E, k)
	requireClose(t, out["route"].F32, refRoute, relTol, "route")
	rs := make([]float32, len(refRoute))
	for i, r := range refRoute {
		rs[i] = float32(r)
	}
	ref, _ := refMoE(c, xs, rs, wg, wu, wd, nil, nil, nil)
	requireClose(t, out["y"].F32, ref, relTol, "moe after the router")
}
