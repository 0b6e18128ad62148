package kern

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

var weightTypes = []ir.DType{
	ir.F32, ir.F16, ir.Q8_0, ir.Q4_0, ir.Q4_1, ir.Q5_0, ir.Q5_1, ir.Q6_K,
	ir.Q4_K, ir.Q5_K, ir.MXFP4, ir.BF16, ir.Q2_K, ir.Q3_K,
}

// randRow returns n values ~ N(0, std²) with occasional outliers and a few
// all-positive stretches; never all zero.
func randRow(n int, std float64, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * std)
	}
	for i := 0; i < n; i += 97 {
		x[i] *= 8
	}
	for i := 64; i+32 <= n && i < 256; i++ {
		x[i] = float32(math.Abs(float64(x[i])))
	}
	return x
}

func mustRowBytes(t testing.TB, d ir.DType, n int) int {
	b, err := d.RowBytes(int64(n))
	require.NoError(t, err)
	return int(b)
}

func sizesFor(d ir.DType) []int {
	switch d.BlockSize() {
	case 256:
		return []int{256, 3 * 256, 11 * 256, 5632, 11008}
	case 32:
		return []int{32, 3 * 32, 33 * 32, 5632, 11008}
	}
	return []int{1, 7, 32, 96, 1056, 5632, 11008}
}

func TestActType(t *testing.T) {
	cases := map[ir.DType]ir.DType{
		ir.F32: ir.F32, ir.F16: ir.F16, ir.BF16: ir.BF16,
		ir.Q4_0: ir.Q8_0, ir.Q5_0: ir.Q8_0, ir.Q8_0: ir.Q8_0, ir.MXFP4: ir.Q8_0,
		ir.Q4_1: ir.Q8_1, ir.Q5_1: ir.Q8_1,
		ir.Q2_K: ir.Q8_K, ir.Q3_K: ir.Q8_K, ir.Q4_K: ir.Q8_K, ir.Q5_K: ir.Q8_K, ir.Q6_K: ir.Q8_K,
	}
	for w, a := range cases {
		require.Equal(t, a, ActType(w), "%s", w)
		require.True(t, Supported(w), "%s", w)
		require.Equal(t, mustRowBytes(t, a, 512), ActBytes(w, 512), "%s", w)
	}
	require.False(t, Supported(ir.Q8_K))
	require.False(t, Supported(ir.I32))
}

func TestQuantizeActs(t *testing.T) {
	refs := []struct {
		t   ir.DType
		ref func([]float32) []byte
	}{
		{ir.Q8_0, refQuantQ8_0},
		{ir.Q8_1, refQuantQ8_1},
		{ir.Q8_K, refQuantQ8_K},
	}
	for _, rc := range refs {
		for _, n := range []int{256, 768, 4096} {
			for seed, std := range []float64{1e-3, 1, 300} {
				t.Run(fmt.Sprintf("%s/%d/std=%g", rc.t, n, std), func(t *testing.T) {
					x := randRow(n, std, uint64(n*10+seed))
					// An all-zero block and a block with a single value.
					for i := 0; i < 256; i++ {
						x[i] = 0
					}
					if n > 256 {
						for i := 256; i < 512; i++ {
							x[i] = 0
						}
						x[300] = -2.5
					}
					dst := make([]byte, mustRowBytes(t, rc.t, n))
					for i := range dst {
						dst[i] = 0xa5 // garbage must be overwritten
					}
					QuantizeActs(rc.t, x, dst)
					require.Equal(t, rc.ref(x), dst)
				})
			}
		}
	}
	t.Run("f16", func(t *testing.T) {
		x := randRow(4096, 10, 1)
		x[0], x[1], x[2] = 70000, -1e-6, float32(math.Inf(-1))
		dst := make([]byte, 2*len(x))
		QuantizeActs(ir.F16, x, dst)
		for i, v := range x {
			require.Equal(t, quant.F32ToF16(v), binary.LittleEndian.Uint16(dst[2*i:]), "element %d", i)
		}
	})
	t.Run("bf16", func(t *testing.T) {
		x := randRow(4096, 10, 2)
		dst := make([]byte, 2*len(x))
		QuantizeActs(ir.BF16, x, dst)
		for i, v := range x {
			require.Equal(t, quant.F32ToBF16(v), binary.LittleEndian.Uint16(dst[2*i:]), "element %d", i)
		}
	})
	t.Run("f32", func(t *testing.T) {
		x := randRow(100, 10, 3)
		dst := make([]byte, 4*len(x))
		QuantizeActs(ir.F32, x, dst)
		for i, v := range x {
			require.Equal(t, math.Float32bits(v), binary.LittleEndian.Uint32(dst[4*i:]))
		}
	})
}

// TestDecodeMatchesDequantize ties the test's integer decoding to the
// bit-exact dequantizer of package quant.
func TestDecodeMatchesDequantize(t *testing.T) {
	for _, wt := range weightTypes {
		if !wt.Quantized() {
			continue
		}
		t.Run(wt.String(), func(t *testing.T) {
			const n = 8 * 256
			x := randRow(n, 0.7, uint64(wt)+100)
			w := make([]byte, mustRowBytes(t, wt, n))
			require.NoError(t, quant.Quantize(wt, x, w))
			want := make([]float32, n)
			require.NoError(t, quant.Dequantize(wt, w, want))
			bs, bb := wt.BlockSize(), wt.BlockBytes()
			for i := 0; i < n/bs; i++ {
				got := dequantRef(wt, decodeBlock(wt, w[i*bb:(i+1)*bb]))
				for j, g := range got {
					require.Equal(t, math.Float32bits(want[i*bs+j]), math.Float32bits(g), "block %d element %d: %v vs %v", i, j, want[i*bs+j], g)
				}
			}
		})
	}
}

func makeWeights(t testing.TB, wt ir.DType, n int, seed uint64) ([]byte, []float32) {
	x := randRow(n, 0.05, seed)
	w := make([]byte, mustRowBytes(t, wt, n))
	require.NoError(t, quant.Quantize(wt, x, w))
	deq := make([]float32, n)
	require.NoError(t, quant.Dequantize(wt, w, deq))
	return w, deq
}

func TestDot(t *testing.T) {
	for _, wt := range weightTypes {
		for _, n := range sizesFor(wt) {
			t.Run(fmt.Sprintf("%s/%d", wt, n), func(t *testing.T) {
				for trial := range 3 {
					seed := uint64(n)*131 + uint64(wt)*7 + uint64(trial)
					w, deq := makeWeights(t, wt, n, seed)
					nz := false
					for _, v := range deq {
						nz = nz || v != 0
					}
					require.True(t, nz, "weights all zero")
					x := randRow(n, []float64{1, 0.01, 40}[trial], seed+1)
					a := make([]byte, ActBytes(wt, n))
					QuantizeActs(ActType(wt), x, a)

					got := Dot(wt, n, w, a)

					// Against the float reference Σ dequant(w)·x.
					var ref, mag float64
					for i := range x {
						p := float64(deq[i]) * float64(x[i])
						ref += p
						mag += math.Abs(p)
					}
					tol := 1e-2
					if wt == ir.F32 {
						tol = 1e-5
					}
					require.LessOrEqual(t, math.Abs(float64(got)-ref), tol*mag, "dot %v ref %v Σ|·| %v", got, ref, mag)

					// Against the independent integer reference.
					want := refDot(wt, n, w, a)
					if wt == ir.F32 {
						require.LessOrEqual(t, math.Abs(float64(got)-float64(want)), 1e-6*mag, "dot %v float64 sum %v", got, want)
					} else {
						require.Equal(t, math.Float32bits(want), math.Float32bits(got), "dot %v integer reference %v", got, want)
					}
				}
			})
		}
	}
}

// TestDotZeroActs: an all-zero activation row (zero Q8 scales) gives 0.
func TestDotZeroActs(t *testing.T) {
	for _, wt := range weightTypes {
		n := 512
		w, _ := makeWeights(t, wt, n, 5)
		a := make([]byte, ActBytes(wt, n))
		QuantizeActs(ActType(wt), make([]float32, n), a)
		require.Zero(t, Dot(wt, n, w, a), "%s", wt)
	}
}

func TestDotNoAlloc(t *testing.T) {
	for _, wt := range weightTypes {
		n := 1024
		w, _ := makeWeights(t, wt, n, 9)
		x := randRow(n, 1, 10)
		a := make([]byte, ActBytes(wt, n))
		allocs := testing.AllocsPerRun(10, func() {
			QuantizeActs(ActType(wt), x, a)
			_ = Dot(wt, n, w, a)
		})
		require.Zero(t, allocs, "%s", wt)
	}
}

func BenchmarkDot(b *testing.B) {
	for _, wt := range weightTypes {
		for _, n := range []int{4096, 11008} {
			b.Run(fmt.Sprintf("%s/%d", wt, n), func(b *testing.B) {
				w, _ := makeWeights(b, wt, n, 1)
				x := randRow(n, 1, 2)
				a := make([]byte, ActBytes(wt, n))
				QuantizeActs(ActType(wt), x, a)
				b.SetBytes(int64(len(w)))
				b.ResetTimer()
				var s float32
				for b.Loop() {
					s += Dot(wt, n, w, a)
				}
				_ = s
			})
		}
	}
}

func BenchmarkQuantizeActs(b *testing.B) {
	for _, at := range []ir.DType{ir.F16, ir.Q8_0, ir.Q8_1, ir.Q8_K} {
		n := 4096
		b.Run(fmt.Sprintf("%s/%d", at, n), func(b *testing.B) {
			x := randRow(n, 1, 2)
			a := make([]byte, mustRowBytes(b, at, n))
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				QuantizeActs(at, x, a)
			}
		})
	}
}
