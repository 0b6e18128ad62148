package quant

import (
	"math"

	"github.com/minerva-llm/minerva/ir"
)

// The "legacy" formats: 32 elements per block, one half-precision scale (and
// for the _1 types a half-precision minimum), 4, 5 or 8 bits per element.
//
//	block_q4_0 {f16 d; u8 qs[16]}               18 bytes
//	block_q4_1 {f16 d; f16 m; u8 qs[16]}        20 bytes
//	block_q5_0 {f16 d; u8 qh[4]; u8 qs[16]}     22 bytes
//	block_q5_1 {f16 d; f16 m; u8 qh[4]; qs[16]} 24 bytes
//	block_q8_0 {f16 d; i8 qs[32]}               34 bytes
//
// In the 4- and 5-bit types byte j of qs holds element j in its low nibble and
// element j+16 in its high nibble; bit j of the little-endian uint32 qh is the
// fifth bit of element j.

const qk = 32 // elements per legacy block (QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0)

func init() {
	register(ir.Q4_0, codec{dequant: dequantQ4_0, quant: quantQ4_0})
	register(ir.Q4_1, codec{dequant: dequantQ4_1, quant: quantQ4_1})
	register(ir.Q5_0, codec{dequant: dequantQ5_0, quant: quantQ5_0})
	register(ir.Q5_1, codec{dequant: dequantQ5_1, quant: quantQ5_1})
	register(ir.Q8_0, codec{dequant: dequantQ8_0, quant: quantQ8_0})
}

// ---- dequantization (ggml dequantize_row_*) ----

func dequantQ4_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qk; i++ {
		b := (*[18]byte)(src[i*18:])
		y := (*[qk]float32)(dst[i*qk:])
		d := f16(b[:])
		qs := (*[16]byte)(b[2:])
		for j := 0; j < 16; j++ {
			y[j] = float32(int(qs[j]&0x0f)-8) * d
			y[j+16] = float32(int(qs[j]>>4)-8) * d
		}
	}
}

func dequantQ4_1(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qk; i++ {
		b := (*[20]byte)(src[i*20:])
		y := (*[qk]float32)(dst[i*qk:])
		d := f16(b[:])
		m := f16(b[2:])
		qs := (*[16]byte)(b[4:])
		for j := 0; j < 16; j++ {
			// x*d + m, with the product rounded before the add as in ggml's C.
			y[j] = float32(float32(qs[j]&0x0f)*d) + m
			y[j+16] = float32(float32(qs[j]>>4)*d) + m
		}
	}
}

func dequantQ5_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qk; i++ {
		b := (*[22]byte)(src[i*22:])
		y := (*[qk]float32)(dst[i*qk:])
		d := f16(b[:])
		qh := uint32(b[2]) | uint32(b[3])<<8 | uint32(b[4])<<16 | uint32(b[5])<<24
		qs := (*[16]byte)(b[6:])
		for j := 0; j < 16; j++ {
			xh0 := byte(qh>>j<<4) & 0x10
			xh1 := byte(qh>>(j+12)) & 0x10
			y[j] = float32(int(qs[j]&0x0f|xh0)-16) * d
			y[j+16] = float32(int(qs[j]>>4|xh1)-16) * d
		}
	}
}

func dequantQ5_1(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qk; i++ {
		b := (*[24]byte)(src[i*24:])
		y := (*[qk]float32)(dst[i*qk:])
		d := f16(b[:])
		m := f16(b[2:])
		qh := uint32(b[4]) | uint32(b[5])<<8 | uint32(b[6])<<16 | uint32(b[7])<<24
		qs := (*[16]byte)(b[8:])
		for j := 0; j < 16; j++ {
			xh0 := byte(qh>>j<<4) & 0x10
			xh1 := byte(qh>>(j+12)) & 0x10
			y[j] = float32(float32(qs[j]&0x0f|xh0)*d) + m
			y[j+16] = float32(float32(qs[j]>>4|xh1)*d) + m
		}
	}
}

func dequantQ8_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qk; i++ {
		b := (*[34]byte)(src[i*34:])
		y := (*[qk]float32)(dst[i*qk:])
		d := f16(b[:])
		qs := (*[32]byte)(b[2:])
		for j := 0; j < qk; j++ {
			y[j] = float32(int8(qs[j])) * d
		}
	}
}

// ---- quantization (ggml quantize_row_*_ref) ----

// abs32 is fabsf: it clears the sign bit, so it is exact and keeps NaNs NaN.
func abs32(x float32) float32 {
	return math.Float32frombits(math.Float32bits(x) &^ 0x80000000)
}

// cvtI32 converts like C's (int)f on x86: truncation toward zero. ggml writes
// (int8_t)f and (uint8_t)f; compilers emit a 32-bit truncating conversion and
// keep the low byte, which is what the callers do with the result. Go's own
// conversion of an out-of-range float is implementation-defined but never
// panics, so NaN or huge inputs give garbage quants, as in C, not a crash.
func cvtI32(f float32) int32 { return int32(f) }

// absMax returns the element of largest magnitude (the first one on ties) and
// that magnitude, as the symmetric quantizers choose their scale.
func absMax(x []float32) (amax, max float32) {
	for _, v := range x {
		if a := abs32(v); amax < a {
			amax, max = a, v
		}
	}
	return amax, max
}

// minMax returns the smallest and largest element, as the _1 quantizers do
// (starting from ±FLT_MAX, so NaNs are skipped).
func minMax(x []float32) (min, max float32) {
	min, max = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < min {
			min = v
		}
		if v > max {
			max = v
		}
	}
	return min, max
}

// inv is ggml's `d ? 1.0f/d : 0.0f`.
func inv(d float32) float32 {
	if d != 0 {
		return 1 / d
	}
	return 0
}

func quantQ4_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk; i++ {
		x := src[i*qk : i*qk+qk]
		b := dst[i*18 : i*18+18]
		_, max := absMax(x)
		// The element of largest magnitude maps to -8 exactly, so the sign of
		// the scale uses the one extra negative level of a 4-bit signed range.
		d := max / -8
		id := inv(d)
		putF16(b, d)
		for j := 0; j < 16; j++ {
			x0 := float32(x[j] * id)
			x1 := float32(x[j+16] * id)
			xi0 := min(15, int8(cvtI32(x0+8.5)))
			xi1 := min(15, int8(cvtI32(x1+8.5)))
			b[2+j] = byte(xi0) | byte(xi1)<<4
		}
	}
}

func quantQ4_1(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk; i++ {
		x := src[i*qk : i*qk+qk]
		b := dst[i*20 : i*20+20]
		min_, max := minMax(x)
		d := (max - min_) / 15
		id := inv(d)
		putF16(b, d)
		putF16(b[2:], min_)
		for j := 0; j < 16; j++ {
			x0 := float32((x[j] - min_) * id)
			x1 := float32((x[j+16] - min_) * id)
			xi0 := min(15, int8(cvtI32(x0+0.5)))
			xi1 := min(15, int8(cvtI32(x1+0.5)))
			b[4+j] = byte(xi0) | byte(xi1)<<4
		}
	}
}

func quantQ5_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk; i++ {
		x := src[i*qk : i*qk+qk]
		b := dst[i*22 : i*22+22]
		_, max := absMax(x)
		d := max / -16
		id := inv(d)
		putF16(b, d)
		var qh uint32
		for j := 0; j < 16; j++ {
			x0 := float32(x[j] * id)
			x1 := float32(x[j+16] * id)
			xi0 := byte(min(31, int8(cvtI32(x0+16.5))))
			xi1 := byte(min(31, int8(cvtI32(x1+16.5))))
			b[6+j] = xi0&0x0f | (xi1&0x0f)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		}
		b[2], b[3], b[4], b[5] = byte(qh), byte(qh>>8), byte(qh>>16), byte(qh>>24)
	}
}

func quantQ5_1(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk; i++ {
		x := src[i*qk : i*qk+qk]
		b := dst[i*24 : i*24+24]
		min_, max := minMax(x)
		d := (max - min_) / 31
		id := inv(d)
		putF16(b, d)
		putF16(b[2:], min_)
		var qh uint32
		for j := 0; j < 16; j++ {
			x0 := float32((x[j] - min_) * id)
			x1 := float32((x[j+16] - min_) * id)
			// No clamp here in ggml: (max-min)*id rounds to at most 31.5-ish.
			xi0 := byte(cvtI32(x0 + 0.5))
			xi1 := byte(cvtI32(x1 + 0.5))
			b[8+j] = xi0&0x0f | (xi1&0x0f)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		}
		b[4], b[5], b[6], b[7] = byte(qh), byte(qh>>8), byte(qh>>16), byte(qh>>24)
	}
}

func quantQ8_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk; i++ {
		x := src[i*qk : i*qk+qk]
		b := dst[i*34 : i*34+34]
		var amax float32
		for _, v := range x {
			// MAX(amax, fabsf(v)) is (amax > a ? amax : a): a NaN wins.
			if a := abs32(v); !(amax > a) {
				amax = a
			}
		}
		d := amax / 127
		id := inv(d)
		putF16(b, d)
		for j := 0; j < qk; j++ {
			b[2+j] = byte(int8(cvtI32(roundf(float32(x[j] * id)))))
		}
	}
}

// roundf rounds half away from zero, like C's roundf. Going through float64 is
// exact: every float32 is a float64 and the rounded result fits back.
func roundf(x float32) float32 { return float32(math.Round(float64(x))) }
