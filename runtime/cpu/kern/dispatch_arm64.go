package kern

import (
	"golang.org/x/sys/cpu"

	"github.com/minerva-llm/minerva/ir"
)

// archVariants registers the arm64 variants the CPU supports: "neon", the
// group kernels with SDOT (AdvSIMD and the ARMv8.2 dot product, which
// golang.org/x/sys/cpu calls ASIMDDP), bit for bit the amd64 group kernels'
// results (Q4_0, Q8_0, MXFP4 — the VNNI variant's — and packed Q4_K, Q5_K, Q6_K, Q3_K and Q2_K), the k-quant row kernels
// (gemvQ*_KAVX2's results), the MLX affine kernels and the one-head attention
// kernels over f16 caches (which the grouped ones call head by head), the
// amd64 ones' results bit for bit. Its other kernels are the generic ones.
func archVariants() {
	if cpu.ARM64.HasASIMD && cpu.ARM64.HasASIMDDP {
		neon := &variant{name: "neon",
			gemvQ4_0: gemvQ4_0x8NEON, gemmQ4_0x4: gemmQ4_0x8x4NEON,
			gemvQ8_0: gemvQ8_0x8NEON, gemmQ8_0x4: gemmQ8_0x8x4NEON,
			gemvMXFP4: gemvMXFP4x8NEON, gemmMXFP4x4: gemmMXFP4x8x4NEON,
			groupQ4_K: gemvQ4_Kx8NEON, groupQ4_Kx4: gemmQ4_Kx8x4NEON,
			groupQ5_K: gemvQ5_Kx8NEON, groupQ5_Kx4: gemmQ5_Kx8x4NEON,
			groupQ6_K: gemvQ6_Kx8NEON, groupQ6_Kx4: gemmQ6_Kx8x4NEON,
			groupQ3_K: gemvQ3_Kx8NEON, groupQ3_Kx4: gemmQ3_Kx8x4NEON,
			groupQ2_K: gemvQ2_Kx8NEON, groupQ2_Kx4: gemmQ2_Kx8x4NEON,
			gemvQ2_K: gemvQ2_KNEON, gemvQ3_K: gemvQ3_KNEON, gemvQ4_K: gemvQ4_KNEON, gemvQ5_K: gemvQ5_KNEON,
			gemvQ6_K: gemvQ6_KNEON, kqDot: kqDotNEON,
			mlx: [mlxCount]func(int, []byte, []byte) float32{dotMLXQ4G32NEON, dotMLXQ4G64NEON,
				dotMLXQ4G128NEON, dotMLXQ8G32NEON, dotMLXQ8G64NEON, dotMLXQ8G128NEON},
			mlxx: [mlxCount]func(int, []byte, []byte, int, []float32){dotMLXQ4G32x2NEON, dotMLXQ4G64x2NEON,
				dotMLXQ4G128x2NEON, dotMLXQ8G32x2NEON, dotMLXQ8G64x2NEON, dotMLXQ8G128x2NEON},
			mlxRows:   2,
			scoresF16: scoresF16NEON, axpyRowsF16: axpyRowsF16NEON}
		variants[neon.name] = neon
		best = neon
	}
}

// kqDotNEON is one row of the neon k-quant row kernels.
func kqDotNEON(wt ir.DType, nb int, w, a []byte) float32 {
	var r [1]float32
	switch wt {
	case ir.Q2_K:
		gemvQ2_KNEON(1, nb, w, a, r[:])
	case ir.Q3_K:
		gemvQ3_KNEON(1, nb, w, a, r[:])
	case ir.Q4_K:
		gemvQ4_KNEON(1, nb, w, a, r[:])
	case ir.Q5_K:
		gemvQ5_KNEON(1, nb, w, a, r[:])
	case ir.Q6_K:
		gemvQ6_KNEON(1, nb, w, a, r[:])
	default:
		panic("kern: no neon row kernel for " + wt.String())
	}
	return r[0]
}
