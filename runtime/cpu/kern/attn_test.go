package kern

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// attnCache is a random f16 and q8_0 cache of n rows of width w, rows
// padded (strides not equal to the width), with the decoded values of both.
type attnCache struct {
	f16             []uint16
	q8              []byte
	f16Stride, q8St int // halves, bytes
	f16Vals, q8Vals [][]float32
}

func newAttnCache(t *testing.T, n, w int, seed uint64) attnCache {
	c := attnCache{f16Stride: w + 24, q8St: (w/Q8Block + 1) * Q8BlockBytes}
	c.f16 = make([]uint16, n*c.f16Stride)
	c.q8 = make([]byte, n*c.q8St)
	for j := 0; j < n; j++ {
		x := randRow(w, 1, seed+uint64(j))
		row := make([]float32, w)
		for i, v := range x {
			c.f16[j*c.f16Stride+i] = quant.F32ToF16(v)
			row[i] = quant.F16ToF32(c.f16[j*c.f16Stride+i])
		}
		c.f16Vals = append(c.f16Vals, row)
		if w%Q8Block == 0 {
			require.NoError(t, quant.Quantize(ir.Q8_0, x, c.q8[j*c.q8St:j*c.q8St+w/Q8Block*Q8BlockBytes]))
			dq := make([]float32, w)
			require.NoError(t, quant.Dequantize(ir.Q8_0, c.q8[j*c.q8St:j*c.q8St+w/Q8Block*Q8BlockBytes], dq))
			c.q8Vals = append(c.q8Vals, dq)
		}
	}
	return c
}

// The f16 and q8_0 tile kernels, in every variant, give bit for bit the
// kernels' order computed here with correctly rounded fused multiply-adds
// (fma32) and hsum8 — and so does the generic variant's Go — and that order
// is within 1e-6·Σ|terms| of the float64 sums of the decoded values.
func TestAttentionCacheKernelsExact(t *testing.T) {
	for _, v := range Variants() {
		for _, hd := range []int{8, 24, 32, 64, 96, 128} {
			for _, n := range []int{1, 7, 70} {
				t.Run(fmt.Sprintf("%s/hd%d/n%d", v, hd, n), func(t *testing.T) {
					useVariant(t, v)
					ks := Current()
					c := newAttnCache(t, n, hd, uint64(hd*1000+n))
					q := randRow(hd, 1, 7)
					w := randRow(n, 1, 3)
					acc0 := randRow(hd, 1, 4)

					// f16: scores and weighted values.
					out := make([]float32, n)
					ks.ScoresF16(q, c.f16, c.f16Stride, out)
					for j := range out {
						var l [8]float32
						for i := range q {
							l[i%8] = fma32(q[i], c.f16Vals[j][i], l[i%8])
						}
						if hd%8 == 0 || v == "generic" {
							require.Equal(t, hsum8(&l), out[j], "f16 score %d", j)
						}
						requireNear64(t, q, c.f16Vals[j], out[j], "f16 score")
					}
					acc := append([]float32(nil), acc0...)
					ks.AxpyRowsF16(acc, w, c.f16, c.f16Stride)
					want := append([]float32(nil), acc0...)
					for j := range w {
						for i := range want {
							want[i] = fma32(c.f16Vals[j][i], w[j], want[i])
						}
					}
					if hd%8 == 0 || v == "generic" {
						require.Equal(t, want, acc, "f16 weighted values")
					}
					if hd%Q8Block != 0 {
						return
					}

					// q8_0.
					ks.ScoresQ8(q, c.q8, c.q8St, out)
					for j := range out {
						var l [8]float32
						for b := 0; b < hd/Q8Block; b++ {
							blk := c.q8[j*c.q8St+b*Q8BlockBytes:]
							d := quant.F16ToF32(uint16(blk[0]) | uint16(blk[1])<<8)
							var bl [8]float32
							for i := 0; i < Q8Block; i++ {
								bl[i%8] = fma32(q[b*Q8Block+i], float32(int8(blk[2+i])), bl[i%8])
							}
							for k := range l {
								l[k] = fma32(d, bl[k], l[k])
							}
						}
						require.Equal(t, hsum8(&l), out[j], "q8_0 score %d", j)
						requireNear64(t, q, c.q8Vals[j], out[j], "q8_0 score")
					}
					acc = append(acc[:0], acc0...)
					ks.AxpyRowsQ8(acc, w, c.q8, c.q8St)
					want = append(want[:0], acc0...)
					for j := range w {
						for b := 0; b < hd/Q8Block; b++ {
							blk := c.q8[j*c.q8St+b*Q8BlockBytes:]
							wd := w[j] * quant.F16ToF32(uint16(blk[0])|uint16(blk[1])<<8)
							for i := 0; i < Q8Block; i++ {
								want[b*Q8Block+i] = fma32(float32(int8(blk[2+i])), wd, want[b*Q8Block+i])
							}
						}
					}
					require.Equal(t, want, acc, "q8_0 weighted values")
					for i := range acc {
						var s, mag float64 = float64(acc0[i]), math.Abs(float64(acc0[i]))
						for j := range w {
							p := float64(w[j]) * float64(c.q8Vals[j][i])
							s += p
							mag += math.Abs(p)
						}
						require.InDelta(t, s, float64(acc[i]), 1e-6*mag+1e-30, "q8_0 acc %d", i)
					}
				})
			}
		}
	}
}

// requireNear64 holds got to the float64 dot of a and b.
func requireNear64(t *testing.T, a, b []float32, got float32, what string) {
	t.Helper()
	var s, mag float64
	for i := range a {
		p := float64(a[i]) * float64(b[i])
		s += p
		mag += math.Abs(p)
	}
	require.InDelta(t, s, float64(got), 1e-6*mag+1e-30, what)
}
