package kern

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// The MLX affine dtypes, ir.MLXQ4G32 … ir.MLXQ8G128, numbered
// consecutively: mlxGeom[wt − ir.MLXQ4G32] is their bits and group size
// (checked against ir in init).
const mlxCount = 6

var mlxGeom = [mlxCount]struct{ bits, group int }{{4, 32}, {4, 64}, {4, 128}, {8, 32}, {8, 64}, {8, 128}}

func init() {
	for i, g := range mlxGeom {
		bits, group, ok := (ir.MLXQ4G32 + ir.DType(i)).MLXAffineParams()
		if !ok || bits != g.bits || group != g.group {
			panic(fmt.Sprintf("kern: MLX dtype %d is not %d bits in groups of %d", ir.MLXQ4G32+ir.DType(i), g.bits, g.group))
		}
	}
}

// dotMLX is Dot for the MLX affine dtype ir.MLXQ4G32+i. The SIMD variants
// run their kernel (codegen/goasm/gen/kerndot/mlx.go): each weight decoded
// exactly as here, then summed in float32 lanes with FMA as the variant's
// F32 dot sums (dotFloatSIMD), so a row gives what the same weights stored
// as F32 give on that variant, bit for bit. The generic variant runs
// dotMLXGeneric.
func (ks Kernels) dotMLX(i uint, n int, w, a []byte) float32 {
	g, ng := mlxGroups(i, n)
	w, a = w[:ng*(8+g.group*g.bits/8)], a[:4*n]
	if f := ks.v.mlx[i]; f != nil {
		return f(ng, w, a)
	}
	return dotMLXGeneric(g.bits, g.group, n, w, a)
}

// mlxGroups returns the geometry of MLX dtype i and the number of groups
// in a row of n elements, and panics when n is not whole groups.
func mlxGroups(i uint, n int) (g struct{ bits, group int }, ng int) {
	g = mlxGeom[i]
	if n < 0 || n%g.group != 0 {
		panic(fmt.Sprintf("kern: a row of %d elements is not a whole number of MLX groups of %d", n, g.group))
	}
	return g, n / g.group
}

// dotMLXRows is DotRows for MLX dtype i with the variant's multi-row
// kernel: it sets dst[r] for the first len(dst) rounded down to whole
// kernel calls (mlxRows rows each, at least one) and returns how many.
// Each kernel decodes a weight once for its rows and gives each row
// exactly the one-row kernel's result.
func (ks Kernels) dotMLXRows(i uint, n int, w, a []byte, stride int, dst []float32) int {
	g, ng := mlxGroups(i, n)
	w = w[:ng*(8+g.group*g.bits/8)]
	k, f := ks.v.mlxRows, ks.v.mlxx[i]
	r := 0
	for ; r+k <= len(dst); r += k {
		f(ng, w, a[r*stride:][:(k-1)*stride+4*n], stride, dst[r:r+k])
	}
	return r
}

// dotMLXGeneric is the dot product of an MLX affine weight row (bits,
// group; n elements) with float32 activations: each group decoded exactly
// as quant.Dequantize decodes it (scale·q + bias rounded once to float32),
// then multiplied and summed as dotF32 does, products rounded to float32
// and summed in a double. So a row gives what the same weights stored as
// F32 give, which is what the goldens' reference ran (MLX twins as F32
// GGUF files, float activations).
//
// A 4-bit weight with f16-exact scales and biases would also repack
// exactly into Q4_1, but Q4_1's kernels round the activations to 8 bits
// (Q8_1), 2e-2 from that reference where these kernels stay at float
// rounding; and 8-bit weights have no exact ggml layout. So the MLX types
// keep their own kernels.
func dotMLXGeneric(bits, group, n int, w, a []byte) float32 {
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
