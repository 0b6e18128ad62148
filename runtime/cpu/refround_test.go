package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
	"github.com/minerva-llm/minerva/runtime/cpu/kern"
)

// The packed kernels read Q8_2-rounded activations in their own format
// (quantizeQ8_2Packed); they must give the dots of the plain Q8_0-layout
// encoding with kern.Dot, up to the group kernels' float summation order.
// A change of the packed activation format in kern fails here.
func TestQ8_2PackedMatchesUnpacked(t *testing.T) {
	for _, wt := range []ir.DType{ir.Q8_0, ir.Q4_0} {
		t.Run(wt.String(), func(t *testing.T) {
			if !kern.PackedSupported(wt) {
				t.Skipf("the active kernels have no packed %s kernels", wt)
			}
			const n, k, R = 24, 256, 5
			r := rand.New(rand.NewPCG(3, 4))
			wf := make([]float32, n*k)
			for i := range wf {
				wf[i] = float32(r.NormFloat64())
			}
			rb, err := wt.RowBytes(k)
			require.NoError(t, err)
			w := make([]byte, n*int(rb))
			require.NoError(t, quant.Quantize(wt, wf, w))
			pk := kern.Pack(wt, n, k, w)
			require.NotNil(t, pk)
			defer pk.Free()

			pab, ab := kern.PackedActBytes(k), kern.ActBytes(wt, k)
			packed, plain := make([]byte, R*pab), make([]byte, R*ab)
			for row := 0; row < R; row++ {
				x := make([]float32, k)
				for i := range x {
					x[i] = float32(r.NormFloat64() * 3)
				}
				quantizeQ8_2Packed(x, packed[row*pab:(row+1)*pab])
				quantizeQ8_2(x, plain[row*ab:(row+1)*ab])
			}
			got := make([]float32, R*n)
			pk.Dots(0, n, packed, pab, R, got, n)
			for row := 0; row < R; row++ {
				for j := 0; j < n; j++ {
					want := kern.Dot(wt, k, w[j*int(rb):(j+1)*int(rb)], plain[row*ab:])
					require.InDelta(t, want, got[row*n+j], 1e-5*math.Max(1, math.Abs(float64(want))), "row %d, weight row %d", row, j)
				}
			}
		})
	}
}

// quantizeQ8_2 follows README-gptoss's recipe: bf16 scale, quants rounded
// half to even, and a zero block stays zero.
func TestQuantizeQ8_2(t *testing.T) {
	x := make([]float32, 64)
	x[0] = 127 * 2 // amax 254: d = 2, 1/d = 0.5 exactly
	x[1] = 3       // 1.5 quants: rint(1.5) = 2 (ties to even)
	x[2] = 5       // 2.5 quants: rint(2.5) = 2 (ggml's roundf gives 3)
	x[3] = -5      // −2.5: −2
	b := make([]byte, 2*34)
	quantizeQ8_2(x, b)
	require.Equal(t, float32(2), quant.F16ToF32(uint16(b[0])|uint16(b[1])<<8))
	require.Equal(t, []int8{127, 2, 2, -2}, []int8{int8(b[2]), int8(b[3]), int8(b[4]), int8(b[5])})
	require.Equal(t, make([]byte, 34), b[34:], "an all-zero block")
}
