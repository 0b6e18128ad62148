package eval_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
)

// TestEmbed: rows of the (dequantized) table, for f32, f16 and quantized
// tables, one and several ids, repeats included. Tolerance: exact copies of
// the dequantized rows are expected, checked with the package bound relTol.
func TestEmbed(t *testing.T) {
	cases := []struct {
		name string
		dt   ir.DType
		V, D int
		ids  []int32
	}{
		{"f32 odd width T=1", ir.F32, 5, 7, []int32{3}},
		{"f32 T=7 repeats", ir.F32, 6, 13, []int32{0, 5, 5, 2, 1, 0, 4}},
		{"f16 T=7", ir.F16, 9, 10, []int32{8, 1, 2, 3, 4, 7, 8}},
		{"q8_0", ir.Q8_0, 9, 32, []int32{2, 8, 0}},
		{"q4_k one row", ir.Q4_K, 1, 256, []int32{0, 0}},
		{"q4_k", ir.Q4_K, 3, 256, []int32{2, 0, 1, 2}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := newRNG(uint64(i))
			w := testWeights{}
			b := ir.NewBuilder("embed")
			table, deq := w.weight(t, b, "table", c.dt, randVals(rng, c.V*c.D, 1), c.V, c.D)
			ids := b.Input("ids", i32Type("T"))
			b.Output("y", b.Embed(table, ids))
			out := runOnce(t, b, w, 1, map[string]eval.Tensor{"ids": i32T(c.ids...)})["y"]
			require.Equal(t, []int64{int64(len(c.ids)), int64(c.D)}, out.Shape)
			ref := make([]float64, 0, len(c.ids)*c.D)
			for _, id := range c.ids {
				for d := 0; d < c.D; d++ {
					ref = append(ref, deq[int(id)*c.D+d])
				}
			}
			requireClose(t, out.F32, ref, relTol, "embed")
		})
	}
}

// TestEmbedOutOfRange: an id outside [0, V) is an error, never a panic or a
// silent read of another row.
func TestEmbedOutOfRange(t *testing.T) {
	for _, ids := range [][]int32{{0, 4}, {-1}, {1, 2, 1 << 30}} {
		t.Run(fmt.Sprint(ids), func(t *testing.T) {
			w := testWeights{}
			b := ir.NewBuilder("embed")
			table, _ := w.weight(t, b, "table", ir.F32, randVals(newRNG(1), 4*3, 1), 4, 3)
			b.Output("y", b.Embed(table, b.Input("ids", i32Type("T"))))
			g, err := b.Finish()
			require.NoError(t, err)
			m, err := eval.New(g, w, 1)
			require.NoError(t, err)
			_, err = m.Run(map[string]eval.Tensor{"ids": i32T(ids...)})
			require.ErrorContains(t, err, "outside the vocabulary")
		})
	}
}

// TestRMSNorm: x / sqrt(mean(x²) + eps) · gain over the last axis, with and
// without a gain, gains in f32 and f16, odd widths, one row, 3-D inputs.
// Tolerance relTol.
func TestRMSNorm(t *testing.T) {
	cases := []struct {
		name    string
		shape   []int64
		gain    bool
		gainDT  ir.DType
		eps     float64
		xScale  float64
		symbolT bool
	}{
		{"no gain one row odd", []int64{1, 7}, false, 0, 1e-5, 1, true},
		{"f32 gain T=7 width 33", []int64{7, 33}, true, ir.F32, 1e-5, 2, true},
		{"f16 gain T=3", []int64{3, 64}, true, ir.F16, 1e-6, 0.5, true},
		{"eps dominates tiny x", []int64{2, 5}, true, ir.F32, 1e-2, 1e-3, true},
		{"3-D no gain", []int64{2, 3, 5}, false, 0, 1e-5, 3, false},
		{"3-D f32 gain", []int64{2, 3, 4}, true, ir.F32, 1e-5, 1, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := newRNG(uint64(100 + i))
			D := int(c.shape[len(c.shape)-1])
			w := testWeights{}
			b := ir.NewBuilder("rmsnorm")
			dims := make([]any, len(c.shape))
			for j, d := range c.shape {
				dims[j] = int(d)
			}
			if c.symbolT {
				dims[0] = "T"
			}
			x := b.Input("x", f32Type(dims...))
			var gain *ir.Value
			var g []float64
			if c.gain {
				gain, g = w.weight(t, b, "gain", c.gainDT, randVals(rng, D, 1), D)
			}
			b.Output("y", b.RMSNorm(x, gain, c.eps))
			xs := randVals(rng, prod(c.shape), c.xScale)
			out := runOnce(t, b, w, 1, map[string]eval.Tensor{"x": f32T(xs, c.shape...)})["y"]
			require.Equal(t, c.shape, out.Shape)

			ref := make([]float64, len(xs))
			for r := 0; r < len(xs)/D; r++ {
				ss := 0.0
				for d := 0; d < D; d++ {
					ss += float64(xs[r*D+d]) * float64(xs[r*D+d])
				}
				inv := 1 / math.Sqrt(ss/float64(D)+c.eps)
				for d := 0; d < D; d++ {
					ref[r*D+d] = float64(xs[r*D+d]) * inv
					if c.gain {
						ref[r*D+d] *= g[d]
					}
				}
			}
			requireClose(t, out.F32, ref, relTol, "rmsnorm")
		})
	}
}

// TestMatMul: y = x·wᵀ (+ bias) with w[N, K] in f32, f16, q8_0 and q4_k, bias
// in f32 or f16, T symbolic (one row and seven), and a 3-D x. Tolerance
// relTol (float64 accumulation on both sides).
func TestMatMul(t *testing.T) {
	cases := []struct {
		name   string
		lead   []any // leading dims of x as declared
		concr  []int64
		K, N   int
		dt     ir.DType
		bias   bool
		biasDT ir.DType
	}{
		{"f32 T=1 odd K", []any{"T"}, []int64{1}, 5, 3, ir.F32, false, 0},
		{"f32 T=7 bias", []any{"T"}, []int64{7}, 33, 9, ir.F32, true, ir.F32},
		{"f16 T=7 f16 bias", []any{"T"}, []int64{7}, 13, 4, ir.F16, true, ir.F16},
		{"q8_0 T=2", []any{"T"}, []int64{2}, 64, 5, ir.Q8_0, false, 0},
		{"q8_0 bias T=1", []any{"T"}, []int64{1}, 32, 1, ir.Q8_0, true, ir.F32},
		{"q4_k T=7", []any{"T"}, []int64{7}, 256, 3, ir.Q4_K, false, 0},
		{"3-D x", []any{2, 3}, []int64{2, 3}, 7, 6, ir.F32, true, ir.F32},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := newRNG(uint64(200 + i))
			w := testWeights{}
			b := ir.NewBuilder("matmul")
			x := b.Input("x", f32Type(append(append([]any{}, c.lead...), c.K)...))
			wv, wd := w.weight(t, b, "w", c.dt, randVals(rng, c.N*c.K, 0.5), c.N, c.K)
			var bias *ir.Value
			var bd []float64
			if c.bias {
				bias, bd = w.weight(t, b, "b", c.biasDT, randVals(rng, c.N, 1), c.N)
			}
			b.Output("y", b.MatMul(x, wv, bias))
			xShape := append(append([]int64{}, c.concr...), int64(c.K))
			xs := randVals(rng, prod(xShape), 1)
			out := runOnce(t, b, w, 1, map[string]eval.Tensor{"x": f32T(xs, xShape...)})["y"]
			require.Equal(t, append(append([]int64{}, c.concr...), int64(c.N)), out.Shape)

			rows := len(xs) / c.K
			ref := make([]float64, rows*c.N)
			for r := 0; r < rows; r++ {
				for n := 0; n < c.N; n++ {
					acc := 0.0
					for k := 0; k < c.K; k++ {
						acc += float64(xs[r*c.K+k]) * wd[n*c.K+k]
					}
					if c.bias {
						acc += bd[n]
					}
					ref[r*c.N+n] = acc
				}
			}
			requireClose(t, out.F32, ref, relTol, "matmul")
		})
	}
}

// TestBinary: add and mul, elementwise on equal shapes and broadcasting a
// trailing-dims operand (a [D] vector from an input, an f32 weight or an f16
// weight; a [3, 5] slab over [2, 3, 5]). Tolerance relTol.
func TestBinary(t *testing.T) {
	type bkind int
	const (
		sameInput bkind = iota
		vecInput
		vecWeight
	)
	cases := []struct {
		name string
		a    []int64
		b    []int64
		kind bkind
		dt   ir.DType
		symT bool
	}{
		{"same shape T=7", []int64{7, 9}, []int64{7, 9}, sameInput, ir.F32, true},
		{"same shape one row odd", []int64{1, 3}, []int64{1, 3}, sameInput, ir.F32, true},
		{"[D] input over T=7", []int64{7, 5}, []int64{5}, vecInput, ir.F32, true},
		{"[D] f32 weight", []int64{4, 11}, []int64{11}, vecWeight, ir.F32, true},
		{"[D] f16 weight", []int64{3, 8}, []int64{8}, vecWeight, ir.F16, true},
		{"[3,5] over [2,3,5]", []int64{2, 3, 5}, []int64{3, 5}, vecInput, ir.F32, false},
	}
	ops := []struct {
		op ir.Op
		f  func(a, b float64) float64
	}{
		{ir.OpAdd, func(a, b float64) float64 { return a + b }},
		{ir.OpMul, func(a, b float64) float64 { return a * b }},
	}
	for i, c := range cases {
		for _, op := range ops {
			t.Run(string(op.op)+" "+c.name, func(t *testing.T) {
				rng := newRNG(uint64(300 + i))
				w := testWeights{}
				bld := ir.NewBuilder("binary")
				decl := func(s []int64, sym bool) []any {
					d := make([]any, len(s))
					for j, x := range s {
						d[j] = int(x)
					}
					if sym {
						d[0] = "T"
					}
					return d
				}
				a := bld.Input("a", f32Type(decl(c.a, c.symT)...))
				as := randVals(rng, prod(c.a), 1)
				bs := randVals(rng, prod(c.b), 1)
				in := map[string]eval.Tensor{"a": f32T(as, c.a...)}
				var bv *ir.Value
				bref := f64(bs)
				switch c.kind {
				case sameInput:
					bv = bld.Input("b", f32Type(decl(c.b, c.symT)...))
					in["b"] = f32T(bs, c.b...)
				case vecInput:
					bv = bld.Input("b", f32Type(decl(c.b, false)...))
					in["b"] = f32T(bs, c.b...)
				case vecWeight:
					bv, bref = w.weight(t, bld, "b", c.dt, bs, int(c.b[0]))
				}
				bld.Output("y", bld.Add(op.op, nil, nil, a, bv))
				out := runOnce(t, bld, w, 1, in)["y"]
				require.Equal(t, c.a, out.Shape)

				// Walk a's multi-index; b is indexed by the trailing len(c.b) of it.
				ref := make([]float64, len(as))
				idx := make([]int64, len(c.a))
				for flat := range as {
					bi, stride := int64(0), int64(1)
					for d := len(c.b) - 1; d >= 0; d-- {
						bi += idx[len(c.a)-len(c.b)+d] * stride
						stride *= c.b[d]
					}
					ref[flat] = op.f(float64(as[flat]), bref[bi])
					for d := len(idx) - 1; d >= 0; d-- {
						if idx[d]++; idx[d] < c.a[d] {
							break
						}
						idx[d] = 0
					}
				}
				requireClose(t, out.F32, ref, relTol, string(op.op))
			})
		}
	}
}

// TestUnary: silu(x) = x·σ(x) and the tanh-approximated gelu, on random
// values plus large magnitudes (±40, where exp overflows a naive σ in
// float32). Tolerance relTol.
func TestUnary(t *testing.T) {
	ops := []struct {
		op ir.Op
		f  func(float64) float64
	}{
		{ir.OpSiLU, func(x float64) float64 { return x * (1 / (1 + math.Exp(-x))) }},
		{ir.OpGELU, func(x float64) float64 {
			return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*math.Pow(x, 3))))
		}},
	}
	shapes := [][]int64{{1, 7}, {7, 33}, {2, 3, 5}}
	for _, op := range ops {
		for i, s := range shapes {
			t.Run(fmt.Sprint(op.op, s), func(t *testing.T) {
				xs := randVals(newRNG(uint64(400+i)), prod(s), 3)
				xs[0], xs[len(xs)-1] = -40, 40
				b := ir.NewBuilder("unary")
				dims := make([]any, len(s))
				for j, d := range s {
					dims[j] = int(d)
				}
				x := b.Input("x", f32Type(dims...))
				b.Output("y", b.Add(op.op, nil, nil, x))
				out := runOnce(t, b, nil, 1, map[string]eval.Tensor{"x": f32T(xs, s...)})["y"]
				require.Equal(t, s, out.Shape)
				ref := make([]float64, len(xs))
				for j, x := range xs {
					ref[j] = op.f(float64(x))
				}
				requireClose(t, out.F32, ref, relTol, string(op.op))
			})
		}
	}
}

// TestSoftmax: exp(x − max) / Σ over the last axis, including logits of
// ±1e4 and an all-equal large row, where exp(x) itself overflows. Tolerance
// relTol against the float64 reference, and every row sums to 1 within 1e-6.
func TestSoftmax(t *testing.T) {
	cases := []struct {
		name  string
		shape []int64
		fill  func([]float32)
	}{
		{"one row odd", []int64{1, 7}, nil},
		{"T=7 width 33", []int64{7, 33}, nil},
		{"3-D", []int64{2, 3, 5}, nil},
		{"large logits", []int64{3, 9}, func(x []float32) {
			for j := range x {
				x[j] = x[j]*5 + 1e4
			}
			for j := 9; j < 18; j++ {
				x[j] -= 2e4 // second row around −1e4
			}
		}},
		{"equal large row", []int64{1, 6}, func(x []float32) {
			for j := range x {
				x[j] = 3e4
			}
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			xs := randVals(newRNG(uint64(500+i)), prod(c.shape), 2)
			if c.fill != nil {
				c.fill(xs)
			}
			b := ir.NewBuilder("softmax")
			dims := make([]any, len(c.shape))
			for j, d := range c.shape {
				dims[j] = int(d)
			}
			b.Output("y", b.Softmax(b.Input("x", f32Type(dims...))))
			out := runOnce(t, b, nil, 1, map[string]eval.Tensor{"x": f32T(xs, c.shape...)})["y"]
			D := int(c.shape[len(c.shape)-1])
			ref := make([]float64, len(xs))
			for r := 0; r < len(xs)/D; r++ {
				row := xs[r*D : (r+1)*D]
				m := math.Inf(-1)
				for _, x := range row {
					m = math.Max(m, float64(x))
				}
				sum := 0.0
				for _, x := range row {
					sum += math.Exp(float64(x) - m)
				}
				gotSum := 0.0
				for j, x := range row {
					ref[r*D+j] = math.Exp(float64(x)-m) / sum
					gotSum += float64(out.F32[r*D+j])
				}
				require.InDelta(t, 1, gotSum, 1e-6, "row %d sum", r)
			}
			requireClose(t, out.F32, ref, relTol, "softmax")
		})
	}
}
