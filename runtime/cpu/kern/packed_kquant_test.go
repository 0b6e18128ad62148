package kern

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

// emulateQ4KGroup computes what the packed Q4_K group kernels compute for
// one weight row (original layout) and one Q8_K activation row, in scalar
// Go: per super-block the exact integer sums isum = Σ sc·q·y and msum =
// Σ mn[s]·(bs[2s]+bs[2s+1]), then acc = fma(d_y·d_w, isum, acc) and acc =
// fma(-(d_y·dmin_w), msum, acc). It also returns Σ|terms|.
func emulateQ4KGroup(nb int, w, a []byte) (float32, float64) {
	return emulateQ45KGroup(ir.Q4_K, nb, w, a)
}

// emulateQ45KGroup is emulateQ4KGroup for Q4_K or Q5_K rows (the packed Q5_K
// kernels are the Q4_K ones with a fifth bit in each quant), and for Q2_K,
// whose minima are per 16 elements (Q4_K's per 32 are each two sub-blocks'
// here: msum is the same integer).
func emulateQ45KGroup(wt ir.DType, nb int, w, a []byte) (float32, float64) {
	var acc float32
	var mag float64
	for i := 0; i < nb; i++ {
		b := decodeKQ(wt, w[i*wt.BlockBytes():])
		mn := b.mn16 // per 16 elements
		if wt != ir.Q2_K {
			for s := range mn {
				mn[s] = b.mn[s/2]
			}
		}
		y := (*[292]byte)(a[i*292:])
		var isum, msum, iAbs, mAbs int64
		for e, q := range b.q {
			p := int64(b.sc[e/16]) * int64(q) * int64(i8(y[4+e]))
			isum += p
			iAbs += max(p, -p)
			p = int64(mn[e/16]) * int64(i8(y[4+e]))
			mAbs += max(p, -p)
		}
		for s := 0; s < 16; s++ {
			msum += int64(mn[s]) * int64(bsum(y, s))
		}
		if isum != int64(int32(isum)) || msum != int64(int32(msum)) {
			panic("sum overflows int32")
		}
		yd := q8kD(y)
		d, dm := yd*b.d, yd*b.dm
		acc = fma32(d, float32(isum), acc)
		acc = fma32(-dm, float32(msum), acc)
		mag += math.Abs(float64(d))*float64(iAbs) + math.Abs(float64(dm))*float64(mAbs)
	}
	return acc, mag
}

// emulateQ6KGroup computes what the packed Q6_K group kernels compute for
// one weight row (original layout) and one Q8_K activation row
// (emulateOffsetGroup with Q6_K's offset 32).
func emulateQ6KGroup(nb int, w, a []byte) (float32, float64) {
	return emulateOffsetGroup(ir.Q6_K, 32, nb, w, a)
}

// emulateQ3KGroup is emulateQ6KGroup for Q3_K (offset 4; its scales are
// the 6-bit ones minus 32).
func emulateQ3KGroup(nb int, w, a []byte) (float32, float64) {
	return emulateOffsetGroup(ir.Q3_K, 4, nb, w, a)
}

// emulateOffsetGroup computes what the packed group kernels of wt, whose
// weights are code − off, compute for one weight row (original layout) and
// one Q8_K activation row: per super-block the exact isum = Σ sc·q·y −
// off·Σ_s sc[s]·bs[s] (q the unsigned codes), then acc = fma(d_y·d_w,
// isum, acc). It also returns Σ|terms|.
func emulateOffsetGroup(wt ir.DType, off int32, nb int, w, a []byte) (float32, float64) {
	var acc float32
	var mag float64
	for i := 0; i < nb; i++ {
		b := decodeKQ(wt, w[i*wt.BlockBytes():])
		y := (*[292]byte)(a[i*292:])
		var isum, abs int64
		for e, q := range b.q {
			isum += int64(b.sc[e/16]) * int64(q) * int64(i8(y[4+e]))
			p := int64(b.sc[e/16]) * int64(q-off) * int64(i8(y[4+e]))
			abs += max(p, -p)
		}
		for s := 0; s < 16; s++ {
			isum -= int64(off) * int64(b.sc[s]) * int64(bsum(y, s))
		}
		if isum != int64(int32(isum)) {
			panic("sum overflows int32")
		}
		d := q8kD(y) * b.d
		acc = fma32(d, float32(isum), acc)
		mag += math.Abs(float64(d)) * float64(abs)
	}
	return acc, mag
}

// emulateQ2KGroup computes what the packed Q2_K group kernels compute for
// one weight row (original layout) and one Q8_K activation row: the Q4_K
// kernels' sums and float steps (emulateQ45KGroup) with Q2_K's scale and
// minimum per 16 elements.
func emulateQ2KGroup(nb int, w, a []byte) (float32, float64) {
	return emulateQ45KGroup(ir.Q2_K, nb, w, a)
}

// TestPackedQ2K checks the packed Q2_K group kernels as TestPackedQ4K does
// the Q4_K ones, against emulateQ2KGroup.
func TestPackedQ2K(t *testing.T) {
	for _, v := range []string{"avx2", "avx512", "neon"} {
		t.Run(v, func(t *testing.T) { testPackedKQuant(t, v, ir.Q2_K, emulateQ2KGroup) })
	}
}

// TestPackedQ3K checks the packed Q3_K group kernels as TestPackedQ4K does
// the Q4_K ones, against emulateQ3KGroup.
func TestPackedQ3K(t *testing.T) {
	for _, v := range []string{"avx2", "avx512", "neon"} {
		t.Run(v, func(t *testing.T) { testPackedKQuant(t, v, ir.Q3_K, emulateQ3KGroup) })
	}
}

// TestPackedQ5K checks the packed Q5_K group kernels as TestPackedQ4K does
// the Q4_K ones.
func TestPackedQ5K(t *testing.T) {
	for _, v := range []string{"avx2", "avx512", "neon"} {
		t.Run(v, func(t *testing.T) {
			testPackedKQuant(t, v, ir.Q5_K, func(nb int, w, a []byte) (float32, float64) {
				return emulateQ45KGroup(ir.Q5_K, nb, w, a)
			})
		})
	}
}

// TestPackedQ6K checks the packed Q6_K group kernels as TestPackedQ4K does
// the Q4_K ones, against emulateQ6KGroup.
func TestPackedQ6K(t *testing.T) {
	for _, v := range []string{"avx2", "avx512", "neon"} {
		t.Run(v, func(t *testing.T) { testPackedKQuant(t, v, ir.Q6_K, emulateQ6KGroup) })
	}
}

// TestPackedQ4K checks the packed Q4_K group kernels against the emulated
// order bit for bit and against the generic Dot within 1e-5·Σ|terms|, with
// and without a partial group, one to three groups (the two-group kernel
// and a lone group after it), one to seventeen activation rows (the
// eight-, four- and one-row kernels and their tails) and padded strides;
// then Dots over sub-ranges (groups paired from an odd one, partial groups)
// against the whole range bit for bit.
func TestPackedQ4K(t *testing.T) {
	for _, v := range []string{"avx2", "avx512", "neon"} {
		t.Run(v, func(t *testing.T) { testPackedQ4K(t, v) })
	}
}

func testPackedQ4K(t *testing.T, variant string) {
	testPackedKQuant(t, variant, ir.Q4_K, emulateQ4KGroup)
}

// testPackedKQuant is TestPackedQ4K for the k-quant wt, emulated by emu.
func testPackedKQuant(t *testing.T, variant string, wt ir.DType, emu func(nb int, w, a []byte) (float32, float64)) {
	useVariant(t, variant)
	if !PackedSupported(wt) {
		t.Skipf("no %s group kernels", wt)
	}
	for _, n := range []int{8, 13, 1, 16, 29} {
		for _, k := range []int{256, 2048, 5632} {
			t.Run(fmt.Sprintf("%dx%d", n, k), func(t *testing.T) {
				nb := k / 256
				rb := nb * wt.BlockBytes()
				data := make([]byte, n*rb)
				for i := 0; i < n; i++ {
					w, _ := makeWeights(t, wt, k, uint64(1000*n+i))
					copy(data[i*rb:], w)
				}
				p := Pack(wt, n, k, data)
				require.NotNil(t, p)
				ab := p.ActBytes()
				require.Equal(t, ActBytes(wt, k), ab)
				for _, R := range []int{1, 4, 5, 8, 9, 13, 17} {
					stride := ab + 16*(R%2)
					a := make([]byte, R*stride)
					for r := 0; r < R; r++ {
						p.QuantizeActs(Current(), randRow(k, []float64{1, 0.02, 25}[r%3], uint64(r+7*R)), a[r*stride:])
					}
					checkPackedDots(t, p, data, a, stride, R, func(w, act []byte) (float32, float64) {
						return emu(nb, w, act)
					})
					if n >= 16 && k == 2048 {
						checkDotsRanges(t, p, a, stride, R)
					}
				}
			})
		}
	}
}

// checkDotsRanges requires Dots over sub-ranges of p's rows (starting on and
// off a group, even and odd group counts, partial groups) to give the whole
// range's results bit for bit.
func checkDotsRanges(t *testing.T, p *Packed, a []byte, stride, R int) {
	t.Helper()
	n := p.n
	whole := make([]float32, R*n)
	p.Dots(0, n, a, stride, R, whole, n)
	for _, rg := range [][2]int{{8, 16}, {8, n - 8}, {0, 24}, {3, 21}, {5, n - 5}, {16, n - 16}} {
		row0, count := rg[0], min(rg[1], n-rg[0])
		if count <= 0 {
			continue
		}
		ld := count + 3
		got := make([]float32, R*ld)
		p.Dots(row0, count, a, stride, R, got, ld)
		for r := 0; r < R; r++ {
			for j := 0; j < count; j++ {
				require.Equal(t, math.Float32bits(whole[r*n+row0+j]), math.Float32bits(got[r*ld+j]),
					"rows [%d,+%d): row %d act %d", row0, count, row0+j, r)
			}
		}
	}
}
