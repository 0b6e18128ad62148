package kern

import "golang.org/x/sys/cpu"

// archVariants registers the amd64 variants the CPU supports.
func archVariants() {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C {
		avx2 := &variant{name: "avx2", q8_0: dotQ8_0AVX2, q4_0: dotQ4_0AVX2,
			q8_0x4: dotQ8_0x4AVX2, q4_0x4: dotQ4_0x4AVX2,
			gemvQ4_0: gemvQ4_0x8AVX2, gemmQ4_0x4: gemmQ4_0x8x4AVX2,
			gemvQ8_0: gemvQ8_0x8AVX2, gemmQ8_0x4: gemmQ8_0x8x4AVX2,
			q4_K: dotQ4_KAVX2, q5_K: dotQ5_KAVX2, q6_K: dotQ6_KAVX2}
		variants[avx2.name] = avx2
		best = avx2
	}
}
