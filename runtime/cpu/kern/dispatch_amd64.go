package kern

import (
	"golang.org/x/sys/cpu"

	"github.com/minerva-llm/minerva/ir"
)

// archVariants registers the amd64 variants the CPU supports.
func archVariants() {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C {
		avx2 := &variant{name: "avx2", q8_0: dotQ8_0AVX2, q4_0: dotQ4_0AVX2,
			q8_0x4: dotQ8_0x4AVX2, q4_0x4: dotQ4_0x4AVX2,
			gemvQ4_0: gemvQ4_0x8AVX2, gemmQ4_0x4: gemmQ4_0x8x4AVX2,
			gemvQ8_0: gemvQ8_0x8AVX2, gemmQ8_0x4: gemmQ8_0x8x4AVX2,
			gemvMXFP4: gemvMXFP4x8AVX2, gemmMXFP4x4: gemmMXFP4x8x4AVX2,
			gemvQ2_K: gemvQ2_KAVX2, gemvQ3_K: gemvQ3_KAVX2, q2_Kx4: dotQ2_Kx4AVX2, q3_Kx4: dotQ3_Kx4AVX2, gemvQ4_K: gemvQ4_KAVX2, gemvQ5_K: gemvQ5_KAVX2, gemvQ6_K: gemvQ6_KAVX2, kqDot: kqDotAVX2,
			groupQ4_K: gemvQ4_Kx8AVX2, groupQ4_Kx4: gemmQ4_Kx8x4AVX2,
			groupQ5_K: gemvQ5_Kx8AVX2, groupQ5_Kx4: gemmQ5_Kx8x4AVX2,
			groupQ6_K: gemvQ6_Kx8AVX2, groupQ6_Kx4: gemmQ6_Kx8x4AVX2,
			groupQ3_K: gemvQ3_Kx8AVX2, groupQ3_Kx4: gemmQ3_Kx8x4AVX2,
			groupQ2_K: gemvQ2_Kx8AVX2, groupQ2_Kx4: gemmQ2_Kx8x4AVX2,
			mxfp4: dotMXFP4AVX2, mxfp4x4: dotMXFP4x4AVX2,
			q5_0: dotQ5_0AVX2, q4_1: dotQ4_1AVX2, q5_1: dotQ5_1AVX2,
			q5_0x4: dotQ5_0x4AVX2, q4_1x4: dotQ4_1x4AVX2, q5_1x4: dotQ5_1x4AVX2,
			mlx: [mlxCount]func(int, []byte, []byte) float32{dotMLXQ4G32AVX2, dotMLXQ4G64AVX2,
				dotMLXQ4G128AVX2, dotMLXQ8G32AVX2, dotMLXQ8G64AVX2, dotMLXQ8G128AVX2},
			mlxx: [mlxCount]func(int, []byte, []byte, int, []float32){dotMLXQ4G32x2AVX2, dotMLXQ4G64x2AVX2,
				dotMLXQ4G128x2AVX2, dotMLXQ8G32x2AVX2, dotMLXQ8G64x2AVX2, dotMLXQ8G128x2AVX2},
			mlxRows:   2,
			scoresF16: scoresF16AVX2, axpyRowsF16: axpyRowsF16AVX2}
		variants[avx2.name] = avx2
		best = avx2
		// AVX-512 VNNI: the AVX2 kernels, with vpdpbusd in the group
		// kernels (256-bit vectors, same layout except Q8_0's sign bit,
		// same results bit for bit).
		if cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI {
			v := *avx2
			v.name = "avx512"
			v.gemvQ4_0, v.gemmQ4_0x4 = gemvQ4_0x8VNNI, gemmQ4_0x8x4VNNI
			v.gemvQ8_0, v.gemmQ8_0x4 = gemvQ8_0x8VNNI, gemmQ8_0x8x4VNNI
			v.gemmQ4_0x8, v.gemmQ8_0x8 = gemmQ4_0x8x8VNNI, gemmQ8_0x8x8VNNI
			v.gemvMXFP4, v.gemmMXFP4x4 = gemvMXFP4x8VNNI, gemmMXFP4x8x4VNNI
			if cpu.X86.HasAVX512BW {
				v.pairQ4_0 = pairKernels{gemmQ4_0x16x4VNNI, gemmQ4_0x16x8VNNI}
				v.pairQ8_0 = pairKernels{gemmQ8_0x16x4VNNI, gemmQ8_0x16x8VNNI}
			}
			v.unsignedQ8 = true
			v.attnZMM = true
			// The MLX kernels in ZMM registers: the AVX2 ones' lanes
			// and order, so the same results.
			v.mlx = [mlxCount]func(int, []byte, []byte) float32{dotMLXQ4G32AVX512, dotMLXQ4G64AVX512,
				dotMLXQ4G128AVX512, dotMLXQ8G32AVX512, dotMLXQ8G64AVX512, dotMLXQ8G128AVX512}
			v.mlxx = [mlxCount]func(int, []byte, []byte, int, []float32){dotMLXQ4G32x4AVX512, dotMLXQ4G64x4AVX512,
				dotMLXQ4G128x4AVX512, dotMLXQ8G32x4AVX512, dotMLXQ8G64x4AVX512, dotMLXQ8G128x4AVX512}
			v.mlxRows = 4
			if cpu.X86.HasAVX512BW {
				v.gemvQ4_K, v.gemvQ5_K, v.gemvQ6_K, v.kqDot = gemvQ4_KVNNI, gemvQ5_KVNNI, gemvQ6_KVNNI, kqDotVNNI
				v.gemvQ2_K, v.gemvQ3_K, v.q2_Kx4, v.q3_Kx4 = gemvQ2_KVNNI, gemvQ3_KVNNI, dotQ2_Kx4VNNI, dotQ3_Kx4VNNI
				v.groupQ4_K, v.groupQ4_Kx4 = gemvQ4_Kx8VNNI, gemmQ4_Kx8x4VNNI
				v.groupQ4_Kx8, v.groupQ4_Kx16 = gemmQ4_Kx8x8VNNI, gemmQ4_Kx16x8VNNI
				v.groupQ5_K, v.groupQ5_Kx4 = gemvQ5_Kx8VNNI, gemmQ5_Kx8x4VNNI
				v.groupQ5_Kx8, v.groupQ5_Kx16 = gemmQ5_Kx8x8VNNI, gemmQ5_Kx16x8VNNI
				if cpu.X86.HasAVX512DQ { // the pair kernel's vpinsrq on any register
					v.groupQ6_K, v.groupQ6_Kx4, v.groupQ6_Kx16 = gemvQ6_Kx8VNNI, gemmQ6_Kx8x4VNNI, gemmQ6_Kx16x4VNNI
					v.groupQ6_Kx16x8 = gemmQ6_Kx16x8VNNI
					v.groupQ3_K, v.groupQ3_Kx4, v.groupQ3_Kx16 = gemvQ3_Kx8VNNI, gemmQ3_Kx8x4VNNI, gemmQ3_Kx16x4VNNI
					v.groupQ2_K, v.groupQ2_Kx4, v.groupQ2_Kx16 = gemvQ2_Kx8VNNI, gemmQ2_Kx8x4VNNI, gemmQ2_Kx16x4VNNI
				}
				v.q6_Kx4, v.q5_Kx4 = dotQ6_Kx4VNNI, dotQ5_Kx4VNNI
			}
			variants[v.name] = &v
			best = &v
		}
	}
}

// kqDotAVX2 and kqDotVNNI are one row of the avx2 and avx512 k-quant
// kernels.
func kqDotAVX2(wt ir.DType, nb int, w, a []byte) float32 { return kqDot(false, wt, nb, w, a) }
func kqDotVNNI(wt ir.DType, nb int, w, a []byte) float32 { return kqDot(true, wt, nb, w, a) }

func kqDot(vnni bool, wt ir.DType, nb int, w, a []byte) float32 {
	var r [1]float32
	switch {
	case wt == ir.Q4_K && vnni:
		gemvQ4_KVNNI(1, nb, w, a, r[:])
	case wt == ir.Q4_K:
		gemvQ4_KAVX2(1, nb, w, a, r[:])
	case wt == ir.Q5_K && vnni:
		gemvQ5_KVNNI(1, nb, w, a, r[:])
	case wt == ir.Q5_K:
		gemvQ5_KAVX2(1, nb, w, a, r[:])
	case wt == ir.Q6_K && vnni:
		gemvQ6_KVNNI(1, nb, w, a, r[:])
	case wt == ir.Q6_K:
		gemvQ6_KAVX2(1, nb, w, a, r[:])
	case wt == ir.Q3_K && vnni:
		gemvQ3_KVNNI(1, nb, w, a, r[:])
	case wt == ir.Q3_K:
		gemvQ3_KAVX2(1, nb, w, a, r[:])
	case wt == ir.Q2_K && vnni:
		gemvQ2_KVNNI(1, nb, w, a, r[:])
	case wt == ir.Q2_K:
		gemvQ2_KAVX2(1, nb, w, a, r[:])
	}
	return r[0]
}
