package kern

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

// TestMXFP4SIMD: the MXFP4 dot kernels (one row and four rows) against the
// emulated AVX2 order bit for bit and the generic dot within
// 1e-5·Σ|terms|, in both SIMD variants, over random rows whose scale
// bytes cover the whole E8M0 range a trained model uses, and the exact
// integer case (e = 128: scale 1, so every float step is exact).
func TestMXFP4SIMD(t *testing.T) {
	for _, v := range []string{"avx2", "avx512"} {
		for _, nb := range blockCounts {
			t.Run(fmt.Sprintf("%s/%d", v, nb), func(t *testing.T) {
				useVariant(t, v)
				n := 32 * nb
				w, _ := makeWeights(t, ir.MXFP4, n, uint64(nb))
				ab := ActBytes(ir.MXFP4, n)
				a := make([]byte, 5*ab)
				for r := 0; r < 5; r++ {
					QuantizeActs(ir.Q8_0, randRow(n, []float64{1, 0.01, 40, 3, 0.5}[r], uint64(nb+r)), a[r*ab:(r+1)*ab])
				}
				rows := make([]float32, 5)
				DotRows(ir.MXFP4, n, w, a, ab, rows)
				for r := 0; r < 5; r++ {
					act := a[r*ab : (r+1)*ab]
					got := Dot(ir.MXFP4, n, w, act)
					emu, mag := emulateAVX2(ir.MXFP4, nb, w, act)
					gen := dotWith("generic", ir.MXFP4, n, w, act)
					require.Equal(t, math.Float32bits(emu), math.Float32bits(got), "row %d: kernel %v, emulated %v", r, got, emu)
					require.Equal(t, math.Float32bits(got), math.Float32bits(rows[r]), "DotRows row %d", r)
					require.LessOrEqual(t, math.Abs(float64(got-gen)), 1e-5*mag+1e-30, "row %d: kernel %v, generic %v", r, got, gen)
				}
				// Exact integers: all scales 1.
				wi := append([]byte(nil), w...)
				ai := append([]byte(nil), a[:ab]...)
				for b := 0; b < nb; b++ {
					wi[b*17] = 128
					ai[b*34], ai[b*34+1] = 0x00, 0x3c // f16 1.0
				}
				var want int64
				for b := 0; b < nb; b++ {
					q, _ := elemsQ(ir.MXFP4, wi, b)
					for j := range q {
						want += int64(q[j]) * int64(int8(ai[b*34+2+j]))
					}
				}
				require.Equal(t, float32(want), Dot(ir.MXFP4, n, wi, ai), "integer dot")
			})
		}
	}
}

// BenchmarkMXFP4Dot: weight GB/s of the MXFP4 dot per variant.
func BenchmarkMXFP4Dot(b *testing.B) {
	for _, v := range Variants() {
		b.Run(v, func(b *testing.B) {
			useVariant(b, v)
			const n = 4096
			w, _ := makeWeights(b, ir.MXFP4, n, 1)
			a := make([]byte, ActBytes(ir.MXFP4, n))
			QuantizeActs(ir.Q8_0, randRow(n, 1, 2), a)
			var s float32
			for b.Loop() {
				s += Dot(ir.MXFP4, n, w, a)
			}
			_ = s
			b.ReportMetric(float64(len(w))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}
