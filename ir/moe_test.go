package ir

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// buildMoE is a gpt-oss style expert block: router matmul + bias →
// topk_softmax → moe with MXFP4 experts and f32 biases.
func buildMoE() *Builder {
	b := NewBuilder("moe")
	x := b.Input("x", typ(F32, "T", 64))
	logits := b.MatMul(x, b.Weight("router", typ(F32, 8, 64)), b.Weight("router_b", typ(F32, 8)))
	route := b.TopKSoftmax(logits, 2)
	y := b.MoE(x, route, MoEWeights{
		Gate: b.Weight("gate", typ(MXFP4, 8, 32, 64)), Up: b.Weight("up", typ(MXFP4, 8, 32, 64)),
		Down:     b.Weight("down", typ(MXFP4, 8, 64, 32)),
		GateBias: b.Weight("gate_b", typ(F32, 8, 32)), UpBias: b.Weight("up_b", typ(F32, 8, 32)),
		DownBias: b.Weight("down_b", typ(F32, 8, 64)),
	}, Attrs{"act": MoEActSwiGLUOAI, "alpha": 1.702, "limit": 7.0})
	b.Output("y", y)
	return b
}

// TestMoERoundTrip: the moe ops print and parse back to the same graph.
func TestMoERoundTrip(t *testing.T) {
	g, err := buildMoE().Finish()
	require.NoError(t, err)
	require.Equal(t, Type{F32, S("T", 64)}, g.Output("y").Type)
	text := Print(g)
	parsed, err := Parse(text)
	require.NoError(t, err, "\n%s", text)
	require.Equal(t, text, Print(parsed))
	requireSameGraph(t, g, parsed)
}

// TestMoEInferErrors: every malformed router or expert block is refused at
// build time with an error naming the fault.
func TestMoEInferErrors(t *testing.T) {
	oai := Attrs{"act": MoEActSwiGLUOAI, "alpha": 1.702, "limit": 7.0}
	cases := []struct {
		name  string
		build func(b *Builder)
		want  string
	}{
		{"k = 0", func(b *Builder) { b.TopKSoftmax(b.Input("l", typ(F32, "T", 8)), 0) }, "0 < k"},
		{"k > E", func(b *Builder) { b.TopKSoftmax(b.Input("l", typ(F32, "T", 8)), 9) }, "k=9"},
		{"topk of ids", func(b *Builder) { b.TopKSoftmax(b.Input("l", typ(I32, "T")), 1) }, "must be f32"},
		{"no act", func(b *Builder) { moeWith(b, nil, 8, 32, 64, false) }, `needs attribute "act"`},
		{"unknown act", func(b *Builder) { moeWith(b, Attrs{"act": "gelu"}, 8, 32, 64, false) }, `"gelu"`},
		{"swiglu_oai without limit", func(b *Builder) {
			moeWith(b, Attrs{"act": MoEActSwiGLUOAI, "alpha": 1.702}, 8, 32, 64, false)
		}, "limit"},
		{"swiglu_oai without alpha", func(b *Builder) {
			moeWith(b, Attrs{"act": MoEActSwiGLUOAI, "limit": 7.0}, 8, 32, 64, false)
		}, "alpha"},
		{"down not transposed", func(b *Builder) {
			x := b.Input("x", typ(F32, "T", 64))
			r := b.Input("r", typ(F32, "T", 8))
			b.MoE(x, r, MoEWeights{
				Gate: b.Weight("g", typ(F32, 8, 32, 64)), Up: b.Weight("u", typ(F32, 8, 32, 64)),
				Down: b.Weight("d", typ(F32, 8, 32, 64)),
			}, oai)
		}, "down weights must be [8, 64, 32]"},
		{"route has another expert count", func(b *Builder) {
			x := b.Input("x", typ(F32, "T", 64))
			r := b.Input("r", typ(F32, "T", 4))
			w := func(n string, s ...any) *Value { return b.Weight(n, typ(F32, s...)) }
			b.MoE(x, r, MoEWeights{Gate: w("g", 8, 32, 64), Up: w("u", 8, 32, 64), Down: w("d", 8, 64, 32)}, oai)
		}, "gate weights must be [4, 32, 64]"},
		{"2-D experts", func(b *Builder) {
			x := b.Input("x", typ(F32, "T", 64))
			r := b.Input("r", typ(F32, "T", 8))
			w := func(n string, s ...any) *Value { return b.Weight(n, typ(F32, s...)) }
			b.MoE(x, r, MoEWeights{Gate: w("g", 32, 64), Up: w("u", 32, 64), Down: w("d", 64, 32)}, oai)
		}, "[E, F, D]"},
		{"bias of the wrong shape", func(b *Builder) {
			x := b.Input("x", typ(F32, "T", 64))
			r := b.Input("r", typ(F32, "T", 8))
			w := func(n string, s ...any) *Value { return b.Weight(n, typ(F32, s...)) }
			b.MoE(x, r, MoEWeights{Gate: w("g", 8, 32, 64), Up: w("u", 8, 32, 64), Down: w("d", 8, 64, 32),
				GateBias: w("bg", 8, 32), UpBias: w("bu", 8, 32), DownBias: w("bd", 8, 32)}, oai)
		}, "down bias must be float[8, 64]"},
		{"one bias missing", func(b *Builder) {
			x := b.Input("x", typ(F32, "T", 64))
			r := b.Input("r", typ(F32, "T", 8))
			w := func(n string, s ...any) *Value { return b.Weight(n, typ(F32, s...)) }
			b.MoE(x, r, MoEWeights{Gate: w("g", 8, 32, 64), Up: w("u", 8, 32, 64), Down: w("d", 8, 64, 32),
				GateBias: w("bg", 8, 32), UpBias: w("bu", 8, 32)}, oai)
		}, "nil operand"},
		{"route rows differ from x rows", func(b *Builder) {
			x := b.Input("x", typ(F32, "T", 64))
			r := b.Input("r", typ(F32, 3, 8))
			w := func(n string, s ...any) *Value { return b.Weight(n, typ(F32, s...)) }
			b.MoE(x, r, MoEWeights{Gate: w("g", 8, 32, 64), Up: w("u", 8, 32, 64), Down: w("d", 8, 64, 32)}, oai)
		}, "x[T, D] and route[T, E]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBuilder("bad")
			require.NotPanics(t, func() { c.build(b) })
			_, err := b.Finish()
			require.Error(t, err)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// moeWith builds a well-shaped moe with the given attributes.
func moeWith(b *Builder, attrs Attrs, e, f, d int, bias bool) *Value {
	x := b.Input("x", typ(F32, "T", d))
	r := b.Input("r", typ(F32, "T", e))
	w := MoEWeights{Gate: b.Weight("g", typ(F32, e, f, d)), Up: b.Weight("u", typ(F32, e, f, d)), Down: b.Weight("d", typ(F32, e, d, f))}
	if bias {
		w.GateBias, w.UpBias, w.DownBias = b.Weight("bg", typ(F32, e, f)), b.Weight("bu", typ(F32, e, f)), b.Weight("bd", typ(F32, e, d))
	}
	return b.MoE(x, r, w, attrs)
}
