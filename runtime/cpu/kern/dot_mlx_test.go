package kern

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

var mlxTypes = []ir.DType{ir.MLXQ4G32, ir.MLXQ4G64, ir.MLXQ4G128, ir.MLXQ8G32, ir.MLXQ8G64, ir.MLXQ8G128}

// emulateMLXSIMD is the SIMD MLX kernels' arithmetic written out in scalar
// code, read from the block bytes without quant's decoder: w =
// fma(scale, q, bias) per element, element i into accumulator (i/8)%4 lane
// i%8 by acc = fma(w, x, acc), then ((acc0+acc1)+(acc2+acc3)) and the lanes
// as hsum_float_8: (hi+lo), pairs, singles.
func emulateMLXSIMD(bits, group, n int, w, a []byte) float32 {
	var acc [4][8]float32
	bb := 8 + group*bits/8
	for i := 0; i < n; i++ {
		blk := w[i/group*bb:]
		scale := math.Float32frombits(binary.LittleEndian.Uint32(blk))
		bias := math.Float32frombits(binary.LittleEndian.Uint32(blk[4:]))
		e := i % group
		q := uint32(blk[8+e*bits/8]) >> (e * bits % 8) & (1<<bits - 1)
		wv := quant.FMA32(scale, float32(q), bias)
		x := math.Float32frombits(binary.LittleEndian.Uint32(a[4*i:]))
		k, l := i/8%4, i%8
		acc[k][l] = quant.FMA32(wv, x, acc[k][l])
	}
	var s [8]float32
	for l := range s {
		s[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l])
	}
	var r [4]float32
	for l := range r {
		r[l] = s[l+4] + s[l]
	}
	return (r[0] + r[2]) + (r[1] + r[3])
}

// randMLX returns n elements of wt with random quants and full float32
// scales and biases (not the 16-bit ones mlx-lm writes: scale·q is then
// not exact in float32 and only the fused decode gives quant's values).
func randMLX(wt ir.DType, n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 77))
	bits, group, _ := wt.MLXAffineParams()
	bb := 8 + group*bits/8
	w := make([]byte, n/group*bb)
	for g := 0; g < n/group; g++ {
		b := w[g*bb:]
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(r.NormFloat64()*0.01)))
		binary.LittleEndian.PutUint32(b[4:], math.Float32bits(float32(r.NormFloat64()*0.05)))
		for j := 8; j < bb; j++ {
			b[j] = byte(r.Uint32())
		}
	}
	return w
}

// TestDotMLX: an MLX affine row multiplies float32 activations exactly as
// the same weights stored as F32 do on the same kernel variant (Dot of the
// dequantized row, bit for bit: the generic variant's double sum, the amd64
// SIMD variants' FMA lanes; neon has no F32 kernel), the SIMD variants
// (neon included) bit for bit as emulateMLXSIMD,
// and all within float rounding of a float64 dot; DotRows agrees with Dot
// and neither allocates. Weights come from quant.Quantize (bf16 scales, as
// mlx-lm writes them) and, in the last trial, random with full float32
// scales and biases.
func TestDotMLX(t *testing.T) {
	for _, wt := range mlxTypes {
		require.True(t, Supported(wt), "%s", wt)
		require.Equal(t, ir.F32, ActType(wt), "%s", wt)
		bits, group, _ := wt.MLXAffineParams()
		for _, n := range []int{group, 3 * group, 5632, 11008} {
			if n%group != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%d", wt, n), func(t *testing.T) {
				for trial := range 4 {
					seed := uint64(n)*131 + uint64(wt)*7 + uint64(trial)
					w, deq := makeWeights(t, wt, n, seed)
					if trial == 3 {
						w = randMLX(wt, n, seed)
						require.NoError(t, quant.Dequantize(wt, w, deq))
					}
					x := randRow(n, []float64{1, 0.01, 40, 1}[trial], seed+1)
					a := make([]byte, ActBytes(wt, n))
					QuantizeActs(ActType(wt), x, a)
					f := make([]byte, 4*n)
					QuantizeActs(ir.F32, deq, f)
					var ref, mag float64
					for i := range x {
						ref += float64(deq[i]) * float64(x[i])
						mag += math.Abs(float64(deq[i]) * float64(x[i]))
					}
					require.NotZero(t, mag)
					emu := emulateMLXSIMD(bits, group, n, w, a)
					for _, name := range Variants() {
						ks, err := Use(name)
						require.NoError(t, err)
						got := ks.Dot(wt, n, w, a)
						if name == "generic" || vecAsm { // neon: F32 takes the generic dot
							want := ks.Dot(ir.F32, n, f, a)
							require.Equal(t, math.Float32bits(want), math.Float32bits(got), "%s: dot %v, as F32 %v", name, got, want)
						}
						if name != "generic" {
							require.Equal(t, math.Float32bits(emu), math.Float32bits(got), "%s: dot %v, emulated %v", name, got, emu)
						}
						require.LessOrEqual(t, math.Abs(float64(got)-ref), 1e-6*mag, "%s", name)
						// Seven distinct rows: the multi-row kernels
						// (two or four rows) and the one-row rest.
						rows := make([]float32, 7)
						stride := len(a) + 12
						aa := make([]byte, len(rows)*stride)
						for r := range rows {
							copy(aa[r*stride:], a)
							if r > 0 {
								ks.QuantizeActs(ir.F32, randRow(n, 1, seed+uint64(r)+2), aa[r*stride:])
							}
						}
						ks.DotRows(wt, n, w, aa, stride, rows)
						require.Equal(t, math.Float32bits(got), math.Float32bits(rows[0]), "%s: DotRows row 0", name)
						for r, s := range rows {
							want := ks.Dot(wt, n, w, aa[r*stride:])
							require.Equal(t, math.Float32bits(want), math.Float32bits(s), "%s: DotRows row %d", name, r)
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

// TestDotMLXUnaligned: MLX shards are not aligned, nor need the rows be;
// the kernels read any byte offset, and a row that is not whole groups
// panics with a message rather than reading past it.
func TestDotMLXUnaligned(t *testing.T) {
	for _, wt := range mlxTypes {
		_, group, _ := wt.MLXAffineParams()
		n := 4 * group
		w := randMLX(wt, n, 3)
		a := make([]byte, 4*n)
		QuantizeActs(ir.F32, randRow(n, 1, 4), a)
		for _, name := range Variants() {
			ks, err := Use(name)
			require.NoError(t, err)
			want := ks.Dot(wt, n, w, a)
			for off := 1; off < 4; off++ {
				wo := append(make([]byte, off), w...)[off:]
				ao := append(make([]byte, off), a...)[off:]
				require.Equal(t, math.Float32bits(want), math.Float32bits(ks.Dot(wt, n, wo, ao)), "%s %s offset %d", name, wt, off)
			}
			require.PanicsWithValue(t, fmt.Sprintf("kern: a row of %d elements is not a whole number of MLX groups of %d", n+16, group),
				func() { ks.Dot(wt, n+16, append(w, make([]byte, 64)...), append(a, make([]byte, 64)...)) }, "%s %s", name, wt)
		}
	}
}

// BenchmarkDotMLX: one 4096-element row of each MLX type, beside F32,
// Q8_0 and Q4_1 (the exact repacking target of 4-bit MLX with f16-exact
// scales) in the same run, on every kernel variant this CPU runs
// (variant/type). Compare ratios within one run.
func BenchmarkDotMLX(b *testing.B) {
	for _, name := range Variants() {
		ks, err := Use(name)
		require.NoError(b, err)
		for _, wt := range append([]ir.DType{ir.F32, ir.Q8_0, ir.Q4_1}, mlxTypes...) {
			n := 4096
			b.Run(name+"/"+wt.String(), func(b *testing.B) {
				w, _ := makeWeights(b, wt, n, 1)
				x := randRow(n, 1, 2)
				a := make([]byte, ActBytes(wt, n))
				ks.QuantizeActs(ActType(wt), x, a)
				b.SetBytes(int64(len(w)))
				var s float32
				for b.Loop() {
					s += ks.Dot(wt, n, w, a)
				}
				_ = s
			})
		}
	}
}

// BenchmarkDotRowsMLX: one 4096-element row against eight activation rows
// (prefill), as BenchmarkDotMLX: the MLX types with their multi-row
// kernels beside F32, Q8_0 and Q4_1, per variant.
func BenchmarkDotRowsMLX(b *testing.B) {
	const n, R = 4096, 8
	for _, name := range Variants() {
		ks, err := Use(name)
		require.NoError(b, err)
		for _, wt := range append([]ir.DType{ir.F32, ir.Q8_0, ir.Q4_1}, mlxTypes...) {
			b.Run(name+"/"+wt.String(), func(b *testing.B) {
				w, _ := makeWeights(b, wt, n, 1)
				ab := ActBytes(wt, n)
				a := make([]byte, R*ab)
				for r := range R {
					ks.QuantizeActs(ActType(wt), randRow(n, 1, uint64(r)+2), a[r*ab:])
				}
				dst := make([]float32, R)
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					ks.DotRows(wt, n, w, a, ab, dst)
				}
			})
		}
	}
}
