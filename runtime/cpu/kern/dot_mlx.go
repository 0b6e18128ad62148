package kern

import (
	"encoding/binary"
	"math"

	"github.com/minerva-llm/minerva/quant"
)

// dotMLX is the dot product of an MLX affine weight row (bits, group; n
// elements) with float32 activations: each group decoded exactly as
// quant.Dequantize decodes it (scale·q + bias rounded once to float32),
// then multiplied and summed as dotF32 does, products rounded to float32
// and summed in a double. So a row gives what the same weights stored as
// F32 give, which is what the goldens' reference ran (MLX twins as F32
// GGUF files, float activations). It is the generic path: decode, then a
// float dot; a 4-bit group-32 weight with f16-exact scales and biases
// would also repack exactly into Q4_1, whose kernels round the activations
// to 8 bits instead.
func dotMLX(bits, group, n int, w, a []byte) float32 {
	bb := 8 + group*bits/8
	var buf [128]float32
	g := buf[:group]
	var s float64
	for i := 0; i < n/group; i++ {
		quant.MLXDequantGroup(bits, w[i*bb:(i+1)*bb], g)
		x := a[4*i*group : 4*(i+1)*group]
		for j := 0; j < group; j += 4 {
			y := (*[16]byte)(x[4*j:])
			s += float64(float32(g[j] * math.Float32frombits(binary.LittleEndian.Uint32(y[0:]))))
			s += float64(float32(g[j+1] * math.Float32frombits(binary.LittleEndian.Uint32(y[4:]))))
			s += float64(float32(g[j+2] * math.Float32frombits(binary.LittleEndian.Uint32(y[8:]))))
			s += float64(float32(g[j+3] * math.Float32frombits(binary.LittleEndian.Uint32(y[12:]))))
		}
	}
	return float32(s)
}
