package ir

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// Dimensions of the llama-like test block: 8 query heads and 2 kv heads of
// width 32 (GQA), a 512-wide FFN and a 512-token vocabulary.
const (
	tDim    = 256
	tHeads  = 8
	tKV     = 2
	tHead   = 32
	tFFN    = 512
	tVocab  = 512
	tKVRows = tKV * tHead
)

// buildBlock builds one pre-norm transformer block with GQA attention over a
// KV cache, a SwiGLU FFN, a final norm and tied output weights.
func buildBlock() *Builder {
	b := NewBuilder("llama")
	tokens := b.Input("tokens", typ(I32, "T"))
	pos := b.Input("pos", typ(I32, "T"))
	embd := b.Weight("token_embd.weight", typ(Q4_0, tVocab, tDim))
	x := b.Embed(embd, tokens)

	h := b.RMSNorm(x, b.Weight("blk.0.attn_norm.weight", typ(F32, tDim)), 1e-5)
	q := b.MatMul(h, b.Weight("blk.0.attn_q.weight", typ(Q4_K, tHeads*tHead, tDim)), nil)
	k := b.MatMul(h, b.Weight("blk.0.attn_k.weight", typ(Q4_K, tKVRows, tDim)), nil)
	v := b.MatMul(h, b.Weight("blk.0.attn_v.weight", typ(Q8_0, tKVRows, tDim)),
		b.Weight("blk.0.attn_v.bias", typ(F32, tKVRows)))
	rope := Attrs{"head_dim": tHead, "n_rot": tHead, "base": 10000.0, "mode": "normal"}
	q = b.RoPE(q, pos, rope)
	k = b.RoPE(k, pos, rope)
	kc := b.KVWrite(b.State("cache.0.k", typ(F16, "C", tKVRows)), k, pos)
	vc := b.KVWrite(b.State("cache.0.v", typ(F16, "C", tKVRows)), v, pos)
	att := b.Attention(q, kc, vc, pos, nil, Attrs{
		"n_head": tHeads, "n_kv_head": tKV, "head_dim": tHead, "scale": 1 / math.Sqrt(tHead),
	})
	x = b.AddV(x, b.MatMul(att, b.Weight("blk.0.attn_output.weight", typ(Q4_K, tDim, tHeads*tHead)), nil))

	h = b.RMSNorm(x, b.Weight("blk.0.ffn_norm.weight", typ(F32, tDim)), 1e-5)
	gate := b.SiLU(b.MatMul(h, b.Weight("blk.0.ffn_gate.weight", typ(Q4_K, tFFN, tDim)), nil))
	up := b.MatMul(h, b.Weight("blk.0.ffn_up.weight", typ(Q4_K, tFFN, tDim)), nil)
	x = b.AddV(x, b.MatMul(b.Mul(gate, up), b.Weight("blk.0.ffn_down.weight", typ(Q6_K, tDim, tFFN)), nil))

	x = b.RMSNorm(x, b.Weight("output_norm.weight", typ(F32, tDim)), 1e-5)
	b.Output("logits", b.MatMul(x, embd, nil))
	b.Output("cache.0.k", kc)
	b.Output("cache.0.v", vc)
	return b
}

func TestBuilderBlock(t *testing.T) {
	g, err := buildBlock().Finish()
	require.NoError(t, err)
	require.NoError(t, Verify(g))
	require.Equal(t, "llama", g.Name)

	logits := g.Output("logits")
	require.NotNil(t, logits)
	require.Equal(t, "f32[T, 512]", logits.Type.String())
	require.Equal(t, "f16[C, 64]", g.Output("cache.0.k").Type.String())
	require.Nil(t, g.Output("nope"))

	// Builder IDs are list positions, so Renumber is a no-op on a fresh graph.
	for i, v := range g.Values {
		require.Equal(t, i, v.ID)
	}
	embd := g.Lookup(OpWeight, "token_embd.weight")
	require.NotNil(t, embd)
	require.Nil(t, g.Lookup(OpInput, "token_embd.weight"), "lookup is per op")
	require.Equal(t, 2, g.Uses()[embd], "embedding table is tied to the output")
	require.Equal(t, 1, g.Uses()[logits], "an output counts as a use")

	// Builder attributes are normalised: plain ints become int64.
	rope := g.Values[0]
	for _, v := range g.Values {
		if v.Op == OpRoPE {
			rope = v
			break
		}
	}
	require.Equal(t, OpRoPE, rope.Op)
	require.Equal(t, int64(tHead), rope.Attrs["head_dim"])
}

func TestBuilderKeepsFirstError(t *testing.T) {
	b := NewBuilder("bad")
	x := b.Input("x", typ(F32, "T", 256))
	w := b.Weight("w", typ(F32, 512, 128))
	y := b.MatMul(x, w, nil) // inner dims differ: the first error
	require.Error(t, b.Err())
	first := b.Err()
	require.ErrorContains(t, first, "matmul inner dims differ")
	require.NotNil(t, y, "failed calls still return a placeholder value")

	z := b.SiLU(b.Input("i", typ(I32, 4))) // also wrong, but later
	require.NotNil(t, z)
	b.Output("y", y)
	require.Equal(t, first, b.Err())

	g, err := b.Finish()
	require.Nil(t, g)
	require.Equal(t, first, err)
}

func TestBuilderErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *Builder)
		err   string
	}{
		{"nil operand", func(b *Builder) { b.SiLU(nil) }, "silu: nil operand"},
		{"nil reshape operand", func(b *Builder) { b.Reshape(nil, S(4)) }, "reshape: nil operand"},
		{"unsupported attribute", func(b *Builder) {
			b.Add(OpInput, Attrs{"name": "x", "bad": struct{}{}}, &Type{F32, S(1)})
		}, "input: attribute bad: unsupported type"},
		{"missing attribute", func(b *Builder) {
			b.RoPE(b.Input("x", typ(F32, "T", 64)), b.Input("p", typ(I32, "T")), Attrs{"head_dim": 32})
		}, `rope needs attribute "n_rot"`},
		{"bad reshape found by Finish", func(b *Builder) {
			b.Output("r", b.Reshape(b.Input("x", typ(F32, "T", 256)), S("T", 8, 16)))
		}, "%1 (reshape): [T, 256] and [T, 8, 16] hold different element counts"},
		{"duplicate leaf found by Finish", func(b *Builder) {
			b.Input("x", typ(F32, 1))
			b.Input("x", typ(F32, 1))
		}, `%1: input "x" declared twice`},
		{"duplicate output found by Finish", func(b *Builder) {
			x := b.Input("x", typ(F32, 1))
			b.Output("o", x)
			b.Output("o", x)
		}, `output "o" listed twice`},
		{"unknown dtype found by Finish", func(b *Builder) { b.Input("x", typ(DType(5), 1)) }, "%0 (input): unknown dtype 5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder("g")
			tc.build(b)
			g, err := b.Finish()
			require.Nil(t, g)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestVerifyRejects(t *testing.T) {
	leaf := func(id int, op Op, name string, t Type) *Value {
		return &Value{ID: id, Op: op, Attrs: Attrs{"name": name}, Type: t}
	}
	tests := []struct {
		name string
		g    func() *Graph
		err  string
	}{
		{"operand used before definition", func() *Graph {
			x := leaf(1, OpInput, "x", typ(F32, 4))
			y := &Value{ID: 0, Op: OpSiLU, Args: vals(x), Type: typ(F32, 4)}
			return &Graph{Values: vals(y, x)}
		}, "%0 (silu): operand is not defined before use"},
		{"operand from another graph", func() *Graph {
			other := leaf(0, OpInput, "x", typ(F32, 4))
			x := leaf(0, OpInput, "x", typ(F32, 4))
			return &Graph{Values: vals(x, &Value{ID: 1, Op: OpSiLU, Args: vals(other), Type: typ(F32, 4)})}
		}, "%1 (silu): operand is not defined before use"},
		{"nil operand", func() *Graph {
			return &Graph{Values: vals(&Value{ID: 0, Op: OpSiLU, Args: []*Value{nil}, Type: typ(F32, 4)})}
		}, "operand is not defined before use"},
		{"nil value", func() *Graph { return &Graph{Values: []*Value{nil}} }, "value #0 is nil"},
		{"duplicate ids", func() *Graph {
			return &Graph{Values: vals(leaf(3, OpInput, "x", typ(F32, 4)), leaf(3, OpInput, "y", typ(F32, 4)))}
		}, "%3: duplicate value id"},
		{"duplicate leaf names", func() *Graph {
			return &Graph{Values: vals(leaf(0, OpWeight, "w", typ(F32, 4)), leaf(1, OpWeight, "w", typ(F16, 4)))}
		}, `%1: weight "w" declared twice`},
		{"empty leaf name", func() *Graph {
			return &Graph{Values: vals(leaf(0, OpState, "", typ(F32, 4)))}
		}, "%0 (state): empty name"},
		{"recorded type differs from inferred", func() *Graph {
			x := leaf(0, OpInput, "x", typ(F32, "T", 4))
			return &Graph{Values: vals(x, &Value{ID: 1, Op: OpSiLU, Args: vals(x), Type: typ(F32, "T", 5)})}
		}, "%1 (silu): type is f32[T, 5], operands give f32[T, 4]"},
		{"inference fails", func() *Graph {
			x := leaf(0, OpInput, "x", typ(I32, 4))
			return &Graph{Values: vals(x, &Value{ID: 1, Op: OpSiLU, Args: vals(x), Type: typ(F32, 4)})}
		}, "%1 (silu): operand must be f32"},
		{"reshape count", func() *Graph {
			x := leaf(0, OpInput, "x", typ(F32, 4))
			return &Graph{Values: vals(x, &Value{ID: 1, Op: OpReshape, Args: vals(x), Type: typ(F32, 2, 3)})}
		}, "%1 (reshape): [4] and [2, 3] hold different element counts"},
		{"output outside the graph", func() *Graph {
			x := leaf(0, OpInput, "x", typ(F32, 4))
			return &Graph{Values: vals(x), Outputs: []Output{{"o", leaf(1, OpInput, "y", typ(F32, 4))}}}
		}, `output "o" refers to a value outside the graph`},
		{"nil output", func() *Graph {
			return &Graph{Outputs: []Output{{"o", nil}}}
		}, `output "o" refers to a value outside the graph`},
		{"duplicate output names", func() *Graph {
			x := leaf(0, OpInput, "x", typ(F32, 4))
			return &Graph{Values: vals(x), Outputs: []Output{{"o", x}, {"o", x}}}
		}, `output "o" listed twice`},
		{"unknown op", func() *Graph {
			return &Graph{Values: vals(&Value{ID: 0, Op: "conv2d", Type: typ(F32, 4)})}
		}, `%0 (conv2d): unknown op "conv2d"`},
		{"unknown dtype", func() *Graph {
			return &Graph{Values: vals(leaf(0, OpInput, "x", typ(DType(99), 4)))}
		}, "%0 (input): unknown dtype 99"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorContains(t, Verify(tc.g()), tc.err)
		})
	}
}

func TestVerifyAcceptsEmptyAndSparseIDs(t *testing.T) {
	require.NoError(t, Verify(&Graph{}))
	x := &Value{ID: 10, Op: OpInput, Attrs: Attrs{"name": "x"}, Type: typ(F32, 4)}
	y := &Value{ID: 2, Op: OpSiLU, Args: vals(x), Type: typ(F32, 4)}
	g := &Graph{Values: vals(x, y), Outputs: []Output{{"y", y}}}
	require.NoError(t, Verify(g))
	g.Renumber()
	require.Equal(t, 0, x.ID)
	require.Equal(t, 1, y.ID)
	// Same name under a different leaf op is a different thing.
	w := &Value{ID: 2, Op: OpWeight, Attrs: Attrs{"name": "x"}, Type: typ(F32, 4)}
	g.Values = append(g.Values, w)
	require.NoError(t, Verify(g))
}
