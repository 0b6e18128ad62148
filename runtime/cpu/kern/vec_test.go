package kern

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// vecSizes covers empty, below one vector, the tails after 8 and 32, and
// long vectors.
var vecSizes = []int{0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 100, 1000, 4099}

// TestVecKernels runs the float32 vector kernels in every variant against
// float64 references: the dot within 1e-6·Σ|a·b|, axpy within 1 ulp of the
// exact result's magnitude, silu(g)·u within 1e-6 relative (the SIMD exp is
// within 2 ulp), including inputs where exp over- or underflows.
func TestVecKernels(t *testing.T) {
	for _, v := range Variants() {
		for _, n := range vecSizes {
			t.Run(fmt.Sprintf("%s/%d", v, n), func(t *testing.T) {
				useVariant(t, v)
				a, b := randRow(n, 1, uint64(n)), randRow(n, 3, uint64(n)+1)
				var want, mag float64
				for i := range a {
					want += float64(a[i]) * float64(b[i])
					mag += math.Abs(float64(a[i]) * float64(b[i]))
				}
				require.InDelta(t, want, float64(DotF32(a, b)), 1e-6*mag+1e-30, "dot")

				dst := randRow(n, 2, uint64(n)+2)
				ref := make([]float64, n)
				for i := range dst {
					ref[i] = float64(dst[i]) + 0.37*float64(a[i])
				}
				before := append([]float32(nil), dst...)
				Axpy(dst, 0.37, a)
				for i := range dst {
					require.InDelta(t, ref[i], float64(dst[i]), 1.2e-7*(math.Abs(float64(before[i]))+math.Abs(0.37*float64(a[i])))+1e-30, "axpy %d", i)
				}

				e := make([]float32, n)
				m := float32(1.5)
				xs := randRow(n, 20, uint64(n)+4)
				for i := range xs { // x ≤ m, as in a softmax; down to far below exp's range
					xs[i] = m - float32(math.Abs(float64(xs[i])))
				}
				ExpSub(e, xs, m)
				for i := range e {
					r := math.Exp(float64(xs[i] - m))
					require.InDelta(t, r, float64(e[i]), 1e-6*r+1e-37, "exp(%v-%v)", xs[i], m)
				}

				g := randRow(n, 4, uint64(n)+3)
				for i, x := range []float32{100, -100, 88.5, -88.5, 87, -87, 0, 1e-20, -1e-20, 30, -30} {
					if i < n {
						g[(i*7)%n] = x
					}
				}
				out := make([]float32, n)
				SiLUMul(out, g, b)
				for i := range out {
					x := float64(g[i])
					r := x / (1 + math.Exp(-x)) * float64(b[i])
					require.InDelta(t, r, float64(out[i]), 1e-6*math.Abs(r)+1e-30, "silu(%v)·%v", g[i], b[i])
				}
			})
		}
	}
}

func BenchmarkSiLUMul(b *testing.B) {
	for _, v := range Variants() {
		b.Run(v, func(b *testing.B) {
			useVariant(b, v)
			g, u := randRow(5632, 3, 1), randRow(5632, 1, 2)
			dst := make([]float32, len(g))
			for b.Loop() {
				SiLUMul(dst, g, u)
			}
			b.ReportMetric(float64(len(g))*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
		})
	}
}

// TestQuantQ8_0SIMD: the SIMD Q8_0 quantizer writes quantize_row_q8_0_ref's
// bytes exactly (the generic Go encoder is the reference), ties rounded half
// away from zero, zero and tiny blocks included, and the packed side data.
func TestQuantQ8_0SIMD(t *testing.T) {
	for _, v := range Variants() {
		for _, n := range []int{32, 64, 96, 2048, 5632} {
			t.Run(fmt.Sprintf("%s/%d", v, n), func(t *testing.T) {
				x := randRow(n, []float64{1, 1e-3, 300}[n%3], uint64(n))
				// Ties: with amax 127, d = 1 and x·id = x exactly.
				if n >= 64 {
					x[32] = 127
					for i, v := range []float32{2.5, -2.5, 0.5, -0.5, 126.5, -3.5, 0.49999997} {
						x[33+i] = v
					}
				}
				if n >= 96 {
					clear(x[64:96]) // a zero block
				}
				if n >= 2048 {
					for i := 96; i < 128; i++ {
						x[i] = float32(i-110) * 1e-40 // subnormal inputs
					}
				}
				want := make([]byte, PackedActBytes(n))
				useVariant(t, "generic")
				QuantizePackedActs(x, want)
				wantPlain := make([]byte, n/32*34)
				QuantizeActs(ir.Q8_0, x, wantPlain)
				useVariant(t, v)
				got := make([]byte, PackedActBytes(n))
				QuantizePackedActs(x, got)
				require.Equal(t, want, got, "packed activations")
				gotPlain := make([]byte, n/32*34)
				QuantizeActs(ir.Q8_0, x, gotPlain)
				require.Equal(t, wantPlain, gotPlain, "Q8_0 activations")
			})
		}
	}
}

// TestQuantQ8_KSIMD: the SIMD Q8_K quantizer writes quantQ8_K's bytes
// exactly: random blocks at several scales, ties (iscale 1, halves rounded
// to even), +amax and -amax in both orders (the first sets the sign), a zero
// block, subnormal inputs and a block with a NaN.
func TestQuantQ8_KSIMD(t *testing.T) {
	for _, v := range Variants() {
		for _, n := range []int{256, 512, 2048, 5632} {
			t.Run(fmt.Sprintf("%s/%d", v, n), func(t *testing.T) {
				x := randRow(n, []float64{1, 1e-3, 300, 7}[(n/256)%4], uint64(n))
				if n >= 512 {
					// Block 1: max -127 first, so iscale is 1.
					x[256+5] = -127
					x[256+200] = 127
					for i, v := range []float32{2.5, -2.5, 0.5, -0.5, 126.5, -3.5, 0.49999997, 1.5} {
						x[256+40+i] = v
					}
				}
				if n >= 2048 {
					x[512+7], x[512+3] = 40, -40 // +amax after -amax: block 2's max is -40
					clear(x[768:1024])           // a zero block
					for i := 1024; i < 1280; i++ {
						x[i] = float32(i-1100) * 1e-40 // subnormal inputs
					}
					x[1280+17] = float32(math.NaN())
				}
				want := make([]byte, n/256*292)
				quantQ8_K(x, want)
				useVariant(t, v)
				got := make([]byte, len(want))
				for i := range got {
					got[i] = 0xa5 // every byte written
				}
				QuantizeActs(ir.Q8_K, x, got)
				require.Equal(t, want, got)
			})
		}
	}
}

// BenchmarkQuantizePackedActs: activation values per second of the packed
// Q8_0 encoder in each variant.
func BenchmarkQuantizePackedActs(b *testing.B) {
	for _, v := range Variants() {
		b.Run(v, func(b *testing.B) {
			useVariant(b, v)
			x := randRow(5632, 1, 1)
			dst := make([]byte, PackedActBytes(len(x)))
			for b.Loop() {
				QuantizePackedActs(x, dst)
			}
			b.ReportMetric(float64(len(x))*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
		})
	}
}

// TestFloatDots: Dot on F32, F16 and BF16 weights (with activations of the
// same type), in every variant, within 1e-6·Σ|w·a| of the float64 dot of
// the stored values, for lengths with and without a tail after 32.
func TestFloatDots(t *testing.T) {
	for _, v := range Variants() {
		for _, wt := range []ir.DType{ir.F32, ir.F16, ir.BF16} {
			for _, n := range []int{1, 7, 32, 33, 100, 2048, 2048 + 5} {
				t.Run(fmt.Sprintf("%s/%s/%d", v, wt, n), func(t *testing.T) {
					useVariant(t, v)
					w, _ := makeWeights(t, wt, n, uint64(n))
					a := make([]byte, ActBytes(wt, n))
					QuantizeActs(ActType(wt), randRow(n, 2, uint64(n)+9), a)
					var want, mag float64
					for i := 0; i < n; i++ {
						var x, y float64
						switch wt {
						case ir.F32:
							x = float64(math.Float32frombits(uint32(w[4*i]) | uint32(w[4*i+1])<<8 | uint32(w[4*i+2])<<16 | uint32(w[4*i+3])<<24))
							y = float64(math.Float32frombits(uint32(a[4*i]) | uint32(a[4*i+1])<<8 | uint32(a[4*i+2])<<16 | uint32(a[4*i+3])<<24))
						case ir.F16:
							x, y = float64(h16(w[2*i:])), float64(h16(a[2*i:]))
						case ir.BF16:
							x, y = float64(bf16(w[2*i:])), float64(bf16(a[2*i:]))
						}
						want += x * y
						mag += math.Abs(x * y)
					}
					got := Dot(wt, n, w, a)
					require.InDelta(t, want, float64(got), 1e-6*mag+1e-30)
				})
			}
		}
	}
}

// BenchmarkFloatDots: weight GB/s of the float dots per variant.
func BenchmarkFloatDots(b *testing.B) {
	for _, v := range Variants() {
		for _, wt := range []ir.DType{ir.F32, ir.F16} {
			b.Run(fmt.Sprintf("%s/%s", v, wt), func(b *testing.B) {
				useVariant(b, v)
				const n = 4096
				w, _ := makeWeights(b, wt, n, 1)
				a := make([]byte, ActBytes(wt, n))
				QuantizeActs(ActType(wt), randRow(n, 1, 2), a)
				var s float32
				for b.Loop() {
					s += Dot(wt, n, w, a)
				}
				_ = s
				b.ReportMetric(float64(len(w))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// TestAttentionTileKernels: Scores and AxpyRows in every variant against
// float64, for head sizes that are and are not multiples of 8 (the SIMD
// kernels and the Go loops), one to 70 rows, padded strides, and head sizes
// over 64 (the weighted sum keeps 64 floats in registers per pass).
func TestAttentionTileKernels(t *testing.T) {
	for _, v := range Variants() {
		for _, hd := range []int{8, 12, 64, 80, 128, 200} {
			for _, n := range []int{1, 7, 70} {
				t.Run(fmt.Sprintf("%s/hd%d/n%d", v, hd, n), func(t *testing.T) {
					useVariant(t, v)
					stride := hd*3 + 5
					q := randRow(hd, 1, uint64(hd))
					k := randRow((n-1)*stride+hd, 1, uint64(n))
					out := make([]float32, n)
					Scores(q, k, stride, out)
					for j := range out {
						var want, mag float64
						for i := range q {
							p := float64(q[i]) * float64(k[j*stride+i])
							want += p
							mag += math.Abs(p)
						}
						require.InDelta(t, want, float64(out[j]), 1e-6*mag+1e-30, "score %d", j)
					}
					w := randRow(n, 1, 3)
					acc := randRow(hd, 1, 4)
					want := make([]float64, hd)
					mag := make([]float64, hd)
					for i := range acc {
						want[i], mag[i] = float64(acc[i]), math.Abs(float64(acc[i]))
						for j := range w {
							p := float64(w[j]) * float64(k[j*stride+i])
							want[i] += p
							mag[i] += math.Abs(p)
						}
					}
					AxpyRows(acc, w, k, stride)
					for i := range acc {
						require.InDelta(t, want[i], float64(acc[i]), 1e-6*mag[i]+1e-30, "acc %d", i)
					}
				})
			}
		}
	}
}

// BenchmarkQuantizeQ8_K: activation values per second of the Q8_K encoder
// in each variant (generic: the Go loop).
func BenchmarkQuantizeQ8_K(b *testing.B) {
	for _, v := range Variants() {
		b.Run(v, func(b *testing.B) {
			useVariant(b, v)
			x := randRow(5632, 1, 1)
			dst := make([]byte, 5632/256*292)
			for b.Loop() {
				QuantizeActs(ir.Q8_K, x, dst)
			}
			b.ReportMetric(float64(len(x))*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
		})
	}
}

// TestF32ToF16 converts, in every variant, floats whose bits are random
// across the whole range (so every exponent, subnormal halves and
// overflow), the edges of rounding (ties to even at every exponent, 65504,
// 65519, 65520, the least subnormal's half) and NaNs with payloads, and
// wants quant.F32ToF16's half bit for bit: the KV cache's f16 rows.
func TestF32ToF16(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	var x []float32
	for range 4096 {
		x = append(x, math.Float32frombits(r.Uint32()))
	}
	for e := 102; e <= 143; e++ { // halves' exponents and around them
		for _, m := range []uint32{0, 1, 0xfff, 0x1000, 0x1fff, 0x2000, 0x3000, 0x7fffff} {
			b := uint32(e)<<23 | m
			x = append(x, math.Float32frombits(b), math.Float32frombits(b|1<<31))
		}
	}
	x = append(x, 65504, 65519, 65520, 65536, float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		0x1p-25, 0x1p-24, 0x1.8p-25, 0x1p-14, 0x1.ffcp-15,
		math.Float32frombits(0x7f800001), math.Float32frombits(0xffc00000), math.Float32frombits(0x7fbfffff))
	for _, v := range Variants() {
		for _, n := range append(vecSizes, len(x)) {
			t.Run(fmt.Sprintf("%s/%d", v, n), func(t *testing.T) {
				useVariant(t, v)
				src := x[len(x)-min(n, len(x)):]
				got := make([]uint16, len(src))
				Current().F32ToF16(got, src)
				for i, f := range src {
					require.Equal(t, quant.F32ToF16(f), got[i], "%08x", math.Float32bits(f))
				}
			})
		}
	}
}

// TestRMSNormKernels: in every variant, SumSquares gives the bits of the
// eight-lane sum written out here (and lies within 1e-15 of the
// one-chain sum), and ScaleRow those of the scalar rounding steps, with
// and without a gain; the rows mix normal values, subnormals, zeros of
// both signs and values whose squares are near float64's range of
// float32 squares (1e38² ≈ 1e76).
func TestRMSNormKernels(t *testing.T) {
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -3e-42, 1e-38, 3e38, -3e38, 1, -1, 0.1}
	for _, v := range Variants() {
		for _, n := range append(vecSizes, 2048, 5632) {
			t.Run(fmt.Sprintf("%s/%d", v, n), func(t *testing.T) {
				useVariant(t, v)
				ks := Current()
				x := randRow(n, 2, uint64(n)+9)
				for i := range x {
					if i%37 == 5 {
						x[i] = special[i%len(special)]
					}
				}
				var lane [8]float64
				var seq float64
				full := n &^ 7
				for i, e := range x[:full] {
					lane[i%8] += float64(e) * float64(e)
				}
				want := ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]))
				for _, e := range x[full:] {
					want += float64(e) * float64(e)
				}
				for _, e := range x {
					seq += float64(e) * float64(e)
				}
				got := ks.SumSquares(x)
				require.Equal(t, math.Float64bits(want), math.Float64bits(got), "sum of squares %v against %v", got, want)
				require.InDelta(t, seq, got, 1e-15*seq, "one chain")

				scale := 1 / math.Sqrt(got/float64(max(n, 1))+1e-6)
				gain := randRow(n, 1, uint64(n)+10)
				for _, g := range [][]float32{nil, gain} {
					o := make([]float32, n)
					ks.ScaleRow(o, x, scale, g)
					for i := range o {
						w := float32(float64(x[i]) * scale)
						if g != nil {
							w *= g[i]
						}
						require.Equal(t, math.Float32bits(w), math.Float32bits(o[i]), "element %d (gain %v)", i, g != nil)
					}
				}
			})
		}
	}
}
