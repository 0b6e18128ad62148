//go:build amd64

package kern

// The grouped attention kernels of attn_amd64.s by heads per call.
var (
	scoresF16GAVX2     = [GroupLanes + 1]func(q []float32, qs, d int, k []uint16, stride int, out []float32){nil, scoresF16G1AVX2, scoresF16G2AVX2, scoresF16G3AVX2, scoresF16G4AVX2, scoresF16G5AVX2, scoresF16G6AVX2, scoresF16G7AVX2, scoresF16G8AVX2}
	axpyRowsF16GAVX2   = [GroupLanes + 1]func(acc []float32, as, d int, w []float32, v []uint16, stride int){nil, axpyRowsF16G1AVX2, axpyRowsF16G2AVX2, axpyRowsF16G3AVX2, axpyRowsF16G4AVX2, axpyRowsF16G5AVX2, axpyRowsF16G6AVX2, axpyRowsF16G7AVX2, axpyRowsF16G8AVX2}
	scoresF32GAVX2     = [GroupLanes + 1]func(q []float32, qs, d int, k []float32, stride int, out []float32){nil, scoresF32G1AVX2, scoresF32G2AVX2, scoresF32G3AVX2, scoresF32G4AVX2, scoresF32G5AVX2, scoresF32G6AVX2, scoresF32G7AVX2, scoresF32G8AVX2}
	axpyRowsF32GAVX2   = [GroupLanes + 1]func(acc []float32, as, d int, w []float32, v []float32, stride int){nil, axpyRowsF32G1AVX2, axpyRowsF32G2AVX2, axpyRowsF32G3AVX2, axpyRowsF32G4AVX2, axpyRowsF32G5AVX2, axpyRowsF32G6AVX2, axpyRowsF32G7AVX2, axpyRowsF32G8AVX2}
	scoresF16GAVX512   = [GroupLanes + 1]func(q []float32, qs, d int, k []uint16, stride int, out []float32){nil, scoresF16G1AVX512, scoresF16G2AVX512, scoresF16G3AVX512, scoresF16G4AVX512, scoresF16G5AVX512, scoresF16G6AVX512, scoresF16G7AVX512, scoresF16G8AVX512}
	axpyRowsF16GAVX512 = [GroupLanes + 1]func(acc []float32, as, d int, w []float32, v []uint16, stride int){nil, axpyRowsF16G1AVX512, axpyRowsF16G2AVX512, axpyRowsF16G3AVX512, axpyRowsF16G4AVX512, axpyRowsF16G5AVX512, axpyRowsF16G6AVX512, axpyRowsF16G7AVX512, axpyRowsF16G8AVX512}
	scoresF32GAVX512   = [GroupLanes + 1]func(q []float32, qs, d int, k []float32, stride int, out []float32){nil, scoresF32G1AVX512, scoresF32G2AVX512, scoresF32G3AVX512, scoresF32G4AVX512, scoresF32G5AVX512, scoresF32G6AVX512, scoresF32G7AVX512, scoresF32G8AVX512}
	axpyRowsF32GAVX512 = [GroupLanes + 1]func(acc []float32, as, d int, w []float32, v []float32, stride int){nil, axpyRowsF32G1AVX512, axpyRowsF32G2AVX512, axpyRowsF32G3AVX512, axpyRowsF32G4AVX512, axpyRowsF32G5AVX512, axpyRowsF32G6AVX512, axpyRowsF32G7AVX512, axpyRowsF32G8AVX512}
	axpyRowsQ8GAVX512  = [GroupLanes + 1]func(acc []float32, as, d int, w []float32, v []byte, stride int){nil, axpyRowsQ8G1AVX512, axpyRowsQ8G2AVX512, axpyRowsQ8G3AVX512, axpyRowsQ8G4AVX512, axpyRowsQ8G5AVX512, axpyRowsQ8G6AVX512, axpyRowsQ8G7AVX512, axpyRowsQ8G8AVX512}
)
