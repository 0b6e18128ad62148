package kern

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

// emulateGroup computes what the Q4_0 group kernels compute for one weight
// row (original layout) and one packed activation row, in scalar Go: per
// block the exact integer dot, then acc = fma(f16(d_w)·d_a, dot, acc).
// It also returns Σ|terms| for tolerance bounds.
func emulateGroup(wt ir.DType, nb int, w, a []byte) (float32, float64) {
	var acc float32
	var mag float64
	for b := 0; b < nb; b++ {
		qw, dw := elemsQ(wt, w, b)
		y := a[b*34:]
		da := h16(y)
		var dot int32
		var sumAbs int64
		for j := range qw {
			p := qw[j] * int32(int8(y[2+j]))
			dot += p
			sumAbs += int64(max(p, -p))
		}
		acc = fma32(dw*da, float32(dot), acc)
		mag += math.Abs(float64(dw*da)) * float64(sumAbs)
	}
	return acc, mag
}

// TestPacked checks the group kernels against the emulated order bit for
// bit and against the generic Dot within 1e-5·Σ|terms|, for row counts with
// and without a partial group, one to nine activation rows (the four-row
// kernel and the one-row tail), and padded strides.
func TestPacked(t *testing.T) {
	for _, v := range []string{"avx2", "avx512", "neon"} {
		t.Run(v, func(t *testing.T) { testPacked(t, v) })
	}
}

func testPacked(t *testing.T, variant string) {
	useVariant(t, variant)
	for _, wt := range []ir.DType{ir.Q4_0, ir.Q8_0, ir.MXFP4} {
		if wt == ir.MXFP4 && !PackedSupported(wt) {
			continue // group kernels on the avx512 (VNNI) and neon variants only
		}
		// 40 rows: two pairs of groups for the sixteen-row kernels, then
		// one group alone.
		for _, n := range []int{8, 13, 64, 1, 40} {
			for _, k := range []int{32, 96, 2048, 5632} {
				t.Run(fmt.Sprintf("%s/%dx%d", wt, n, k), func(t *testing.T) {
					nb := k / 32
					rb := nb * wt.BlockBytes()
					data := make([]byte, n*rb)
					for i := 0; i < n; i++ {
						w, _ := makeWeights(t, wt, k, uint64(1000*n+i))
						copy(data[i*rb:], w)
					}
					p := Pack(wt, n, k, data)
					require.NotNil(t, p)
					ab := PackedActBytes(k)
					for _, R := range []int{1, 4, 5, 9, 8, 17} {
						stride := ab + 16*(R%2)
						a := make([]byte, R*stride)
						for r := 0; r < R; r++ {
							QuantizePackedActs(randRow(k, []float64{1, 0.02, 25}[r%3], uint64(r+7*R)), a[r*stride:])
						}
						checkPackedDots(t, p, data, a, stride, R, func(w, act []byte) (float32, float64) {
							return emulateGroup(wt, nb, w, act)
						})
					}
				})
			}
		}
	}
}

// checkPackedDots runs p.Dots over all of p's rows (data: their original
// bytes) against R activation rows of a, stride bytes apart, and checks
// each whole group's result bit for bit against emulate and within
// 1e-5·Σ|terms| of the generic Dot, and the partial group's rows against
// Dot.
func checkPackedDots(t *testing.T, p *Packed, data, a []byte, stride, R int, emulate func(w, act []byte) (float32, float64)) {
	t.Helper()
	n, k, wt, ab := p.n, p.k, p.wt, p.ActBytes()
	rb := len(data) / n
	dst := make([]float32, R*n)
	p.Dots(0, n, a, stride, R, dst, n)
	for r := 0; r < R; r++ {
		for j := 0; j < n; j++ {
			w, act := data[j*rb:][:rb], a[r*stride:][:ab]
			got := dst[r*n+j]
			gen := dotWith("generic", wt, k, w, act)
			if j < n-n%8 {
				emu, mag := emulate(w, act)
				require.Equal(t, math.Float32bits(emu), math.Float32bits(got), "row %d act %d: kernel %v, emulated %v", j, r, got, emu)
				require.LessOrEqual(t, math.Abs(float64(got-gen)), 1e-5*mag+1e-30, "row %d act %d", j, r)
			} else {
				require.Equal(t, Dot(wt, k, w, act), got, "tail row %d", j)
			}
		}
	}
}

// TestPackedActsSide: the side data is 8·Σq and the f16 scale as float32,
// and the Q8_0 part equals QuantizeActs' bytes.
func TestPackedActsSide(t *testing.T) {
	x := randRow(256, 1, 3)
	a := make([]byte, PackedActBytes(256))
	QuantizePackedActs(x, a)
	plain := make([]byte, ActBytes(ir.Q4_0, 256))
	QuantizeActs(ir.Q8_0, x, plain)
	require.Equal(t, plain, a[:len(plain)])
	for b := 0; b < 8; b++ {
		var s int32
		for _, q := range plain[b*34+2 : b*34+34] {
			s += int32(int8(q))
		}
		side := a[len(plain)+8*b:]
		require.Equal(t, 8*s, int32(uint32(side[0])|uint32(side[1])<<8|uint32(side[2])<<16|uint32(side[3])<<24))
		require.Equal(t, h16(plain[b*34:]), math.Float32frombits(uint32(side[4])|uint32(side[5])<<8|uint32(side[6])<<16|uint32(side[7])<<24))
	}
}

func TestPackNilWithoutKernels(t *testing.T) {
	useVariant(t, "generic")
	require.Nil(t, Pack(ir.Q4_0, 8, 32, make([]byte, 8*18)))
	require.False(t, PackedSupported(ir.Q4_0))
	require.False(t, PackedSupported(ir.Q8_0))
}

// BenchmarkPackedQ4_0: weight GB/s of the group kernels against Dot, one
// activation row (decode) and 32 (prefill, counted per activation row).
func BenchmarkPacked(b *testing.B) {
	for _, c := range []struct {
		wt      ir.DType
		variant string
	}{{ir.Q4_0, "avx2"}, {ir.Q8_0, "avx2"}, {ir.Q5_K, "avx512"}, {ir.Q6_K, "avx512"}} {
		b.Run(c.wt.String(), func(b *testing.B) { benchPacked(b, c.wt, c.variant) })
	}
}

// benchPacked compares the group kernels of wt (Packed.Dots) with DotRows
// over the original rows, in variant, at one and 32 activation rows (decode
// and prefill), in weight bytes per second times the rows.
func benchPacked(b *testing.B, wt ir.DType, variant string) {
	const n, k = 256, 2048
	rb := k / wt.BlockSize() * wt.BlockBytes()
	data := make([]byte, n*rb)
	for i := 0; i < n; i++ {
		w, _ := makeWeights(b, wt, k, uint64(i))
		copy(data[i*rb:], w)
	}
	for _, R := range []int{1, 32} {
		// The packed and the original rows read the same activation
		// format, except Q4_0 and Q8_0 (PackedActBytes for the groups).
		ab, pab := ActBytes(wt, k), ActBytes(wt, k)
		if !packedQ8K(wt) {
			pab = PackedActBytes(k)
		}
		a, pa := make([]byte, R*ab), make([]byte, R*pab)
		for r := 0; r < R; r++ {
			x := randRow(k, 1, uint64(r))
			QuantizeActs(ActType(wt), x, a[r*ab:])
			if packedQ8K(wt) {
				copy(pa[r*pab:], a[r*ab:][:ab])
			} else {
				QuantizePackedActs(x, pa[r*pab:])
			}
		}
		dst := make([]float32, R*n)
		b.Run(fmt.Sprintf("packed/R=%d", R), func(b *testing.B) {
			useVariant(b, variant)
			p := Pack(wt, n, k, data)
			if p == nil {
				b.Skipf("no %s group kernels in %s", wt, variant)
			}
			for b.Loop() {
				p.Dots(0, n, pa, pab, R, dst, n)
			}
			b.ReportMetric(float64(len(data))*float64(R)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
		b.Run(fmt.Sprintf("dot/R=%d", R), func(b *testing.B) {
			useVariant(b, variant)
			for b.Loop() {
				for j := 0; j < n; j++ {
					DotRows(wt, k, data[j*rb:][:rb], a, ab, dst[:R])
				}
			}
			b.ReportMetric(float64(len(data))*float64(R)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// TestPackedMXFP4Scales: the MXFP4 group kernels' E8M0 scales hold for
// exponent bytes across the range, the subnormal 2^-128 and 2^-127 (e = 0,
// 1) and the first normal one (e = 2) included, bit for bit against the
// emulated order: eight rows of 8 blocks whose scale bytes run 0, 3, …,
// 189 (larger ones overflow float32 dots of these activations).
func TestPackedMXFP4Scales(t *testing.T) {
	for _, v := range []string{"avx2", "avx512", "neon"} {
		t.Run(v, func(t *testing.T) {
			useVariant(t, v)
			if !PackedSupported(ir.MXFP4) {
				t.Skip("no MXFP4 group kernels in this variant")
			}
			const n, k = 8, 256
			nb := k / 32
			data, _ := makeWeights(t, ir.MXFP4, n*k, 77)
			for b := 0; b < n*nb; b++ {
				data[b*17] = byte(3 * b) // 0, 3, …, 189; row 0 below
			}
			// Row 0 (blocks 0..7) has only the smallest scales, so that its
			// sum is theirs alone rather than lost beside larger blocks.
			for b, e := range []byte{0, 1, 2, 0, 1, 2, 1, 0} {
				data[b*17] = e
			}
			p := Pack(ir.MXFP4, n, k, data)
			require.NotNil(t, p)
			ab := PackedActBytes(k)
			for _, R := range []int{1, 4, 5, 8} {
				a := make([]byte, R*ab)
				for r := 0; r < R; r++ {
					QuantizePackedActs(randRow(k, 1, uint64(90+r)), a[r*ab:])
				}
				checkPackedDots(t, p, data, a, ab, R, func(w, act []byte) (float32, float64) {
					return emulateGroup(ir.MXFP4, nb, w, act)
				})
			}
		})
	}
}

// BenchmarkPackedMXFP4: a 256×2880 MXFP4 matrix (gpt-oss-20b's expert row
// length) against R activation rows on the avx2 and avx512 variants: the
// group kernels against DotRows over the original rows (the MoE path before
// experts were packed, and on avx2 before it had MXFP4 group kernels). GB/s
// counts weight bytes × R. An eight-row kernel (gemm8) was tried on avx512
// and measured no faster than the four-row one at R = 32 (57.6–59.5 against
// 57.9–59.4 GB/s): vpdpbusd, not the unpacking, bounds it.
func BenchmarkPackedMXFP4(b *testing.B) {
	const n, k = 256, 2880
	rb := k / 32 * 17
	data := make([]byte, n*rb)
	for i := 0; i < n; i++ {
		w, _ := makeWeights(b, ir.MXFP4, k, uint64(i))
		copy(data[i*rb:], w)
	}
	ab := PackedActBytes(k)
	for _, v := range []string{"avx2", "avx512"} {
		b.Run(v, func(b *testing.B) {
			useVariant(b, v)
			if !PackedSupported(ir.MXFP4) {
				b.Skip("no MXFP4 group kernels")
			}
			for _, R := range []int{1, 32} {
				a := make([]byte, R*ab)
				for r := 0; r < R; r++ {
					QuantizePackedActs(randRow(k, 1, uint64(r)), a[r*ab:])
				}
				dst := make([]float32, R*n)
				report := func(b *testing.B) {
					b.ReportMetric(float64(len(data))*float64(R)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				}
				b.Run(fmt.Sprintf("packed/R=%d", R), func(b *testing.B) {
					p := Pack(ir.MXFP4, n, k, data)
					defer p.Free()
					for b.Loop() {
						p.Dots(0, n, a, ab, R, dst, n)
					}
					report(b)
				})
				b.Run(fmt.Sprintf("dotrows/R=%d", R), func(b *testing.B) {
					for b.Loop() {
						for j := 0; j < n; j++ {
							DotRows(ir.MXFP4, k, data[j*rb:][:rb], a, ab, dst[:R])
						}
					}
					report(b)
				})
			}
		})
	}
}
