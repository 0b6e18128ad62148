package kern

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

var mlxTypes = []ir.DType{ir.MLXQ4G32, ir.MLXQ4G64, ir.MLXQ4G128, ir.MLXQ8G32, ir.MLXQ8G64, ir.MLXQ8G128}

// TestDotMLX: an MLX affine row multiplies float32 activations exactly as
// the same weights stored as F32 do (dotF32 of the dequantized row, bit for
// bit), within float rounding of the float64 sum, for every kernel variant
// (none has an MLX kernel of its own); DotRows agrees with Dot and neither
// allocates.
func TestDotMLX(t *testing.T) {
	for _, wt := range mlxTypes {
		require.True(t, Supported(wt), "%s", wt)
		require.Equal(t, ir.F32, ActType(wt), "%s", wt)
		_, group, _ := wt.MLXAffineParams()
		for _, n := range []int{group, 3 * group, 5632, 11008} {
			if n%group != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%d", wt, n), func(t *testing.T) {
				for trial := range 3 {
					seed := uint64(n)*131 + uint64(wt)*7 + uint64(trial)
					w, deq := makeWeights(t, wt, n, seed)
					x := randRow(n, []float64{1, 0.01, 40}[trial], seed+1)
					a := make([]byte, ActBytes(wt, n))
					QuantizeActs(ActType(wt), x, a)
					f := make([]byte, 4*n)
					QuantizeActs(ir.F32, deq, f)
					want := dotF32(n, f, a)
					var ref, mag float64
					for i := range x {
						ref += float64(deq[i]) * float64(x[i])
						mag += math.Abs(float64(deq[i]) * float64(x[i]))
					}
					for _, name := range Variants() {
						ks, err := Use(name)
						require.NoError(t, err)
						got := ks.Dot(wt, n, w, a)
						require.Equal(t, math.Float32bits(want), math.Float32bits(got), "%s: dot %v, as F32 %v", ks.Name(), got, want)
						require.LessOrEqual(t, math.Abs(float64(got)-ref), 1e-6*mag)
						rows := make([]float32, 5)
						stride := len(a)
						aa := make([]byte, 5*stride)
						for r := range 5 {
							copy(aa[r*stride:], a)
						}
						ks.DotRows(wt, n, w, aa, stride, rows)
						for _, s := range rows {
							require.Equal(t, math.Float32bits(got), math.Float32bits(s), "%s: DotRows", ks.Name())
						}
					}
				}
				w, _ := makeWeights(t, wt, n, 9)
				a := make([]byte, ActBytes(wt, n))
				x := randRow(n, 1, 10)
				allocs := testing.AllocsPerRun(10, func() {
					QuantizeActs(ActType(wt), x, a)
					_ = Dot(wt, n, w, a)
				})
				require.Zero(t, allocs, "%s", wt)
			})
		}
	}
}

func BenchmarkDotMLX(b *testing.B) {
	for _, wt := range append([]ir.DType{ir.F32, ir.Q8_0}, mlxTypes...) {
		n := 4096
		b.Run(wt.String(), func(b *testing.B) {
			w, _ := makeWeights(b, wt, n, 1)
			x := randRow(n, 1, 2)
			a := make([]byte, ActBytes(wt, n))
			QuantizeActs(ActType(wt), x, a)
			b.SetBytes(int64(len(w)))
			var s float32
			for b.Loop() {
				s += Dot(wt, n, w, a)
			}
			_ = s
		})
	}
}
