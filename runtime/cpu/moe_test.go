package cpu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/cpu"
	"github.com/minerva-llm/minerva/runtime/cpu/kern"
)

// moeGraph describes a small graph around one moe op: x and the router
// logits come from embedding tables (exact on both backends, so only the
// op under test can differ), route = topk_softmax(router logits), and the
// logits output is the moe result itself (or the route, for topk alone).
type moeGraph struct {
	dt       ir.DType // expert weights
	act      ir.Attrs
	biases   bool
	q82      bool // graph attribute act_rounding = q8_2
	onlyTopK bool // logits = the route weights
}

const (
	moeV, moeD, moeF, moeE, moeK = 12, 64, 96, 6, 2
	// poisoned is the expert whose router logit is far below the others on
	// every token, so that it is never selected.
	poisoned = moeE - 1
)

var (
	swigluOAI = ir.Attrs{"act": ir.MoEActSwiGLUOAI, "alpha": 1.702, "limit": 7.0}
	siluAct   = ir.Attrs{"act": ir.MoEActSiLU}
)

// quantized encodes float32 weights in dt.
func quantized(t testing.TB, dt ir.DType, f []float32) []byte {
	t.Helper()
	if dt == ir.F32 {
		b := make([]byte, 4*len(f))
		for i, v := range f {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	}
	n, err := dt.RowBytes(int64(len(f)))
	require.NoError(t, err)
	b := make([]byte, n)
	require.NoError(t, quant.Quantize(dt, f, b))
	return b
}

func normals(r *rand.Rand, n int, std float64) []float32 {
	f := make([]float32, n)
	for i := range f {
		f[i] = float32(r.NormFloat64() * std)
	}
	return f
}

func buildMoE(t *testing.T, o moeGraph, r *rand.Rand) (*ir.Graph, memWeights) {
	t.Helper()
	b := ir.NewBuilder("moe")
	w := memWeights{}
	weight := func(name string, dt ir.DType, f []float32, shape ...any) *ir.Value {
		w[name] = quantized(t, dt, f)
		return b.Weight(name, ir.Type{DType: dt, Shape: ir.S(shape...)})
	}
	tok := b.Input("tokens", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	// Inputs of magnitude ~2 and gate/up weights of gain 3 put a few
	// percent of the pre-activations past the ±7 clamp, as in gpt-oss.
	x := b.Embed(weight("emb", ir.F32, normals(r, moeV*moeD, 2), moeV, moeD), tok)
	rl := normals(r, moeV*moeE, 1)
	for v := 0; v < moeV; v++ {
		rl[v*moeE+poisoned] = -100
	}
	// Token 3's router logits tie (three equal values at the top): the lower
	// indices must win on both backends.
	for e := 0; e < 3; e++ {
		rl[3*moeE+e] = 0.5
	}
	route := b.TopKSoftmax(b.Embed(weight("router", ir.F32, rl, moeV, moeE), tok), moeK)
	if o.onlyTopK {
		b.Output("logits", route)
	} else {
		std := 3 / math.Sqrt(moeD)
		ew := ir.MoEWeights{
			Gate: weight("gate", o.dt, normals(r, moeE*moeF*moeD, std), moeE, moeF, moeD),
			Up:   weight("up", o.dt, normals(r, moeE*moeF*moeD, std), moeE, moeF, moeD),
			Down: weight("down", o.dt, normals(r, moeE*moeD*moeF, 0.5/math.Sqrt(moeF)), moeE, moeD, moeF),
		}
		if o.biases {
			ew.GateBias = weight("gate_b", ir.F32, normals(r, moeE*moeF, 0.3), moeE, moeF)
			ew.UpBias = weight("up_b", ir.F32, normals(r, moeE*moeF, 0.3), moeE, moeF)
			ew.DownBias = weight("down_b", ir.F32, normals(r, moeE*moeD, 0.3), moeE, moeD)
		}
		b.Output("logits", b.MoE(x, route, ew, o.act))
	}
	g, err := b.Finish()
	require.NoError(t, err)
	if o.q82 {
		g.Attrs = ir.Attrs{ir.AttrActRounding: ir.ActRoundingQ8_2}
	}
	return g, w
}

// The moe and topk_softmax ops on this backend against the interpreter on
// random inputs (never all zero), for every expert dtype the gpt-oss files
// use, both activations, with and without biases, ggml's and the Q8_2
// activation rounding. topk_softmax is computed in float64 in the same
// order as the interpreter, so it must be bit-identical (ties included).
// For moe the bound is relative to the largest |output| per row: 2e-6 for
// F32 experts (float32 against float64 sums) and 3e-2 for Q8_0 and MXFP4,
// where this backend rounds the activations of both matmuls to 8 bits and
// the interpreter does not (measured: see the log; about 1e-2).
func TestMoEMatchesReference(t *testing.T) {
	prompt := []int32{1, 5, 9, 3, 2, 11, 7, 0}
	more := []int32{3, 10, 4}
	cases := []struct {
		name string
		o    moeGraph
		tol  float64
	}{
		{"topk alone", moeGraph{onlyTopK: true}, 0},
		{"f32 swiglu_oai biases", moeGraph{dt: ir.F32, act: swigluOAI, biases: true}, 2e-6},
		{"f32 silu", moeGraph{dt: ir.F32, act: siluAct}, 2e-6},
		{"q8_0 swiglu_oai biases", moeGraph{dt: ir.Q8_0, act: swigluOAI, biases: true}, 3e-2},
		{"q8_0 swiglu_oai biases q8_2", moeGraph{dt: ir.Q8_0, act: swigluOAI, biases: true, q82: true}, 3e-2},
		{"mxfp4 swiglu_oai biases", moeGraph{dt: ir.MXFP4, act: swigluOAI, biases: true}, 3e-2},
		{"mxfp4 swiglu_oai biases q8_2", moeGraph{dt: ir.MXFP4, act: swigluOAI, biases: true, q82: true}, 3e-2},
		{"mxfp4 silu", moeGraph{dt: ir.MXFP4, act: siluAct}, 3e-2},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, w := buildMoE(t, c.o, rand.New(rand.NewPCG(uint64(i), 11)))
			want := run(t, reference(t), g, w, prompt, more)
			for _, row := range want {
				require.NotZero(t, maxAbs(row), "an all-zero output row tests nothing")
			}
			var first [][]float32
			for _, th := range []int{1, 4} {
				got := run(t, cpu.Backend{Threads: th}, g, w, prompt, more)
				if c.tol == 0 {
					require.Equal(t, want, got, "threads %d", th)
					continue
				}
				worst := 0.0
				for r := range want {
					worst = max(worst, relErr(got[r], want[r]))
				}
				t.Logf("threads %d: worst row error %.3g (tolerance %.0e)", th, worst, c.tol)
				require.LessOrEqual(t, worst, c.tol)
				// The split of work over workers never changes a result.
				if first == nil {
					first = got
				} else {
					require.Equal(t, first, got, "threads 1 against %d", th)
				}
			}
		})
	}
}

func maxAbs(f []float32) float64 {
	m := 0.0
	for _, v := range f {
		m = max(m, math.Abs(float64(v)))
	}
	return m
}

// relErr is max|a−b| / max|b| over one row.
func relErr(a, b []float32) float64 {
	d := 0.0
	for i := range b {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d / maxAbs(b)
}

// poison overwrites expert e of an [E, ...] expert tensor with values that
// decode to NaN or ±Inf: F32 NaN bits; Q8_0 blocks with an f16 NaN scale;
// MXFP4 blocks with the largest exponent (2^127) and quants of ±12, whose
// product overflows float32.
func poison(dt ir.DType, b []byte, e, E int) {
	per := len(b) / E
	blk := b[e*per : (e+1)*per]
	switch dt {
	case ir.F32:
		for i := 0; i+4 <= len(blk); i += 4 {
			binary.LittleEndian.PutUint32(blk[i:], 0x7fc00000)
		}
	case ir.Q8_0:
		for i := 0; i+34 <= len(blk); i += 34 {
			blk[i], blk[i+1] = 0x00, 0x7e
		}
	case ir.MXFP4:
		for i := 0; i+17 <= len(blk); i += 17 {
			blk[i] = 0xff
			for j := 1; j < 17; j++ {
				blk[i+j] = 0x7f
			}
		}
	}
}

// moe reads only the selected experts: with every weight and bias of an
// expert that no token selects turned into NaN or Inf, the output is finite
// and equal to that of the intact weights. As a control, the same poison in
// a selected expert does reach the output, so it is not a harmless value.
func TestMoEReadsOnlySelectedExperts(t *testing.T) {
	prompt := []int32{1, 5, 9, 3, 2, 11, 7, 0}
	more := []int32{3, 10}
	for i, dt := range []ir.DType{ir.F32, ir.Q8_0, ir.MXFP4} {
		for _, q82 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s q8_2=%v", dt, q82), func(t *testing.T) {
				o := moeGraph{dt: dt, act: swigluOAI, biases: true, q82: q82}
				g, w := buildMoE(t, o, rand.New(rand.NewPCG(uint64(i), 5)))
				want := run(t, cpu.Backend{Threads: 3}, g, w, prompt, more)

				bad := memWeights{}
				for k, v := range w {
					bad[k] = append([]byte(nil), v...)
				}
				for _, name := range []string{"gate", "up", "down"} {
					poison(dt, bad[name], poisoned, moeE)
				}
				for _, name := range []string{"gate_b", "up_b", "down_b"} {
					poison(ir.F32, bad[name], poisoned, moeE)
				}
				got := run(t, cpu.Backend{Threads: 3}, g, bad, prompt, more)
				require.Equal(t, want, got, "an unselected expert's weights changed the output")

				// Control: route token 5's top choice to the poisoned expert.
				rl := bad["router"]
				binary.LittleEndian.PutUint32(rl[4*(5*moeE+poisoned):], math.Float32bits(100))
				got = run(t, cpu.Backend{Threads: 3}, g, bad, prompt, more)
				finite := true
				for _, v := range got[1] { // prompt row 1 is token 5
					finite = finite && !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0)
				}
				require.False(t, finite, "the poison does not reach the output of a selected expert")
			})
		}
	}
}

// Bad moe and topk graphs are one-line compile errors, never panics.
func TestMoEBadGraphs(t *testing.T) {
	cases := []struct {
		name   string
		change func(g *ir.Graph)
		want   string
	}{
		{"unknown act_rounding", func(g *ir.Graph) { g.Attrs = ir.Attrs{ir.AttrActRounding: "q4"} }, "act_rounding"},
		{"unknown activation", func(g *ir.Graph) {
			for _, v := range g.Values {
				if v.Op == ir.OpMoE {
					v.Attrs = ir.Attrs{"act": "relu"}
				}
			}
		}, "relu"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, w := buildMoE(t, moeGraph{dt: ir.MXFP4, act: swigluOAI, biases: true}, rand.New(rand.NewPCG(1, 1)))
			c.change(g)
			_, err := cpu.Backend{Threads: 2}.Compile(g, w, runtime.ProgramConfig{Context: 8})
			require.ErrorContains(t, err, c.want)
		})
	}
}

// TestMoEPackedMatchesUnpacked: where a kernel variant packs the experts
// (eight-row groups, kern.Pack), the moe op gives what the generic
// variant's row-by-row dots give within 1e-5 of each row's largest
// |output|: both take the same exact integer block dots and differ only in
// the order of the float block sums. A packing variant packs an expert's
// three matrices when a step first selects it: none at compile, all but
// the never-selected one after the prompt.
func TestMoEPackedMatchesUnpacked(t *testing.T) {
	prompt := []int32{1, 5, 9, 3, 2, 11, 7, 0}
	more := []int32{3, 10, 4}
	orig := kern.Variant()
	t.Cleanup(func() { _ = kern.SetVariant(orig) })
	for i, o := range []moeGraph{
		{dt: ir.Q8_0, act: swigluOAI, biases: true},
		{dt: ir.MXFP4, act: swigluOAI, biases: true, q82: true},
		{dt: ir.MXFP4, act: siluAct},
	} {
		g, w := buildMoE(t, o, rand.New(rand.NewPCG(uint64(40+i), 11)))
		require.NoError(t, kern.SetVariant("generic"))
		want := run(t, cpu.Backend{Threads: 2}, g, w, prompt, more)
		for _, v := range kern.Variants() {
			if v == "generic" || v == "neon" {
				continue
			}
			require.NoError(t, kern.SetVariant(v))
			if !kern.PackedSupported(o.dt) {
				continue
			}
			t.Run(fmt.Sprintf("%s/%s/%d", o.dt, v, i), func(t *testing.T) {
				p, err := cpu.Backend{Threads: 2}.Compile(g, w, runtime.ProgramConfig{Context: 32})
				require.NoError(t, err)
				n, ok := cpu.PackedExperts(p)
				require.True(t, ok)
				require.Zero(t, n, "experts packed before any step selected them")
				_, err = p.Step(0, prompt, []int32{0, 1, 2, 3, 4, 5, 6, 7})
				require.NoError(t, err)
				n, _ = cpu.PackedExperts(p)
				// The prompt selects every expert but the poisoned one;
				// each has three tensors.
				require.Equal(t, 3*(moeE-1), n, "experts packed after the prompt")
				require.NoError(t, p.Close())
				got := run(t, cpu.Backend{Threads: 2}, g, w, prompt, more)
				worst := 0.0
				for r := range want {
					worst = max(worst, relErr(got[r], want[r]))
				}
				t.Logf("worst row error %.3g against generic (tolerance 1e-5)", worst)
				require.LessOrEqual(t, worst, 1e-5)
			})
		}
	}
}
