package kern

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

// legacyTypes are the legacy formats with SIMD kernels beyond Q8_0, Q4_0
// and MXFP4: Q5_0 against Q8_0 activations, Q4_1 and Q5_1 against Q8_1.
var legacyTypes = []ir.DType{ir.Q5_0, ir.Q4_1, ir.Q5_1}

// legacyAct is the activation block size and the offset of its quants.
func legacyAct(wt ir.DType) (bytes, qs int) {
	if ActType(wt) == ir.Q8_1 {
		return 36, 4
	}
	return 34, 2
}

// emulateLegacy computes what dot{Q5_0,Q4_1,Q5_1}AVX2 compute, in scalar Go
// (the order documented at kerndot's dotRows): eight exact int32 lanes per
// block (lane k = elements 4k..4k+3, the weights' values without the
// minimum) FMA'd with d_w·d_a into eight float lanes, even blocks in one
// accumulator and odd ones in another; for Q4_1/Q5_1 the rounded products
// m_w·s_a summed in block order into summs. The result is
// hsum_float_8(acc0 + acc1) + summs. It also returns Σ|terms|.
func emulateLegacy(wt ir.DType, nb int, w, a []byte) (float32, float64) {
	ab, qo := legacyAct(wt)
	bb := wt.BlockBytes()
	var accs [2][8]float32
	var summs float32
	var mag float64
	for i := 0; i < nb; i++ {
		qw, dw := elemsQ(wt, w, i)
		acc := &accs[i%2]
		y := a[i*ab:]
		d := dw * h16(y)
		var sumAbs int64
		for k := 0; k < 8; k++ {
			var lane int32
			for j := 4 * k; j < 4*k+4; j++ {
				p := qw[j] * i8(y[qo+j])
				lane += p
				sumAbs += int64(max(p, -p))
			}
			acc[k] = fma32(d, float32(lane), acc[k])
		}
		mag += math.Abs(float64(d)) * float64(sumAbs)
		if qo == 4 {
			ms := float32(h16(w[i*bb+2:]) * h16(y[2:]))
			summs += ms
			mag += math.Abs(float64(ms))
		}
	}
	var acc [8]float32
	for k := range acc {
		acc[k] = accs[0][k] + accs[1][k]
	}
	return hsum8(&acc) + summs, mag
}

// TestLegacySIMD: the Q5_0, Q4_1 and Q5_1 dot kernels in both SIMD
// variants, over quantized random rows and rows of random quant bytes: Dot
// equals the emulated kernel order bit for bit and the generic dot within
// 1e-5·Σ|terms|, and DotRows (the four-row kernels, then the one-row tail)
// gives Dot's bits for every row at plain and padded strides.
func TestLegacySIMD(t *testing.T) {
	for _, v := range []string{"avx2", "avx512"} {
		for _, wt := range legacyTypes {
			for _, nb := range blockCounts {
				t.Run(fmt.Sprintf("%s/%s/%d", v, wt, nb), func(t *testing.T) {
					useVariant(t, v)
					require.NotNil(t, map[ir.DType]any{ir.Q5_0: active.Load().q5_0, ir.Q4_1: active.Load().q4_1, ir.Q5_1: active.Load().q5_1}[wt])
					n := 32 * nb
					bb := wt.BlockBytes()
					for trial := range 2 {
						seed := uint64(nb)*977 + uint64(wt)*13 + uint64(trial)
						w, _ := makeWeights(t, wt, n, seed)
						if trial == 1 { // random quant bytes, the quantizer's scales
							r := rand.New(rand.NewPCG(seed, 3))
							for i := 0; i < nb; i++ {
								start := 2
								if ActType(wt) == ir.Q8_1 {
									start = 4
								}
								for j := start; j < bb; j++ {
									w[i*bb+j] = byte(r.IntN(256))
								}
							}
						}
						ab := ActBytes(wt, n)
						const rows = 7
						stride := ab + 36*trial
						a := make([]byte, rows*stride)
						for r := 0; r < rows; r++ {
							QuantizeActs(ActType(wt), randRow(n, []float64{1, 0.01, 40, 3, 0.5, 1e-3, 7}[r], seed+uint64(r)+1), a[r*stride:r*stride+ab])
						}
						got := make([]float32, rows)
						DotRows(wt, n, w, a, stride, got)
						for r := 0; r < rows; r++ {
							act := a[r*stride : r*stride+ab]
							dot := Dot(wt, n, w, act)
							emu, mag := emulateLegacy(wt, nb, w, act)
							gen := dotWith("generic", wt, n, w, act)
							require.Equal(t, math.Float32bits(emu), math.Float32bits(dot), "row %d: kernel %v, emulated %v", r, dot, emu)
							require.Equal(t, math.Float32bits(dot), math.Float32bits(got[r]), "row %d: DotRows %v, Dot %v", r, got[r], dot)
							require.LessOrEqual(t, math.Abs(float64(dot)-float64(gen)), 1e-5*mag+1e-30, "row %d: kernel %v, generic %v, Σ|terms| %v", r, dot, gen, mag)
						}
					}
				})
			}
		}
	}
}

// TestLegacySIMDExactInts: with d_w = d_a = 1 every float step is exact as
// long as Σ|terms| < 2^24, so the SIMD and generic kernels must both return
// the integer dot. Minima 0 (s arbitrary), and minima 1 with s = Σqs (an
// f16 integer: |Σqs| <= 2048). The first block holds the extreme values
// against ±127, the third a zero activation block.
func TestLegacySIMDExactInts(t *testing.T) {
	const one = 0x3c00 // f16 1.0
	for _, v := range []string{"avx2", "avx512"} {
		for _, wt := range legacyTypes {
			for _, nb := range blockCounts {
				for _, m := range []int{0, 1} {
					if wt == ir.Q5_0 && m == 1 {
						continue
					}
					t.Run(fmt.Sprintf("%s/%s/%d/m%d", v, wt, nb, m), func(t *testing.T) {
						useVariant(t, v)
						r := rand.New(rand.NewPCG(uint64(nb), uint64(wt)+uint64(m)))
						n := 32 * nb
						bb := wt.BlockBytes()
						ab, qo := legacyAct(wt)
						ymax := min(127, (1<<24-1)/(32*32*nb+64*nb))
						if m == 1 {
							ymax = min(ymax, 64)
						}
						w := make([]byte, nb*bb)
						a := make([]byte, nb*ab)
						for i := 0; i < nb; i++ {
							x, y := w[i*bb:(i+1)*bb], a[i*ab:(i+1)*ab]
							for j := range x {
								x[j] = byte(r.IntN(256))
							}
							binary.LittleEndian.PutUint16(x, one)
							binary.LittleEndian.PutUint16(y, one)
							for j := 0; j < 32; j++ {
								y[qo+j] = byte(int8(r.IntN(2*ymax+1) - ymax))
							}
						}
						if nb <= 32 { // extreme first block
							x, y := w[:bb], a[:ab]
							for j := 2; j < bb; j++ {
								if wt == ir.Q5_0 {
									x[j] = 0 // value -16
								} else if j >= 4 {
									x[j] = 0xff // 15 (Q4_1), 31 (Q5_1)
								}
							}
							for j := 0; j < 32; j++ {
								y[qo+j] = byte(int8([]int{127, -127}[j%2]))
							}
						}
						if nb >= 3 {
							clear(a[2*ab+qo : 3*ab])
						}
						var want, mag int64
						for i := 0; i < nb; i++ {
							x, y := w[i*bb:], a[i*ab:]
							qw, _ := elemsQ(wt, w, i)
							var sy int64
							for j, q := range qw {
								p := int64(q) * int64(i8(y[qo+j]))
								want += p
								mag += max(p, -p)
								sy += int64(i8(y[qo+j]))
							}
							if qo == 4 {
								if m == 1 {
									binary.LittleEndian.PutUint16(x[2:], one)
								} else {
									binary.LittleEndian.PutUint16(x[2:], 0)
									sy = int64(r.IntN(4000) - 2000) // s arbitrary, times 0
								}
								binary.LittleEndian.PutUint16(y[2:], f16Int(t, sy))
								want += int64(m) * sy
								mag += int64(m) * max(sy, -sy)
							}
						}
						require.Less(t, mag, int64(1<<24))
						require.Equal(t, float32(want), Dot(wt, n, w, a), "integer dot")
						require.Equal(t, float32(want), dotWith("generic", wt, n, w, a), "generic integer dot")
						emu, _ := emulateLegacy(wt, nb, w, a)
						require.Equal(t, float32(want), emu, "emulated integer dot")
						rows := make([]float32, 5)
						DotRows(wt, n, w, bytes.Repeat(a, 5), len(a), rows)
						for _, got := range rows {
							require.Equal(t, float32(want), got, "DotRows")
						}
					})
				}
			}
		}
	}
}

// f16Int is the f16 of an integer of magnitude <= 2048.
func f16Int(t testing.TB, v int64) uint16 {
	require.LessOrEqual(t, max(v, -v), int64(2048))
	if v == 0 {
		return 0
	}
	var sign uint16
	if v < 0 {
		sign, v = 0x8000, -v
	}
	e := 0
	for v>>e > 1 {
		e++
	}
	return sign | uint16(e+15)<<10 | uint16(v<<10>>e)&0x3ff
}

// TestLegacySIMDZeroActs: a zero activation row gives 0, and Dot does not
// allocate.
func TestLegacySIMDZeroActs(t *testing.T) {
	useVariant(t, "avx2")
	for _, wt := range legacyTypes {
		n := 1024
		w, _ := makeWeights(t, wt, n, 5)
		a := make([]byte, ActBytes(wt, n))
		QuantizeActs(ActType(wt), make([]float32, n), a)
		require.Zero(t, Dot(wt, n, w, a), "%s", wt)
		x := randRow(n, 1, 10)
		allocs := testing.AllocsPerRun(10, func() {
			QuantizeActs(ActType(wt), x, a)
			_ = Dot(wt, n, w, a)
		})
		require.Zero(t, allocs, "%s", wt)
	}
}

// BenchmarkDotLegacy: weight bytes per second of the Q5_0, Q4_1 and Q5_1
// dots per variant, one activation row (Dot) and four (DotRows: the x4
// kernels; GB/s counts each weight byte once per row); compare each avx2
// with its generic.
func BenchmarkDotLegacy(b *testing.B) {
	for _, wt := range legacyTypes {
		for _, v := range []string{"generic", "avx2"} {
			for _, rows := range []int{1, 4} {
				for _, n := range []int{4096, 11008} {
					b.Run(fmt.Sprintf("%s_%s_x%d/%d", wt, v, rows, n), func(b *testing.B) {
						useVariant(b, v)
						w, _ := makeWeights(b, wt, n, 1)
						ab := ActBytes(wt, n)
						a := make([]byte, rows*ab)
						for r := 0; r < rows; r++ {
							QuantizeActs(ActType(wt), randRow(n, 1, uint64(2+r)), a[r*ab:(r+1)*ab])
						}
						dst := make([]float32, rows)
						var s float32
						for b.Loop() {
							if rows == 1 {
								s += Dot(wt, n, w, a)
							} else {
								DotRows(wt, n, w, a, ab, dst)
							}
						}
						_ = s
						b.ReportMetric(float64(rows)*float64(len(w))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
					})
				}
			}
		}
	}
}
