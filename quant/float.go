package quant

import (
	"encoding/binary"
	"math"

	"github.com/minerva-llm/minerva/ir"
)

// F16ToF32 widens an IEEE-754 binary16 value to float32. Every finite value
// and infinity converts exactly; a NaN keeps its sign and payload and is made
// quiet, as ggml's conversion does (its software path multiplies the NaN by a
// power of two, the F16C path converts it in hardware; both set the quiet bit).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	var bits uint32
	switch {
	case exp == 0x1f: // infinity or NaN
		bits = 0x7f800000 | man<<13
		if man != 0 {
			bits |= 0x00400000
		}
	case exp != 0: // normal: rebias the exponent from 15 to 127
		bits = (exp+127-15)<<23 | man<<13
	case man == 0: // signed zero
	default: // subnormal: man * 2^-24, normalized for float32
		e := uint32(127 - 15 + 1)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		bits = e<<23 | (man&0x3ff)<<13
	}
	return math.Float32frombits(sign | bits)
}

// F32ToF16 narrows a float32 to binary16 with round-to-nearest-even, the IEEE
// default and what ggml's GGML_FP32_TO_FP16 computes. Values from 65520 up
// (the midpoint between the largest finite half, 65504, and 65536) become
// infinity; values below 2^-24 round into the subnormal range or to zero. A NaN
// becomes the quiet NaN 0x7e00 with the input's sign, as in ggml's
// ggml_compute_fp32_to_fp16 (the payload is not kept).
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN
		return sign | 0x7e00
	case abs >= 0x477ff000: // ≥ 65520: overflows to infinity (65520 is a tie, and 65536 is the even side)
		return sign | 0x7c00
	case abs >= 0x38800000: // ≥ 2^-14: a normal half
		// Rebias the exponent from 127 to 15 in place, then round the 23-bit
		// mantissa to 10 bits; a carry out of the mantissa correctly bumps the
		// exponent (the largest inputs here still round to at most 65504).
		r := abs - (127-15)<<23
		r += 0xfff + (r>>13)&1
		return sign | uint16(r>>13)
	case abs < 0x33000000: // < 2^-25: rounds to zero (2^-25 itself is a tie to even zero)
		return sign
	default: // [2^-25, 2^-14): a subnormal half, counted in units of 2^-24
		e := abs >> 23
		m := abs&0x7fffff | 0x800000
		shift := 126 - e // value/2^-24 = m * 2^(e-126); e in [102,112] gives shift in [14,24]
		q := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && q&1 == 1 {
			q++ // may carry into the smallest normal, which is the right encoding
		}
		return sign | uint16(q)
	}
}

// BF16ToF32 widens a bfloat16 value to float32. bfloat16 is the top half of a
// float32, so this is exact for every pattern, NaNs included (ggml does not
// quiet them here either).
func BF16ToF32(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// F32ToBF16 narrows a float32 to bfloat16 exactly as ggml_compute_fp32_to_bf16:
// round to nearest even on the dropped 16 bits, overflow to infinity, and a NaN
// is truncated with its quiet bit forced on (so a NaN can never round into an
// infinity or become signaling).
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

func init() {
	register(ir.F32, codec{dequant: dequantF32, quant: quantF32})
	register(ir.F16, codec{dequant: dequantF16, quant: quantF16})
	register(ir.BF16, codec{dequant: dequantBF16, quant: quantBF16})
}

func dequantF32(src []byte, dst []float32) {
	src = src[:4*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func quantF32(src []float32, dst []byte) {
	dst = dst[:4*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func dequantF16(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func quantF16(src []float32, dst []byte) {
	dst = dst[:2*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
	}
}

func dequantBF16(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func quantBF16(src []float32, dst []byte) {
	dst = dst[:2*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
	}
}

// f16 reads the little-endian half at b[0:2] as float32; block scales are
// stored this way in every quantized format.
func f16(b []byte) float32 {
	return F16ToF32(uint16(b[0]) | uint16(b[1])<<8)
}

// putF16 stores f as a little-endian half at b[0:2] and returns the stored
// value widened back, which is what ggml's quantizers go on computing with.
func putF16(b []byte, f float32) float32 {
	h := F32ToF16(f)
	b[0], b[1] = byte(h), byte(h>>8)
	return F16ToF32(h)
}
