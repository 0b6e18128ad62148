// Package kern holds the CPU backend's matrix-vector kernels, generic (pure
// Go) variant, computing exactly what ggml's CPU backend computes with its
// scalar ("generic") code path.
//
// ggml multiplies a quantized weight row by an activation row that it first
// encodes in the weight type's "vec_dot_type": Q8_0 for Q4_0, Q5_0, Q8_0 and
// MXFP4; Q8_1 for Q4_1 and Q5_1; Q8_K for the k-quants; F16 for F16 weights,
// BF16 for BF16 and plain F32 for F32. The activation encoders here are
// ggml's quantize_row_q8_0_ref / q8_1_ref / q8_K_ref, and the dot products
// reproduce ggml_vec_dot_*_generic: exact int32 sums inside a block, then the
// float32 scale arithmetic in ggml's order (k-quants keep ggml's eight float
// lanes). Every float product that feeds an addition is wrapped in float32()
// so that Go cannot fuse it into an FMA, which rounds differently.
//
// Block layouts (little-endian):
//
//	block_q8_0 {f16 d; i8 qs[32]}                    34 bytes
//	block_q8_1 {f16 d; f16 s; i8 qs[32]}             36 bytes (s = d*Σqs)
//	block_q8_K {f32 d; i8 qs[256]; i16 bsums[16]}    292 bytes
package kern

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// ActType is the activation format ggml pairs with weight dtype w (its
// vec_dot_type). Dtypes Dot does not handle map to F32, and so do the MLX
// affine types: their reference (MLX, and the F32 twins the goldens ran)
// multiplies float activations.
func ActType(w ir.DType) ir.DType {
	switch w {
	case ir.Q4_0, ir.Q5_0, ir.Q8_0, ir.MXFP4:
		return ir.Q8_0
	case ir.Q4_1, ir.Q5_1:
		return ir.Q8_1
	case ir.Q2_K, ir.Q3_K, ir.Q4_K, ir.Q5_K, ir.Q6_K:
		return ir.Q8_K
	case ir.F16:
		return ir.F16
	case ir.BF16:
		return ir.BF16
	}
	return ir.F32
}

// ActBytes is the byte length of n activations in ActType(w) format. It
// panics when n is not a multiple of that format's block size.
func ActBytes(w ir.DType, n int) int {
	return rowBytes(ActType(w), n)
}

func rowBytes(t ir.DType, n int) int {
	if uint(t) < uint(len(blockSizes)) && n >= 0 {
		if bs := blockSizes[t]; bs.size != 0 && n%int(bs.size) == 0 {
			return n / int(bs.size) * int(bs.bytes)
		}
	}
	b, err := t.RowBytes(int64(n))
	if err != nil {
		panic("kern: " + err.Error())
	}
	return int(b)
}

// blockSizes caches ir's block geometry of the dtypes kern reads and writes,
// indexed by dtype, so that sizing a row is no map lookup; a zero entry
// falls back to ir.DType.RowBytes.
var blockSizes [64]struct{ size, bytes int32 }

func init() {
	for _, t := range []ir.DType{ir.F32, ir.F16, ir.BF16, ir.Q8_0, ir.Q4_0, ir.Q4_1, ir.Q5_0,
		ir.Q5_1, ir.MXFP4, ir.Q8_1, ir.Q2_K, ir.Q3_K, ir.Q4_K, ir.Q5_K, ir.Q6_K, ir.Q8_K} {
		blockSizes[t].size, blockSizes[t].bytes = int32(t.BlockSize()), int32(t.BlockBytes())
	}
}

// Supported reports whether Dot handles wt.
func Supported(wt ir.DType) bool {
	switch wt {
	case ir.F32, ir.F16, ir.BF16, ir.Q8_0, ir.Q4_0, ir.Q4_1, ir.Q5_0, ir.Q5_1, ir.MXFP4,
		ir.Q2_K, ir.Q3_K, ir.Q4_K, ir.Q5_K, ir.Q6_K:
		return true
	}
	_, _, mlx := wt.MLXAffineParams()
	return mlx
}

// Dot returns the dot product of weight row w (dtype wt, n elements) with an
// activation row a in ActType(wt) format, computed as ggml's generic vec_dot
// does. It panics on an unsupported dtype or short slices.
func (ks Kernels) Dot(wt ir.DType, n int, w []byte, a []byte) float32 {
	// The types with SIMD variants (see dispatch.go) are handled here in
	// full: sizes are constants and ir's dtype table (a map) is not
	// consulted. For them, n not a multiple of 32 panics in rowBytes below.
	if n >= 0 && n&31 == 0 {
		nb := n >> 5
		switch wt {
		case ir.Q4_0:
			w, a = w[:nb*18], a[:nb*34]
			if f := ks.v.q4_0; f != nil {
				return f(nb, w, a)
			}
			return dotQ4_0(nb, w, a)
		case ir.Q8_0:
			w, a = w[:nb*34], a[:nb*34]
			if f := ks.v.q8_0; f != nil {
				return f(nb, w, a)
			}
			return dotQ8_0(nb, w, a)
		case ir.MXFP4:
			w, a = w[:nb*17], a[:nb*34]
			if f := ks.v.mxfp4; f != nil {
				return f(nb, w, a)
			}
			return dotMXFP4(nb, w, a)
		case ir.Q5_0:
			w, a = w[:nb*22], a[:nb*34]
			if f := ks.v.q5_0; f != nil {
				return f(nb, w, a)
			}
			return dotQ5_0(nb, w, a)
		case ir.Q4_1:
			w, a = w[:nb*20], a[:nb*36]
			if f := ks.v.q4_1; f != nil {
				return f(nb, w, a)
			}
			return dotQ4_1(nb, w, a)
		case ir.Q5_1:
			w, a = w[:nb*24], a[:nb*36]
			if f := ks.v.q5_1; f != nil {
				return f(nb, w, a)
			}
			return dotQ5_1(nb, w, a)
		case ir.Q2_K, ir.Q3_K, ir.Q4_K, ir.Q5_K, ir.Q6_K:
			if f, bb := ks.v.kquantGemv(wt); f != nil && n&255 == 0 {
				nb >>= 3
				return ks.v.kqDot(wt, nb, w[:nb*bb], a[:nb*292])
			}
		}
	}
	if i := uint(wt - ir.MLXQ4G32); i < mlxCount {
		return ks.dotMLX(i, n, w, a)
	}
	w = w[:rowBytes(wt, n)]
	a = a[:ActBytes(wt, n)]
	switch wt {
	case ir.F32, ir.F16, ir.BF16:
		if ks.vec() && n >= 32 {
			return dotFloatSIMD(wt, n, w, a)
		}
	}
	switch wt {
	case ir.F32:
		return dotF32(n, w, a)
	case ir.F16:
		return dotF16(n, w, a)
	case ir.BF16:
		return dotBF16(n, w, a)
	case ir.Q4_1:
		return dotQ4_1(n/32, w, a)
	case ir.Q5_0:
		return dotQ5_0(n/32, w, a)
	case ir.Q5_1:
		return dotQ5_1(n/32, w, a)
	case ir.MXFP4:
		return dotMXFP4(n/32, w, a)
	case ir.Q2_K:
		return dotQ2_K(n/256, w, a)
	case ir.Q3_K:
		return dotQ3_K(n/256, w, a)
	case ir.Q4_K:
		return dotQ4_K(n/256, w, a)
	case ir.Q5_K:
		return dotQ5_K(n/256, w, a)
	case ir.Q6_K:
		return dotQ6_K(n/256, w, a)
	}
	panic(fmt.Sprintf("kern: Dot does not support %s", wt))
}

// kquantX4 returns v's kernel of one row of the k-quant wt against four
// activation rows (nil when v has none).
func (v *variant) kquantX4(wt ir.DType) func(nb int, w, a []byte, stride int, dst *[4]float32) {
	switch wt {
	case ir.Q2_K:
		return v.q2_Kx4
	case ir.Q3_K:
		return v.q3_Kx4
	case ir.Q5_K:
		return v.q5_Kx4
	case ir.Q6_K:
		return v.q6_Kx4
	}
	return nil
}

// kquantGemv returns v's matrix-vector kernel for the k-quant wt and wt's
// super-block bytes; the kernel is nil when v has none.
func (v *variant) kquantGemv(wt ir.DType) (func(rows, nb int, w, a []byte, dst []float32), int) {
	switch wt {
	case ir.Q2_K:
		return v.gemvQ2_K, 84
	case ir.Q3_K:
		return v.gemvQ3_K, 110
	case ir.Q4_K:
		return v.gemvQ4_K, 144
	case ir.Q5_K:
		return v.gemvQ5_K, 176
	case ir.Q6_K:
		return v.gemvQ6_K, 210
	}
	return nil, 0
}

// MatVec sets dst[j] to Dot(wt, n, w[j*rb:], a) for every j < len(dst), rb
// the bytes of one weight row: consecutive rows of one matrix against one
// activation row, bit for bit as Dot. The k-quant kernels loop over the
// rows themselves.
func (ks Kernels) MatVec(wt ir.DType, n int, w, a []byte, dst []float32) {
	if f, bb := ks.v.kquantGemv(wt); f != nil && n > 0 && n&255 == 0 {
		nb := n >> 8
		f(len(dst), nb, w[:len(dst)*nb*bb], a[:nb*292], dst)
		return
	}
	rb := rowBytes(wt, n)
	for j := range dst {
		dst[j] = ks.Dot(wt, n, w[j*rb:][:rb], a)
	}
}

// DotRows sets dst[r] to Dot(wt, n, w, a[r*stride:]) for every r < len(dst):
// one weight row against several activation rows, stride bytes apart, with
// results identical to Dot's. Where the active variant has a four-row kernel
// each weight block is unpacked once for four rows.
func (ks Kernels) DotRows(wt ir.DType, n int, w, a []byte, stride int, dst []float32) {
	R := len(dst)
	if R == 0 {
		return
	}
	ab := ActBytes(wt, n)
	if stride < ab {
		panic(fmt.Sprintf("kern: DotRows stride %d < activation row of %d bytes", stride, ab))
	}
	a = a[:(R-1)*stride+ab]
	r := 0
	if n >= 0 && n&31 == 0 && R >= 4 {
		nb := n >> 5
		v := ks.v
		var x4 func(nb int, w, a []byte, stride int, dst *[4]float32)
		switch wt {
		case ir.Q4_0:
			x4, w = v.q4_0x4, w[:nb*18]
		case ir.Q8_0:
			x4, w = v.q8_0x4, w[:nb*34]
		case ir.MXFP4:
			x4, w = v.mxfp4x4, w[:nb*17]
		case ir.Q5_0:
			x4, w = v.q5_0x4, w[:nb*22]
		case ir.Q4_1:
			x4, w = v.q4_1x4, w[:nb*20]
		case ir.Q5_1:
			x4, w = v.q5_1x4, w[:nb*24]
		case ir.Q2_K, ir.Q3_K, ir.Q5_K, ir.Q6_K:
			if n&255 == 0 {
				nb >>= 3
				x4, w = v.kquantX4(wt), w[:nb*wt.BlockBytes()]
			}
		}
		if x4 != nil {
			for ; r+4 <= R; r += 4 {
				x4(nb, w, a[r*stride:], stride, (*[4]float32)(dst[r:r+4]))
			}
		}
	}
	if i := uint(wt - ir.MLXQ4G32); i < mlxCount && R >= ks.v.mlxRows && ks.v.mlxRows > 0 {
		r = ks.dotMLXRows(i, n, w, a, stride, dst)
	}
	for ; r < R; r++ {
		dst[r] = ks.Dot(wt, n, w, a[r*stride:])
	}
}

// QuantizeActs encodes x (len n, a multiple of the block size of t) into dst
// (len t.RowBytes(n)), as ggml does for vec_dot. For t == ir.F32 it copies the
// float bits. t must be one of F32, F16, BF16, Q8_0, Q8_1, Q8_K.
func (ks Kernels) QuantizeActs(t ir.DType, x []float32, dst []byte) {
	dst = dst[:rowBytes(t, len(x))]
	switch t {
	case ir.F32:
		for i, v := range x {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case ir.F16:
		for i, v := range x {
			binary.LittleEndian.PutUint16(dst[2*i:], quant.F32ToF16(v))
		}
	case ir.BF16:
		for i, v := range x {
			binary.LittleEndian.PutUint16(dst[2*i:], quant.F32ToBF16(v))
		}
	case ir.Q8_0:
		ks.quantQ8_0(x, dst)
	case ir.Q8_1:
		quantQ8_1(x, dst)
	case ir.Q8_K:
		if nb := len(x) / 256; ks.vec() && nb > 0 {
			quantQ8_KAVX2(x[:nb*256], dst[:nb*292])
			return
		}
		quantQ8_K(x, dst)
	default:
		panic(fmt.Sprintf("kern: QuantizeActs does not support %s", t))
	}
}

// f16Table maps every half-precision bit pattern to float32, as ggml's
// GGML_CPU_FP16_TO_FP32 table does.
var f16Table [1 << 16]float32

func init() {
	for i := range f16Table {
		f16Table[i] = quant.F16ToF32(uint16(i))
	}
}

// f16 reads the little-endian half at b[0:2].
func f16(b []byte) float32 {
	return f16Table[uint16(b[0])|uint16(b[1])<<8]
}

func abs32(x float32) float32 {
	return math.Float32frombits(math.Float32bits(x) &^ 0x80000000)
}

// roundf is C's roundf (half away from zero); exact through float64.
func roundf(x float32) float32 { return float32(math.Round(float64(x))) }

// amaxQ8 is the MAX(amax, fabsf(v)) scan of quantize_row_q8_0/1_ref.
func amaxQ8(x *[32]float32) float32 {
	var amax float32
	for _, v := range x {
		if a := abs32(v); !(amax > a) {
			amax = a
		}
	}
	return amax
}

// quantQ8_0 is quantize_row_q8_0_ref.
func (ks Kernels) quantQ8_0(x []float32, dst []byte) {
	if ks.vec() && len(x) >= 32 {
		nb := len(x) / 32
		quantQ8_0AVX2(x[:nb*32], dst[:nb*34], nil)
		return
	}
	for i := 0; i < len(x)/32; i++ {
		xb := (*[32]float32)(x[i*32:])
		b := (*[34]byte)(dst[i*34:])
		d := amaxQ8(xb) / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		h := quant.F32ToF16(d)
		b[0], b[1] = byte(h), byte(h>>8)
		for j, v := range xb {
			b[2+j] = byte(int8(int32(roundf(float32(v * id)))))
		}
	}
}

// quantQ8_1 is quantize_row_q8_1_ref: as Q8_0 plus s = half(Σqs * d), with d
// the unrounded float scale.
func quantQ8_1(x []float32, dst []byte) {
	for i := 0; i < len(x)/32; i++ {
		xb := (*[32]float32)(x[i*32:])
		b := (*[36]byte)(dst[i*36:])
		d := amaxQ8(xb) / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		h := quant.F32ToF16(d)
		b[0], b[1] = byte(h), byte(h>>8)
		var sum int32
		for j, v := range xb {
			q := int8(int32(roundf(float32(v * id))))
			b[4+j] = byte(q)
			sum += int32(q)
		}
		h = quant.F32ToF16(float32(sum) * d)
		b[2], b[3] = byte(h), byte(h>>8)
	}
}

// nearestInt is ggml's nearest_int: round half to even via the 1.5*2^23
// trick, valid for |f| <= 2^22.
func nearestInt(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// quantQ8_K is quantize_row_q8_K_ref. An all-zero block gets d = 0, zero
// quants and (unlike ggml, which leaves them unset) zero bsums.
func quantQ8_K(x []float32, dst []byte) {
	for i := 0; i < len(x)/256; i++ {
		xb := (*[256]float32)(x[i*256:])
		b := (*[292]byte)(dst[i*292:])
		var amax, max float32
		for _, v := range xb {
			if a := abs32(v); a > amax {
				amax, max = a, v
			}
		}
		if amax == 0 {
			clear(b[:])
			continue
		}
		iscale := -127 / max
		for j, v := range xb {
			b[4+j] = byte(int8(min(127, nearestInt(float32(iscale*v)))))
		}
		for j := 0; j < 16; j++ {
			q := (*[16]byte)(b[4+16*j:])
			var s int32
			for _, c := range q {
				s += int32(int8(c))
			}
			binary.LittleEndian.PutUint16(b[260+2*j:], uint16(int16(s)))
		}
		binary.LittleEndian.PutUint32(b[0:], math.Float32bits(1/iscale))
	}
}
