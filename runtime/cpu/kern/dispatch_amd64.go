package kern

import "golang.org/x/sys/cpu"

// archVariants registers the amd64 variants the CPU supports.
func archVariants() {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C {
		avx2 := &variant{name: "avx2", q8_0: dotQ8_0AVX2, q4_0: dotQ4_0AVX2,
			q8_0x4: dotQ8_0x4AVX2, q4_0x4: dotQ4_0x4AVX2,
			gemvQ4_0: gemvQ4_0x8AVX2, gemmQ4_0x4: gemmQ4_0x8x4AVX2,
			gemvQ8_0: gemvQ8_0x8AVX2, gemmQ8_0x4: gemmQ8_0x8x4AVX2,
			q4_K: dotQ4_KAVX2, q5_K: dotQ5_KAVX2, q6_K: dotQ6_KAVX2,
			mxfp4: dotMXFP4AVX2, mxfp4x4: dotMXFP4x4AVX2,
			q5_0: dotQ5_0AVX2, q4_1: dotQ4_1AVX2, q5_1: dotQ5_1AVX2,
			q5_0x4: dotQ5_0x4AVX2, q4_1x4: dotQ4_1x4AVX2, q5_1x4: dotQ5_1x4AVX2,
			mlx: [mlxCount]func(int, []byte, []byte) float32{dotMLXQ4G32AVX2, dotMLXQ4G64AVX2,
				dotMLXQ4G128AVX2, dotMLXQ8G32AVX2, dotMLXQ8G64AVX2, dotMLXQ8G128AVX2},
			mlxx: [mlxCount]func(int, []byte, []byte, int, []float32){dotMLXQ4G32x2AVX2, dotMLXQ4G64x2AVX2,
				dotMLXQ4G128x2AVX2, dotMLXQ8G32x2AVX2, dotMLXQ8G64x2AVX2, dotMLXQ8G128x2AVX2},
			mlxRows: 2}
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
			v.unsignedQ8 = true
			// The MLX kernels in ZMM registers: the AVX2 ones' lanes
			// and order, so the same results.
			v.mlx = [mlxCount]func(int, []byte, []byte) float32{dotMLXQ4G32AVX512, dotMLXQ4G64AVX512,
				dotMLXQ4G128AVX512, dotMLXQ8G32AVX512, dotMLXQ8G64AVX512, dotMLXQ8G128AVX512}
			v.mlxx = [mlxCount]func(int, []byte, []byte, int, []float32){dotMLXQ4G32x4AVX512, dotMLXQ4G64x4AVX512,
				dotMLXQ4G128x4AVX512, dotMLXQ8G32x4AVX512, dotMLXQ8G64x4AVX512, dotMLXQ8G128x4AVX512}
			v.mlxRows = 4
			variants[v.name] = &v
			best = &v
		}
	}
}
