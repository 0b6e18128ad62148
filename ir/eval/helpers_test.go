package eval_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/quant"
)

// The tests of this package hold every op of the reference interpreter to a
// naive float64 loop written from the op contracts in ir/op.go, never from
// ops.go. Unless a test says otherwise the tolerance is
//
//	max|got − ref| ≤ 1e-5 · max|ref|
//
// which leaves room for float32 storage of results (relative rounding 6e-8)
// and nothing more: a wrong index, a missed term or a wrong constant is far
// outside it.
const relTol = 1e-5

// testWeights serves weight bytes by name, as a model file would.
type testWeights map[string][]byte

func (w testWeights) WeightBytes(name string) ([]byte, error) {
	b, ok := w[name]
	if !ok {
		return nil, fmt.Errorf("test weights have no %q", name)
	}
	return b, nil
}

// weight encodes vals as dt with quant.Quantize, stores the bytes under name,
// declares the weight in b with the given row-major shape, and returns the
// values a reader of those bytes gets (quant.Dequantize), as float64, for the
// naive references. For F32 these are vals themselves.
func (w testWeights) weight(t *testing.T, b *ir.Builder, name string, dt ir.DType, vals []float32, shape ...int) (*ir.Value, []float64) {
	t.Helper()
	n, err := dt.RowBytes(int64(len(vals)))
	require.NoError(t, err)
	raw := make([]byte, n)
	require.NoError(t, quant.Quantize(dt, vals, raw))
	w[name] = raw
	deq := make([]float32, len(vals))
	require.NoError(t, quant.Dequantize(dt, raw, deq))
	if dt == ir.F32 {
		require.Equal(t, vals, deq, "f32 weights must round-trip exactly")
	}
	return b.Weight(name, ir.Type{DType: dt, Shape: ir.S(toAny(shape)...)}), f64(deq)
}

func toAny(s []int) []any {
	out := make([]any, len(s))
	for i, d := range s {
		out[i] = d
	}
	return out
}

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6576616c)) }

// randVals draws n values from N(0, scale²); a draw of exactly zero (which
// never happens in practice) is replaced so that no input is all zeros.
func randVals(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * scale)
		if v[i] == 0 {
			v[i] = float32(scale)
		}
	}
	return v
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func prod(s []int64) int {
	n := 1
	for _, d := range s {
		n *= int(d)
	}
	return n
}

func f32T(vals []float32, shape ...int64) eval.Tensor {
	return eval.Tensor{Shape: shape, F32: vals}
}

func i32T(vals ...int32) eval.Tensor {
	return eval.Tensor{Shape: []int64{int64(len(vals))}, I32: vals}
}

func f32Type(dims ...any) ir.Type { return ir.Type{DType: ir.F32, Shape: ir.S(dims...)} }
func i32Type(dims ...any) ir.Type { return ir.Type{DType: ir.I32, Shape: ir.S(dims...)} }

// runOnce finishes the graph, runs it once on a fresh machine and returns
// its outputs.
func runOnce(t *testing.T, b *ir.Builder, w eval.Weights, ctx int64, in map[string]eval.Tensor) map[string]eval.Tensor {
	t.Helper()
	g, err := b.Finish()
	require.NoError(t, err)
	m, err := eval.New(g, w, ctx)
	require.NoError(t, err)
	out, err := m.Run(in)
	require.NoError(t, err)
	return out
}

// requireClose checks max|got − ref| ≤ rel · max|ref|, that every value is
// finite, and that the reference is not all zeros (which would make the
// bound meaningless).
func requireClose(t *testing.T, got []float32, ref []float64, rel float64, what string) {
	t.Helper()
	require.Len(t, got, len(ref), "%s: length", what)
	scale := 0.0
	for _, r := range ref {
		require.False(t, math.IsNaN(r) || math.IsInf(r, 0), "%s: non-finite reference", what)
		scale = math.Max(scale, math.Abs(r))
	}
	require.Greater(t, scale, 0.0, "%s: reference is all zeros", what)
	worst, at := 0.0, 0
	for i, g := range got {
		require.False(t, math.IsNaN(float64(g)) || math.IsInf(float64(g), 0), "%s: element %d is %v", what, i, g)
		if e := math.Abs(float64(g) - ref[i]); e > worst {
			worst, at = e, i
		}
	}
	require.LessOrEqualf(t, worst, rel*scale, "%s: max error %.3g at element %d (got %v, want %v) exceeds %.0e·%.3g",
		what, worst, at, got[at], ref[at], rel, scale)
}
