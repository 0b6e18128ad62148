package kern

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/cpu"

	"github.com/minerva-llm/minerva/ir"
)

// TestVNNIKernelsMatchAVX2 runs the VNNI group kernels on groups packed for
// AVX2 (Q8_0 sign-flipped for VNNI) and requires the AVX2 kernels' results
// bit for bit: the integer block sums are exact either way and the float
// steps are the same.
func TestVNNIKernelsMatchAVX2(t *testing.T) {
	if !(cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX2 && cpu.X86.HasFMA) {
		t.Skip("no AVX-512 VNNI")
	}
	useVariant(t, "avx2")
	for _, wt := range []ir.DType{ir.Q4_0, ir.Q8_0} {
		for _, k := range []int{32, 64, 96, 2048, 5632} {
			t.Run(fmt.Sprintf("%s/%d", wt, k), func(t *testing.T) {
				nb := k / 32
				rb := nb * wt.BlockBytes()
				data := make([]byte, 8*rb)
				for i := 0; i < 8; i++ {
					w, _ := makeWeights(t, wt, k, uint64(k+i))
					copy(data[i*rb:], w)
				}
				p := Pack(wt, 8, k, data)
				g := p.groups
				gemv, gemm, gemm8 := gemvQ4_0x8VNNI, gemmQ4_0x8x4VNNI, gemmQ4_0x8x8VNNI
				if wt == ir.Q8_0 {
					gemv, gemm, gemm8 = gemvQ8_0x8VNNI, gemmQ8_0x8x4VNNI, gemmQ8_0x8x8VNNI
					g = append([]byte(nil), g...)
					flipQ8Signs(g, nb)
				}
				ab := PackedActBytes(k)
				const R = 8
				a := make([]byte, R*ab)
				for r := 0; r < R; r++ {
					x := randRow(k, []float64{1, 0.02, 25, 3}[r%4], uint64(r))
					if r == 3 { // extreme activations: ±127 after quantization
						for i := range x {
							x[i] = float32(1 - 2*(i%2))
						}
					}
					QuantizePackedActs(x, a[r*ab:])
				}
				want := make([]float32, R*8)
				p.Dots(0, 8, a, ab, R, want, 8)
				got := make([]float32, R*8)
				gemm(nb, g, a, ab, got, 8)
				gemm(nb, g, a[4*ab:], ab, got[32:], 8)
				got8 := make([]float32, R*8)
				gemm8(nb, g, a, ab, got8, 8)
				require.Equal(t, got, got8, "gemm8 against gemm4")
				for r := 0; r < R; r++ {
					one := make([]float32, 8)
					gemv(nb, g, a[r*ab:], one)
					for j := 0; j < 8; j++ {
						require.Equal(t, math.Float32bits(want[r*8+j]), math.Float32bits(got[r*8+j]), "gemm row %d act %d", j, r)
						require.Equal(t, math.Float32bits(want[r*8+j]), math.Float32bits(one[j]), "gemv row %d act %d", j, r)
					}
				}
			})
		}
	}
}

// BenchmarkGroupKernels: weight GB/s (per activation row) of the AVX2 and
// VNNI group kernels on one 256×2048 matrix, one and four activation rows.
func BenchmarkGroupKernels(b *testing.B) {
	if !(cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX2 && cpu.X86.HasFMA) {
		b.Skip("no AVX-512 VNNI")
	}
	const n, k = 256, 2048
	for _, wt := range []ir.DType{ir.Q4_0, ir.Q8_0} {
		nb := k / 32
		rb := nb * wt.BlockBytes()
		data := make([]byte, n*rb)
		for i := 0; i < n; i++ {
			w, _ := makeWeights(b, wt, k, uint64(i))
			copy(data[i*rb:], w)
		}
		useVariant(b, "avx2")
		p := Pack(wt, n, k, data)
		ab := PackedActBytes(k)
		a := make([]byte, 8*ab)
		for r := 0; r < 8; r++ {
			QuantizePackedActs(randRow(k, 1, uint64(r)), a[r*ab:])
		}
		gb := nb * 8 * wt.BlockBytes()
		out := make([]float32, 8*8)
		kernels := map[string][2]any{
			"avx2": {p.gemv, p.gemm4},
			"vnni": {gemvQ4_0x8VNNI, gemmQ4_0x8x4VNNI},
		}
		g8, g16 := gemmQ4_0x8x8VNNI, gemmQ4_0x16x8VNNI
		if wt == ir.Q8_0 {
			kernels["vnni"] = [2]any{gemvQ8_0x8VNNI, gemmQ8_0x8x4VNNI}
			g8, g16 = gemmQ8_0x8x8VNNI, gemmQ8_0x16x8VNNI
		}
		out16 := make([]float32, 8*16)
		b.Run(fmt.Sprintf("%s/vnni16/R=8", wt), func(b *testing.B) {
			for b.Loop() {
				for g := 0; g < n/8; g += 2 {
					g16(nb, p.groups[g*gb:][:2*gb], gb, a, ab, out16, 16)
				}
			}
			b.ReportMetric(8*float64(len(data))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
		b.Run(fmt.Sprintf("%s/vnni/R=8", wt), func(b *testing.B) {
			for b.Loop() {
				for g := 0; g < n/8; g++ {
					g8(nb, p.groups[g*gb:][:gb], a, ab, out, 8)
				}
			}
			b.ReportMetric(8*float64(len(data))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
		for _, name := range []string{"avx2", "vnni"} {
			gemv := kernels[name][0].(func(int, []byte, []byte, []float32))
			gemm := kernels[name][1].(func(int, []byte, []byte, int, []float32, int))
			b.Run(fmt.Sprintf("%s/%s/R=1", wt, name), func(b *testing.B) {
				for b.Loop() {
					for g := 0; g < n/8; g++ {
						gemv(nb, p.groups[g*gb:][:gb], a, out)
					}
				}
				b.ReportMetric(float64(len(data))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
			b.Run(fmt.Sprintf("%s/%s/R=4", wt, name), func(b *testing.B) {
				for b.Loop() {
					for g := 0; g < n/8; g++ {
						gemm(nb, p.groups[g*gb:][:gb], a, ab, out, 8)
					}
				}
				b.ReportMetric(4*float64(len(data))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// BenchmarkGroupQ4K: the VNNI Q4_K group kernels on one packed 256×2048
// matrix against eight activation rows, as weight GB/s times activation
// rows: the four-row kernel twice (x4), the eight-row one per group (x8)
// and the two-group one (x16); compare the ratios within one run.
func BenchmarkGroupQ4K(b *testing.B) {
	useVariant(b, "avx512")
	if Current().v.groupQ4_Kx16 == nil {
		b.Skip("no Q4_K eight-row kernels")
	}
	const n, k = 256, 2048
	nb := k / 256
	data := make([]byte, n*nb*144)
	for i := 0; i < n; i++ {
		w, _ := makeWeights(b, ir.Q4_K, k, uint64(i))
		copy(data[i*nb*144:], w)
	}
	p := Pack(ir.Q4_K, n, k, data)
	ab := p.ActBytes()
	a := make([]byte, 8*ab)
	for r := 0; r < 8; r++ {
		p.QuantizeActs(Current(), randRow(k, 1, uint64(r)), a[r*ab:])
	}
	gb := nb * q4KGroupBytes
	out := make([]float32, 8*16)
	run := func(name string, f func(g int) int) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				for g := 0; g < n/8; g += f(g) {
				}
			}
			b.ReportMetric(8*float64(len(data))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
	run("x4", func(g int) int {
		w := p.groups[g*gb:][:gb]
		gemmQ4_Kx8x4VNNI(nb, w, a, ab, out, 8)
		gemmQ4_Kx8x4VNNI(nb, w, a[4*ab:], ab, out[32:], 8)
		return 1
	})
	run("x8", func(g int) int {
		gemmQ4_Kx8x8VNNI(nb, p.groups[g*gb:][:gb], a, ab, out, 8)
		return 1
	})
	run("x16", func(g int) int {
		gemmQ4_Kx16x8VNNI(nb, p.groups[g*gb:][:2*gb], gb, a, ab, out, 16)
		return 2
	})
}
