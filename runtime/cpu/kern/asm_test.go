package kern

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

// TestMain pins the generic kernels: the package's other tests hold Dot to
// ggml's generic float order bit for bit. The tests here switch variants
// explicitly.
func TestMain(m *testing.M) {
	if err := SetVariant("generic"); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// useVariant switches Dot to the named variant for the test, skipping it when
// the CPU lacks the variant.
func useVariant(t testing.TB, name string) {
	t.Helper()
	if err := SetVariant(name); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { _ = SetVariant("generic") })
}

// dotWith is Dot under the named variant; the active variant is restored.
func dotWith(variant string, wt ir.DType, n int, w, a []byte) float32 {
	prev := Variant()
	if err := SetVariant(variant); err != nil {
		panic(err)
	}
	defer SetVariant(prev)
	return Dot(wt, n, w, a)
}

var simdTypes = []ir.DType{ir.Q8_0, ir.Q4_0}

// blockCounts are the sizes the SIMD kernels are checked at: one block, odd
// counts, and the 5632- and 11008-wide rows of small llama models.
var blockCounts = []int{1, 2, 3, 5, 7, 17, 33, 64, 127, 5632 / 32, 11008 / 32}

// elemsQ returns the 32 signed weight values of block i of a row.
func elemsQ(wt ir.DType, w []byte, i int) (q [32]int32, d float32) {
	switch wt {
	case ir.Q8_0:
		b := w[i*34:]
		for j := range q {
			q[j] = int32(int8(b[2+j]))
		}
		return q, h16(b)
	case ir.Q4_0:
		b := w[i*18:]
		for j := 0; j < 16; j++ {
			q[j] = int32(b[2+j]&15) - 8
			q[j+16] = int32(b[2+j]>>4) - 8
		}
		return q, h16(b)
	case ir.MXFP4:
		b := w[i*17:]
		kv := [16]int32{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
		for j := 0; j < 16; j++ {
			q[j] = kv[b[1+j]&15]
			q[j+16] = kv[b[1+j]>>4]
		}
		return q, e8m0h(b[0])
	case ir.Q5_0, ir.Q4_1, ir.Q5_1: // Q4_1/Q5_1: the unsigned values, minimum not applied
		// block bytes, offset of qs, of qh (-1: none), value offset
		g := map[ir.DType][4]int{ir.Q5_0: {22, 6, 2, 16}, ir.Q4_1: {20, 4, -1, 0}, ir.Q5_1: {24, 8, 4, 0}}[wt]
		b := w[i*g[0]:]
		var h uint32
		if g[2] >= 0 {
			h = binary.LittleEndian.Uint32(b[g[2]:])
		}
		for j := 0; j < 16; j++ {
			q[j] = int32(b[g[1]+j]&15) | int32(h>>j&1)<<4 - int32(g[3])
			q[j+16] = int32(b[g[1]+j]>>4) | int32(h>>(j+16)&1)<<4 - int32(g[3])
		}
		return q, h16(b)
	}
	panic(wt)
}

// fma32 is a correctly rounded float32 fused multiply-add.
func fma32(a, b, c float32) float32 {
	p := new(big.Float).SetFloat64(float64(a) * float64(b)) // exact: 24+24 bits
	z := new(big.Float).SetPrec(24).SetMode(big.ToNearestEven)
	z.Add(p, new(big.Float).SetFloat64(float64(c)))
	f, _ := z.Float32()
	return f
}

// emulateAVX2 computes what the AVX2 kernels compute, in scalar Go: ggml's
// AVX2 block arithmetic — eight exact int32 lanes per block (lane k =
// elements 4k..4k+3), FMA'd with d_w*d_a into eight float lanes — with even
// blocks in one accumulator and odd blocks in another, then
// hsum_float_8(acc0 + acc1).
func emulateAVX2(wt ir.DType, nb int, w, a []byte) (float32, float64) {
	var accs [2][8]float32
	var mag float64
	for i := 0; i < nb; i++ {
		qw, dw := elemsQ(wt, w, i)
		acc := &accs[i%2]
		y := a[i*34:]
		d := dw * h16(y)
		var sumAbs int64
		for k := 0; k < 8; k++ {
			var lane int32
			for j := 4 * k; j < 4*k+4; j++ {
				p := qw[j] * int32(int8(y[2+j]))
				lane += p
				sumAbs += int64(max(p, -p))
			}
			acc[k] = fma32(d, float32(lane), acc[k])
		}
		mag += math.Abs(float64(d)) * float64(sumAbs)
	}
	var acc [8]float32
	for k := range acc {
		acc[k] = accs[0][k] + accs[1][k]
	}
	var r [4]float32
	for k := range r {
		r[k] = acc[k+4] + acc[k]
	}
	return (r[0] + r[2]) + (r[1] + r[3]), mag
}

func TestAVX2DotMatchesGeneric(t *testing.T) {
	useVariant(t, "avx2")
	for _, wt := range simdTypes {
		for _, nb := range blockCounts {
			t.Run(fmt.Sprintf("%s/%d", wt, nb), func(t *testing.T) {
				n := 32 * nb
				for trial := range 3 {
					seed := uint64(nb)*977 + uint64(wt)*13 + uint64(trial)
					w, _ := makeWeights(t, wt, n, seed)
					x := randRow(n, []float64{1, 0.01, 40}[trial], seed+1)
					a := make([]byte, ActBytes(wt, n))
					QuantizeActs(ActType(wt), x, a)

					got := Dot(wt, n, w, a)
					gen := dotWith("generic", wt, n, w, a)
					emu, mag := emulateAVX2(wt, nb, w, a)
					require.Equal(t, math.Float32bits(emu), math.Float32bits(got), "avx2 %v, ggml AVX2 order emulated %v", got, emu)
					require.LessOrEqual(t, math.Abs(float64(got)-float64(gen)), 1e-5*mag, "avx2 %v generic %v Σ|terms| %v", got, gen, mag)
				}
			})
		}
	}
}

// TestDotRowsMatchesDot: DotRows gives Dot's bits for every row, in every
// variant, whatever the number of rows (the four-row kernels and the one-row
// tail) and the stride between activation rows.
func TestDotRowsMatchesDot(t *testing.T) {
	for _, v := range Variants() {
		for _, wt := range []ir.DType{ir.Q8_0, ir.Q4_0, ir.Q4_K, ir.Q5_K, ir.Q6_K, ir.Q3_K, ir.Q2_K, ir.F16} {
			for _, n := range []int{256, 33 * 256, 5632} {
				t.Run(fmt.Sprintf("%s/%s/%d", v, wt, n), func(t *testing.T) {
					useVariant(t, v)
					w, _ := makeWeights(t, wt, n, uint64(n)+uint64(wt))
					ab := ActBytes(wt, n)
					for _, rows := range []int{1, 3, 4, 5, 8, 9, 13, 16, 19} {
						stride := ab + 34*(rows%3) // padded strides too
						a := make([]byte, rows*stride)
						for r := 0; r < rows; r++ {
							QuantizeActs(ActType(wt), randRow(n, []float64{1, 0.01, 30}[r%3], uint64(r)), a[r*stride:r*stride+ab])
						}
						got := make([]float32, rows)
						DotRows(wt, n, w, a, stride, got)
						for r := range got {
							want := Dot(wt, n, w, a[r*stride:])
							require.Equal(t, math.Float32bits(want), math.Float32bits(got[r]), "row %d of %d: DotRows %v, Dot %v", r, rows, got[r], want)
						}
					}
				})
			}
		}
	}
}

// TestAVX2DotExactInts: with both scales 1 every float step is exact as long
// as Σ|w·a| < 2^24, so Dot must return the integer dot exactly. Covers the
// full value ranges (Q8_0 weights down to -128, which vpsignb/vpmaddubsw
// must handle), zeros, and the extreme blocks.
func TestAVX2DotExactInts(t *testing.T) {
	useVariant(t, "avx2")
	const one = 0x3c00 // f16 1.0
	for _, wt := range simdTypes {
		for _, nb := range blockCounts {
			t.Run(fmt.Sprintf("%s/%d", wt, nb), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(nb), uint64(wt)))
				n := 32 * nb
				wmax := int32(128) // |weight| bound keeping Σ|w·a| < 2^24
				if wt == ir.Q8_0 && nb > 32 {
					wmax = 7
				}
				a := make([]byte, ActBytes(wt, n))
				w := make([]byte, mustRowBytes(t, wt, n))
				bb := wt.BlockBytes()
				for i := 0; i < nb; i++ {
					binary.LittleEndian.PutUint16(a[i*34:], one)
					binary.LittleEndian.PutUint16(w[i*bb:], one)
					for j := 0; j < 32; j++ {
						a[i*34+2+j] = byte(int8(r.IntN(255) - 127)) // Q8_0 acts: -127..127
					}
					for j := 2; j < bb; j++ {
						if wt == ir.Q8_0 {
							w[i*bb+j] = byte(int8(r.Int32N(2*wmax) - wmax))
						} else {
							w[i*bb+j] = byte(r.IntN(256))
						}
					}
				}
				if nb <= 32 { // extreme first block: all -128 (Q8_0) / -8 (Q4_0) times 127
					for j := 0; j < 32; j++ {
						a[2+j] = 127
					}
					for j := 2; j < bb; j++ {
						w[j] = map[ir.DType]byte{ir.Q8_0: 0x80, ir.Q4_0: 0x00}[wt]
					}
				}
				if nb >= 3 { // a zero weight block and a zero activation block
					for j := 2; j < bb; j++ {
						w[bb+j] = map[ir.DType]byte{ir.Q8_0: 0, ir.Q4_0: 0x88}[wt]
					}
					clear(a[2*34+2 : 3*34])
				}
				var want, mag int64
				for i := 0; i < nb; i++ {
					qw, _ := elemsQ(wt, w, i)
					for j := range qw {
						p := int64(qw[j]) * int64(int8(a[i*34+2+j]))
						want += p
						mag += max(p, -p)
					}
				}
				require.Less(t, mag, int64(1<<24))
				got := Dot(wt, n, w, a)
				require.Equal(t, float32(want), got, "integer dot")
				require.Equal(t, float32(want), dotWith("generic", wt, n, w, a), "generic integer dot")
			})
		}
	}
}

func TestAVX2DotZeroActsNoAlloc(t *testing.T) {
	useVariant(t, "avx2")
	for _, wt := range simdTypes {
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

func TestSetVariant(t *testing.T) {
	require.Contains(t, Variants(), "generic")
	require.NoError(t, SetVariant("generic"))
	require.Equal(t, "generic", Variant())
	require.ErrorContains(t, SetVariant("avx9000"), "unknown")
	require.Equal(t, "generic", Variant())
	err := SetVariant("avx2")
	if err != nil {
		require.ErrorContains(t, err, "not supported by this CPU")
		return
	}
	require.Equal(t, "avx2", Variant())
	require.NoError(t, SetVariant("generic"))
}

// BenchmarkDotVariant: weight bytes per second of each variant; compare
// q8_0_avx2 with q8_0_generic.
func BenchmarkDotVariant(b *testing.B) {
	for _, wt := range simdTypes {
		for _, v := range []string{"generic", "avx2"} {
			for _, n := range []int{4096, 11008} {
				b.Run(fmt.Sprintf("%s_%s/%d", wt, v, n), func(b *testing.B) {
					useVariant(b, v)
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
					b.ReportMetric(float64(len(w))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
		}
	}
}
