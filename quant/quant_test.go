package quant

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

// allTypes is every dtype the package decodes, with the error bounds its
// quantizer must meet on Gaussian data. maxErr bounds |x - deq(q(x))| per
// block as a fraction of the block's largest magnitude (where the format has a
// simple worst case); rmsErr bounds the RMS error over the whole tensor as a
// fraction of the data's RMS.
var allTypes = []struct {
	d      ir.DType
	maxErr float64 // 0: no per-block bound stated for this format
	rmsErr float64
}{
	{ir.F32, 0, 0},
	// F16 and BF16: half an ulp, relative (11 and 8 significant bits).
	{ir.F16, 0, 0.0003},
	{ir.BF16, 0, 0.0025},
	// Q4_0: step amax/8. Half a step, except at the end opposite to the
	// largest magnitude, where +8 is clamped to +7: a full step. The scale's
	// half-precision rounding adds up to 8 steps × 2^-11 (about amax/2048).
	{ir.Q4_0, 1.0/8 + 0.001, 0.09},
	// Q4_1: range ≤ 2·amax over 15 steps, half a step = amax/15, plus the
	// rounding of d and m to half precision.
	{ir.Q4_1, 1.0/15 + 0.002, 0.06},
	{ir.Q5_0, 1.0/16 + 0.001, 0.045},
	{ir.Q5_1, 1.0/31 + 0.002, 0.03},
	// Q8_0: half of amax/127, plus d's half-precision rounding over 127 steps.
	{ir.Q8_0, 1.0/254 + 0.0005, 0.006},
	// MXFP4: amax lands in [4, 8) scale units; the widest gaps of E2M1 near
	// the top are 4→6 and 6→(clamp) below 8: at most 2 units, ≤ amax/4.
	{ir.MXFP4, 0.25, 0.13},
	// K-quants: the sub-block scales are fitted, not worst-case bounded, so
	// only the RMS error is held to a bound (measured with margin).
	{ir.Q2_K, 0, 0.25},
	{ir.Q3_K, 0, 0.15},
	{ir.Q4_K, 0, 0.06},
	{ir.Q5_K, 0, 0.03},
	{ir.Q6_K, 0, 0.02},
}

// gaussian returns n values ~ N(0, std²) with a fixed seed; a few blocks get a
// large outlier or a constant offset, so that both asymmetric ranges and the
// clamping paths are exercised. Never all zero.
func gaussian(n int, std float64, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * std)
	}
	for i := 0; i+256 <= n; i += 1024 {
		x[i+r.IntN(256)] *= 12                      // outlier
		for j := i + 256; j < i+512 && j < n; j++ { // shifted block
			x[j] += float32(3 * std)
		}
	}
	return x
}

func TestRoundTrip(t *testing.T) {
	const n = 64 * 256
	for _, std := range []float64{0.02, 1, 1000} {
		x := gaussian(n, std, uint64(std*1000)+7)
		for _, tc := range allTypes {
			t.Run(fmt.Sprintf("%s/std=%g", tc.d, std), func(t *testing.T) {
				if std == 1000 && tc.d == ir.F16 {
					t.Skip("values beyond the half range")
				}
				nbytes, err := tc.d.RowBytes(n)
				require.NoError(t, err)
				q := make([]byte, nbytes)
				require.NoError(t, Quantize(tc.d, x, q))
				y := make([]float32, n)
				require.NoError(t, Dequantize(tc.d, q, y))

				var se, sx float64
				bs := tc.d.BlockSize()
				if bs == 1 {
					bs = 32
				}
				for b := 0; b < n; b += bs {
					var amax, emax float64
					for i := b; i < b+bs; i++ {
						require.False(t, math.IsNaN(float64(y[i])) || math.IsInf(float64(y[i]), 0), "element %d", i)
						e := math.Abs(float64(x[i]) - float64(y[i]))
						amax = math.Max(amax, math.Abs(float64(x[i])))
						emax = math.Max(emax, e)
						se += e * e
						sx += float64(x[i]) * float64(x[i])
					}
					if tc.maxErr > 0 {
						require.LessOrEqual(t, emax, tc.maxErr*amax, "block at %d", b)
					}
				}
				rms := math.Sqrt(se / sx)
				t.Logf("relative RMS error %.4g (bound %g)", rms, tc.rmsErr)
				if tc.d == ir.F32 {
					require.Zero(t, rms)
				} else {
					require.LessOrEqual(t, rms, tc.rmsErr)
				}

				// Determinism: the same input gives the same bytes, and the
				// quantizer does not modify its input.
				x2 := append([]float32(nil), x...)
				q2 := make([]byte, nbytes)
				require.NoError(t, Quantize(tc.d, x2, q2))
				require.Equal(t, x, x2)
				require.True(t, bytes.Equal(q, q2))
			})
		}
	}
}

// TestZeros: an all-zero block takes the formats' degenerate paths (zero scale,
// 1/d guarded) and must come back as exact zeros.
func TestZeros(t *testing.T) {
	for _, tc := range allTypes {
		n := 2 * 256
		nbytes, err := tc.d.RowBytes(int64(n))
		require.NoError(t, err)
		q := make([]byte, nbytes)
		require.NoError(t, Quantize(tc.d, make([]float32, n), q))
		y := make([]float32, n)
		for i := range y {
			y[i] = 1
		}
		require.NoError(t, Dequantize(tc.d, q, y))
		for i, v := range y {
			require.Zero(t, v, "%s element %d", tc.d, i)
		}
	}
}

// TestLayouts pins down where each element lives in a block, with hand-made
// blocks, so that a consistent misreading in both directions cannot pass the
// round-trip test.
func TestLayouts(t *testing.T) {
	one := []byte{0x00, 0x3c} // half 1.0
	t.Run("Q4_0", func(t *testing.T) {
		b := append(append([]byte{}, one...), make([]byte, 16)...)
		b[2+3] = 0x9a // element 3: 10-8 = 2, element 19: 9-8 = 1
		y := make([]float32, 32)
		require.NoError(t, Dequantize(ir.Q4_0, b, y))
		require.Equal(t, float32(2), y[3])
		require.Equal(t, float32(1), y[19])
		require.Equal(t, float32(-8), y[0])
	})
	t.Run("Q5_0", func(t *testing.T) {
		b := append(append([]byte{}, one...), make([]byte, 20)...)
		b[2] = 0x01 // qh bit 0: fifth bit of element 0
		b[5] = 0x80 // qh bit 31: fifth bit of element 31
		y := make([]float32, 32)
		require.NoError(t, Dequantize(ir.Q5_0, b, y))
		require.Equal(t, float32(0), y[0])   // 16-16
		require.Equal(t, float32(0), y[31])  // 16-16
		require.Equal(t, float32(-16), y[1]) // 0-16
	})
	t.Run("Q8_0", func(t *testing.T) {
		b := append(append([]byte{}, 0x00, 0x40), make([]byte, 32)...) // d = 2
		b[2+5] = 0xff                                                  // -1
		y := make([]float32, 32)
		require.NoError(t, Dequantize(ir.Q8_0, b, y))
		require.Equal(t, float32(-2), y[5])
	})
	t.Run("MXFP4", func(t *testing.T) {
		b := make([]byte, 17)
		b[0] = 127       // scale 2^0
		b[1] = 0xf7      // element 0: code 7 = 6, element 16: code 15 = -6
		b[2] = 0x09      // element 1: code 9 = -0.5
		b[16] = 0x1 << 4 // element 31: code 1 = 0.5
		y := make([]float32, 32)
		require.NoError(t, Dequantize(ir.MXFP4, b, y))
		require.Equal(t, float32(6), y[0])
		require.Equal(t, float32(-6), y[16])
		require.Equal(t, float32(-0.5), y[1])
		require.Equal(t, float32(0.5), y[31])
	})
	t.Run("Q6_K", func(t *testing.T) {
		b := make([]byte, 210)
		b[208], b[209] = 0x00, 0x3c // d = 1
		for i := 192; i < 208; i++ {
			b[i] = byte(i - 191) // scale of sub-block s is s+1
		}
		b[0] = 0x21     // element 0: low 1, element 64: low 2
		b[128] = 0b11   // element 0: high 3 → 0x31 = 49 → 17
		b[128+32] = 0xc // second half, element 128+32 = 160: high bits (>>2) = 3
		y := make([]float32, 256)
		require.NoError(t, Dequantize(ir.Q6_K, b, y))
		require.Equal(t, float32(17*1), y[0])      // sub-block 0, scale 1
		require.Equal(t, float32((2-32)*5), y[64]) // sub-block 4, scale 5
		require.Equal(t, float32((48-32)*11), y[160])
		require.Equal(t, float32(-32*2), y[16]) // sub-block 1, scale 2
	})
}

// TestMXFP4Scale checks the E8M0 exponent choice near powers of two, where
// ggml's floorf(log2f(amax)) depends on log2f rounding to float32.
func TestMXFP4Scale(t *testing.T) {
	below := func(p float64) float32 { return math.Nextafter32(float32(p), 0) }
	cases := []struct {
		amax float32
		e    byte
	}{
		{4, 127},
		{below(4), 126}, // log2f = 2 - 2^-23·… rounds below 2
		{8, 128},
		{below(8), 128}, // log2f rounds up to 3.0 exactly, as in C
		{1, 125},
		{6, 127},
		{0.09, 121},
	}
	for _, c := range cases {
		x := make([]float32, 32)
		x[5] = c.amax
		x[6] = -c.amax / 3
		b := make([]byte, 17)
		require.NoError(t, Quantize(ir.MXFP4, x, b))
		require.Equal(t, c.e, b[0], "amax %g", c.amax)
	}
	require.Equal(t, float32(math.Ldexp(1, -128)), e8m0Half(0))
	require.Equal(t, float32(math.Ldexp(1, -127)), e8m0Half(1))
	require.Equal(t, float32(0.5), e8m0Half(127))
	require.Equal(t, float32(math.Ldexp(1, 127)), e8m0Half(255))
}

func TestBadInput(t *testing.T) {
	t.Run("unknown dtype", func(t *testing.T) {
		for _, d := range []ir.DType{ir.DType(4), ir.DType(1234), ir.Q8_K, ir.Q8_1, ir.I32, ir.F64} {
			require.False(t, Supported(d), "%s", d)
			require.Error(t, Dequantize(d, make([]byte, 1024), make([]float32, 256)), "%s", d)
			require.Error(t, Quantize(d, make([]float32, 256), make([]byte, 1024)), "%s", d)
		}
	})
	for _, tc := range allTypes {
		d := tc.d
		t.Run(d.String(), func(t *testing.T) {
			require.True(t, Supported(d))
			require.True(t, CanQuantize(d))
			bs := d.BlockSize()
			n := 2 * max(bs, 32)
			nb, err := d.RowBytes(int64(n))
			require.NoError(t, err)
			for _, extra := range []int{-1, 1, -int(nb), int(nb)} {
				require.Error(t, Dequantize(d, make([]byte, int(nb)+extra), make([]float32, n)), "src %+d bytes", extra)
				require.Error(t, Quantize(d, make([]float32, n), make([]byte, int(nb)+extra)), "dst %+d bytes", extra)
			}
			if bs > 1 { // element counts that are not a whole number of blocks
				require.Error(t, Dequantize(d, make([]byte, nb), make([]float32, n-1)))
				require.Error(t, Quantize(d, make([]float32, n+1), make([]byte, nb)))
			}
			require.NoError(t, Dequantize(d, nil, nil)) // zero elements is fine
		})
	}
}

// FuzzDequantize: arbitrary bytes of the right length decode without a panic
// (garbage scales and NaN patterns included); any length mismatch is an error.
func FuzzDequantize(f *testing.F) {
	f.Add(uint8(ir.Q4_K), []byte{1, 2, 3})
	f.Add(uint8(ir.MXFP4), bytes.Repeat([]byte{0xff}, 34))
	f.Add(uint8(ir.Q6_K), bytes.Repeat([]byte{0x7c}, 210))
	f.Fuzz(func(t *testing.T, typ uint8, data []byte) {
		d := ir.DType(typ)
		if !Supported(d) {
			require.Error(t, Dequantize(d, data, make([]float32, 32)))
			return
		}
		bs, bb := d.BlockSize(), d.BlockBytes()
		n := len(data) / bb * bs
		err := Dequantize(d, data, make([]float32, n))
		if len(data)%bb == 0 {
			require.NoError(t, err)
		} else {
			require.Error(t, err)
		}
	})
}

func BenchmarkDequantize(b *testing.B) {
	const n = 1 << 20
	x := gaussian(n, 0.02, 1)
	for _, tc := range allTypes {
		b.Run(tc.d.String(), func(b *testing.B) {
			nb, _ := tc.d.RowBytes(n)
			q := make([]byte, nb)
			if err := Quantize(tc.d, x, q); err != nil {
				b.Fatal(err)
			}
			y := make([]float32, n)
			b.SetBytes(nb) // bytes of quantized input consumed per op
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := Dequantize(tc.d, q, y); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Melem/s")
		})
	}
}

func BenchmarkQuantize(b *testing.B) {
	const n = 1 << 16
	x := gaussian(n, 0.02, 1)
	for _, tc := range allTypes {
		b.Run(tc.d.String(), func(b *testing.B) {
			nb, _ := tc.d.RowBytes(n)
			q := make([]byte, nb)
			b.SetBytes(4 * n) // float32 input bytes per op
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := Quantize(tc.d, x, q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
