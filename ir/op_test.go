package ir

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// val makes a free-standing operand of the given type; Infer looks at
// nothing else.
func val(d DType, dims ...any) *Value { return &Value{Type: Type{d, S(dims...)}} }

func vals(vs ...*Value) []*Value { return vs }

func typ(d DType, dims ...any) Type { return Type{d, S(dims...)} }

var (
	ropeAttrs = Attrs{"head_dim": 32, "n_rot": 32, "base": 10000.0}
	// Llama-style GQA: 8 query heads share 2 kv heads of width 32.
	gqaAttrs = Attrs{"n_head": 8, "n_kv_head": 2, "head_dim": 32, "scale": 0.125}
)

func with(a Attrs, kv ...any) Attrs {
	out := Attrs{}
	for k, v := range a {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func without(a Attrs, key string) Attrs {
	out := with(a)
	delete(out, key)
	return out
}

func TestInferValid(t *testing.T) {
	tests := []struct {
		name  string
		op    Op
		args  []*Value
		attrs Attrs
		want  Type
	}{
		{"input has no rule", OpInput, nil, Attrs{"name": "x"}, Type{}},
		{"reshape has no rule", OpReshape, vals(val(F32, "T", 256)), nil, Type{}},
		{"embed quantized table", OpEmbed, vals(val(Q4_0, 512, 256), val(I32, "T")), nil, typ(F32, "T", 256)},
		{"embed f16 table", OpEmbed, vals(val(F16, 32000, 4096), val(I32, 7)), nil, typ(F32, 7, 4096)},
		{"rmsnorm without gain", OpRMSNorm, vals(val(F32, "T", 256)), Attrs{"eps": 1e-5}, typ(F32, "T", 256)},
		{"rmsnorm with f16 gain", OpRMSNorm, vals(val(F32, "T", 256), val(F16, 256)), Attrs{"eps": 1e-6}, typ(F32, "T", 256)},
		{"rmsnorm integer eps", OpRMSNorm, vals(val(F32, 4)), Attrs{"eps": 0}, typ(F32, 4)},
		{"matmul", OpMatMul, vals(val(F32, "T", 256), val(Q4_K, 512, 256)), nil, typ(F32, "T", 512)},
		{"matmul with bias", OpMatMul, vals(val(F32, "T", 256), val(Q8_0, 64, 256), val(F32, 64)), nil, typ(F32, "T", 64)},
		{"matmul of a vector", OpMatMul, vals(val(F32, 256), val(F16, 10, 256)), nil, typ(F32, 10)},
		{"matmul 3-D input", OpMatMul, vals(val(F32, 2, "T", 256), val(F32, 8, 256)), nil, typ(F32, 2, "T", 8)},
		{"matmul symbolic inner dim", OpMatMul, vals(val(F32, "T", "C"), val(F32, 4, "C")), nil, typ(F32, "T", 4)},
		{"add same shape", OpAdd, vals(val(F32, "T", 256), val(F32, "T", 256)), nil, typ(F32, "T", 256)},
		{"add broadcasts a vector", OpAdd, vals(val(F32, "T", 256), val(F32, 256)), nil, typ(F32, "T", 256)},
		{"add scalar", OpAdd, vals(val(F32, "T", 256), val(F32)), nil, typ(F32, "T", 256)},
		{"mul f16 right operand", OpMul, vals(val(F32, "T", 256), val(F16, 256)), nil, typ(F32, "T", 256)},
		{"silu", OpSiLU, vals(val(F32, "T", 512)), nil, typ(F32, "T", 512)},
		{"gelu", OpGELU, vals(val(F32, "T", 512)), nil, typ(F32, "T", 512)},
		{"softmax", OpSoftmax, vals(val(F32, "T", "C")), nil, typ(F32, "T", "C")},
		{"rope", OpRoPE, vals(val(F32, "T", 256), val(I32, "T")), ropeAttrs, typ(F32, "T", 256)},
		{"rope neox partial", OpRoPE, vals(val(F32, "T", 256), val(I32, "T")),
			with(ropeAttrs, "n_rot", 16, "mode", "neox"), typ(F32, "T", 256)},
		{"rope yarn", OpRoPE, vals(val(F32, "T", 256), val(I32, "T")),
			with(ropeAttrs, "ext_factor", 1.0, "attn_factor", 1.0, "beta_fast", 32.0, "beta_slow", 1.0, "orig_ctx", 4096, "freq_scale", 0.25),
			typ(F32, "T", 256)},
		{"rope symbolic width", OpRoPE, vals(val(F32, "T", "W"), val(I32, "T")), ropeAttrs, typ(F32, "T", "W")},
		{"kvwrite keeps the cache type", OpKVWrite, vals(val(F16, "C", 64), val(F32, "T", 64), val(I32, "T")), nil, typ(F16, "C", 64)},
		{"attention MHA", OpAttention,
			vals(val(F32, "T", 256), val(F16, "C", 256), val(F16, "C", 256), val(I32, "T")),
			with(gqaAttrs, "n_kv_head", 8), typ(F32, "T", 256)},
		{"attention GQA", OpAttention,
			vals(val(F32, "T", 256), val(F16, "C", 64), val(F16, "C", 64), val(I32, "T")),
			gqaAttrs, typ(F32, "T", 256)},
		{"attention MQA", OpAttention,
			vals(val(F32, "T", 256), val(F32, "C", 32), val(F32, "C", 32), val(I32, "T")),
			with(gqaAttrs, "n_kv_head", 1), typ(F32, "T", 256)},
		{"attention with sinks and window", OpAttention,
			vals(val(F32, "T", 256), val(F16, "C", 64), val(F16, "C", 64), val(I32, "T"), val(F32, 8)),
			with(gqaAttrs, "window", 128), typ(F32, "T", 256)},
		{"attention value width differs", OpAttention,
			vals(val(F32, "T", 256), val(F16, "C", 64), val(F16, "C", 96), val(I32, "T")),
			gqaAttrs, typ(F32, "T", 8*48)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			attrs, err := tc.attrs.Clone()
			require.NoError(t, err)
			got, err := Infer(tc.op, tc.args, attrs)
			require.NoError(t, err)
			require.True(t, tc.want.Equal(got), "got %s, want %s", got, tc.want)
		})
	}
}

func TestInferInvalid(t *testing.T) {
	x := val(F32, "T", 256)
	pos := val(I32, "T")
	q, k, v := val(F32, "T", 256), val(F16, "C", 64), val(F16, "C", 64)
	tests := []struct {
		name  string
		op    Op
		args  []*Value
		attrs Attrs
		err   string
	}{
		{"unknown op", Op("conv"), vals(x), nil, `unknown op "conv"`},
		// Arity.
		{"embed one operand", OpEmbed, vals(val(F32, 10, 256)), nil, "embed takes 2 operands, got 1"},
		{"rmsnorm three operands", OpRMSNorm, vals(x, val(F32, 256), val(F32, 256)), Attrs{"eps": 1e-5}, "rmsnorm takes 1 to 2 operands, got 3"},
		{"silu no operands", OpSiLU, nil, nil, "silu takes 1 operands, got 0"},
		{"input with an operand", OpInput, vals(x), Attrs{"name": "x"}, "input takes 0 operands, got 1"},
		{"attention six operands", OpAttention, vals(q, k, v, pos, val(F32, 8), val(F32, 8)), gqaAttrs, "attention takes 4 to 5 operands, got 6"},
		// Missing attributes.
		{"input without name", OpInput, nil, nil, `input needs attribute "name"`},
		{"rmsnorm without eps", OpRMSNorm, vals(x), nil, `rmsnorm needs attribute "eps"`},
		{"rope without base", OpRoPE, vals(x, pos), without(ropeAttrs, "base"), `rope needs attribute "base"`},
		{"attention without scale", OpAttention, vals(q, k, v, pos), without(gqaAttrs, "scale"), `attention needs attribute "scale"`},
		// Shapes.
		{"matmul inner dim", OpMatMul, vals(x, val(Q4_0, 512, 128)), nil, "matmul inner dims differ"},
		{"matmul symbolic inner dim", OpMatMul, vals(val(F32, "T", "C"), val(F32, 4, "P")), nil, "matmul inner dims differ"},
		{"matmul 1-D weight", OpMatMul, vals(x, val(F32, 256)), nil, "matmul wants x[..., K] and w[N, K]"},
		{"matmul bias size", OpMatMul, vals(x, val(F32, 64, 256), val(F32, 65)), nil, "matmul bias must be float[64]"},
		{"matmul bias dtype", OpMatMul, vals(x, val(F32, 64, 256), val(I32, 64)), nil, "matmul bias must be float[64]"},
		{"embed 1-D table", OpEmbed, vals(val(F32, 256), pos), nil, "embed table must be 2-D"},
		{"rmsnorm gain width", OpRMSNorm, vals(x, val(F32, 128)), Attrs{"eps": 1e-5}, "rmsnorm gain must be float[256]"},
		{"rmsnorm scalar", OpRMSNorm, vals(val(F32)), Attrs{"eps": 1e-5}, "rmsnorm input is a scalar"},
		{"add does not broadcast", OpAdd, vals(x, val(F32, 128)), nil, "do not broadcast"},
		{"add right operand larger", OpAdd, vals(val(F32, 256), x), nil, "do not broadcast"},
		{"add leading dims", OpAdd, vals(x, val(F32, "T", 1)), nil, "do not broadcast"},
		// Dtypes.
		{"rmsnorm on i32", OpRMSNorm, vals(val(I32, "T", 256)), Attrs{"eps": 1e-5}, "rmsnorm input must be f32"},
		{"matmul on f16 input", OpMatMul, vals(val(F16, "T", 256), val(F16, 64, 256)), nil, "matmul input must be f32"},
		{"embed f32 ids", OpEmbed, vals(val(F32, 10, 256), val(F32, "T")), nil, "embed ids must be i32[T]"},
		{"add i32 right operand", OpAdd, vals(x, val(I32, 256)), nil, "right operand must be float"},
		{"mul quantized left", OpMul, vals(val(Q8_0, "T", 256), x), nil, "left operand must be f32"},
		{"silu on f16", OpSiLU, vals(val(F16, 4)), nil, "operand must be f32"},
		{"rope i64 positions", OpRoPE, vals(x, val(I64, "T")), ropeAttrs, "rope positions must be i32[T]"},
		{"kvwrite quantized cache", OpKVWrite, vals(val(Q4_0, "C", 64), val(F32, "T", 64), pos), nil, "kv cache must be a float type or q8_0"},
		{"kvwrite f16 rows", OpKVWrite, vals(val(F16, "C", 64), val(F16, "T", 64), pos), nil, "kvwrite rows must be f32"},
		// rope attributes.
		{"rope odd n_rot", OpRoPE, vals(x, pos), with(ropeAttrs, "n_rot", 31), "n_rot even, got n_rot=31 head_dim=32"},
		{"rope n_rot above head_dim", OpRoPE, vals(x, pos), with(ropeAttrs, "n_rot", 64), "n_rot ≤ head_dim"},
		{"rope zero head_dim", OpRoPE, vals(x, pos), with(ropeAttrs, "head_dim", 0), "head_dim=0"},
		{"rope float head_dim", OpRoPE, vals(x, pos), with(ropeAttrs, "head_dim", 32.0), "head_dim=0"},
		{"rope width not whole heads", OpRoPE, vals(val(F32, "T", 250), pos), ropeAttrs, "row width 250 is not a multiple of head_dim 32"},
		{"rope mode", OpRoPE, vals(x, pos), with(ropeAttrs, "mode", "glm"), `rope mode "glm" is not normal or neox`},
		{"rope 3-D input", OpRoPE, vals(val(F32, "T", 8, 32), pos), ropeAttrs, "rope input must be [T, H·Dh]"},
		{"rope position count", OpRoPE, vals(x, val(I32, "P")), ropeAttrs, "rope positions has P rows, want T"},
		// attention attributes and shapes.
		{"attention heads not a multiple", OpAttention, vals(q, k, v, pos), with(gqaAttrs, "n_kv_head", 3), "n_head a positive multiple of n_kv_head"},
		{"attention zero kv heads", OpAttention, vals(q, k, v, pos), with(gqaAttrs, "n_kv_head", 0), "n_head a positive multiple of n_kv_head"},
		{"attention negative window", OpAttention, vals(q, k, v, pos), with(gqaAttrs, "window", -1), "attention window -1 is negative"},
		{"attention query width", OpAttention, vals(val(F32, "T", 128), k, v, pos), gqaAttrs, "attention query must be [T, 256]"},
		{"attention f16 query", OpAttention, vals(val(F16, "T", 256), k, v, pos), gqaAttrs, "attention query must be f32"},
		{"attention key width", OpAttention, vals(q, val(F16, "C", 256), v, pos), gqaAttrs, "attention keys must be [C, 64]"},
		{"attention value rows", OpAttention, vals(q, k, val(F16, "P", 64), pos), gqaAttrs, "attention values must be [C, n_kv_head·Dv]"},
		{"attention value width", OpAttention, vals(q, k, val(F16, "C", 63), pos), gqaAttrs, "attention values must be [C, n_kv_head·Dv]"},
		{"attention positions", OpAttention, vals(q, k, v, val(I32, 1)), gqaAttrs, "attention positions has 1 rows, want T"},
		{"attention sinks length", OpAttention, vals(q, k, v, pos, val(F32, 2)), gqaAttrs, "attention sinks must be float[8]"},
		// kvwrite shapes.
		{"kvwrite width mismatch", OpKVWrite, vals(val(F16, "C", 64), val(F32, "T", 128), pos), nil, "kvwrite row widths differ"},
		{"kvwrite 1-D cache", OpKVWrite, vals(val(F16, "C"), val(F32, "T", 64), pos), nil, "kvwrite wants cache[C, W] and x[T, W]"},
		{"kvwrite position count", OpKVWrite, vals(val(F16, "C", 64), val(F32, "T", 64), val(I32, "C")), nil, "kvwrite positions has C rows, want T"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			attrs, err := tc.attrs.Clone()
			require.NoError(t, err)
			_, err = Infer(tc.op, tc.args, attrs)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestCheckReshape(t *testing.T) {
	tests := []struct {
		name     string
		from, to Type
		err      string
	}{
		{"split heads", typ(F32, "T", 256), typ(F32, "T", 8, 32), ""},
		{"merge heads", typ(F32, "T", 8, 32), typ(F32, "T", 256), ""},
		{"move a symbol", typ(F32, "T", 256), typ(F32, 256, "T"), ""},
		{"scalar to [1]", typ(F32), typ(F32, 1), ""},
		{"different count", typ(F32, "T", 256), typ(F32, "T", 128), "hold different element counts"},
		{"different symbol", typ(F32, "T", 256), typ(F32, "P", 256), "hold different element counts"},
		{"symbol dropped", typ(F32, "T", 256), typ(F32, 256), "hold different element counts"},
		{"symbol twice", typ(F32, "T", "T"), typ(F32, "T", 1), "hold different element counts"},
		{"dtype change", typ(F32, 4), typ(F16, 4), "changes dtype from f32 to f16"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkReshape(tc.from, tc.to)
			if tc.err == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.err)
			}
		})
	}
}

func TestAttrs(t *testing.T) {
	a, err := Attrs{"i": 3, "i32": int32(-4), "u": uint32(5), "f": float32(0.5), "b": true, "nb": false,
		"s": "x", "l": []int{1, 2}, "l64": []int64{3}}.Clone()
	require.NoError(t, err)
	require.Equal(t, int64(3), a.Int("i", 0))
	require.Equal(t, int64(-4), a.Int("i32", 0))
	require.Equal(t, int64(5), a.Int("u", 0))
	require.Equal(t, int64(1), a.Int("b", 0))
	require.Equal(t, int64(0), a.Int("nb", 9))
	require.Equal(t, 0.5, a.Float("f", 0))
	require.Equal(t, 3.0, a.Float("i", 0), "integers read as floats")
	require.Equal(t, int64(7), a.Int("f", 7), "floats do not read as integers")
	require.Equal(t, "x", a.Str("s", ""))
	require.Equal(t, "d", a.Str("missing", "d"))
	require.Equal(t, []int64{1, 2}, a.Ints("l"))
	require.Equal(t, []int64{3}, a.Ints("l64"))
	require.Nil(t, a.Ints("s"))
	require.Equal(t, []string{"b", "f", "i", "i32", "l", "l64", "nb", "s", "u"}, a.Keys())

	// clone copies lists, so a builder's caller cannot change a graph later.
	src := []int64{1}
	c, err := Attrs{"l": src}.Clone()
	require.NoError(t, err)
	src[0] = 9
	require.Equal(t, []int64{1}, c.Ints("l"))

	_, err = Attrs{"bad": struct{}{}}.Clone()
	require.ErrorContains(t, err, "attribute bad: unsupported type struct {}")

	var none Attrs
	c, err = none.Clone()
	require.NoError(t, err)
	require.Nil(t, c)
}

func TestShape(t *testing.T) {
	s := S("T", 256, int64(8), Sym("C"), D(3))
	require.Equal(t, "[T, 256, 8, C, 3]", s.String())
	require.Equal(t, D(3), s.Last())
	require.Equal(t, Dim{}, Shape{}.Last())
	require.True(t, s.Equal(S("T", 256, 8, "C", 3)))
	require.False(t, s.Equal(S("T", 256, 8, "C")))
	require.False(t, S("T").Equal(S("P")))
	require.True(t, Shape(nil).Equal(Shape{}), "nil and empty are both scalars")
	require.Equal(t, "f32[]", typ(F32).String())

	got, err := S("T", 4, "C").Bind(map[string]int64{"T": 7, "C": 4096})
	require.NoError(t, err)
	require.Equal(t, []int64{7, 4, 4096}, got)
	_, err = S("T", "P").Bind(map[string]int64{"T": 1})
	require.ErrorContains(t, err, "symbol P is not bound")

	require.Panics(t, func() { S(1.5) })
}
