package quant

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/minerva-llm/minerva/ir"
)

// MXFP4 (OCP microscaling FP4, ggml type 39): 32 elements per 17-byte block,
//
//	block_mxfp4 {u8 e; u8 qs[16]}
//
// e is an E8M0 scale (a bare exponent, 2^(e-127)); each element is an E2M1
// float (sign, 2 exponent bits, 1 mantissa bit: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}).
// Byte j of qs holds element j in its low nibble and element j+16 in its high
// nibble.
//
// ggml keeps the E2M1 values doubled, as the integers of MXFP4Values, and
// halves the scale instead (ggml_e8m0_to_fp32_half: 2^(e-128)). Both factors
// are exact, so the product equals value*2^(e-127) whenever that is a normal
// float; the formula is kept anyway so that the rare subnormal results round
// the way ggml's do.

// MXFP4Values is ggml's kvalues_mxfp4: twice the E2M1 value of each code.
// It is the one copy: the CPU kernels, their assembly generator and the GPU
// kernel sources all take their tables from it.
var MXFP4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// MXFP4ValuesC is MXFP4Values as a C initializer list, for the kernel sources.
func MXFP4ValuesC() string {
	var b strings.Builder
	for i, v := range MXFP4Values {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(int(v)))
	}
	return b.String()
}

func init() {
	register(ir.MXFP4, codec{dequant: dequantMXFP4, quant: quantMXFP4})
}

// e8m0Half is ggml_e8m0_to_fp32_half: 2^(e-128) built from bits. e = 0 and 1
// give the subnormals 2^-128 and 2^-127; e = 255 gives 2^127 (ggml does not
// treat 255 as NaN).
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func dequantMXFP4(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qk; i++ {
		b := (*[17]byte)(src[i*17:])
		y := (*[qk]float32)(dst[i*qk:])
		d := e8m0Half(b[0])
		qs := (*[16]byte)(b[1:])
		for j := 0; j < 16; j++ {
			y[j] = float32(MXFP4Values[qs[j]&0x0f]) * d
			y[j+16] = float32(MXFP4Values[qs[j]>>4]) * d
		}
	}
}

// bestIndexMXFP4 is ggml's best_index_mxfp4: the code whose value, scaled by
// e, is closest to x; the lowest index wins ties (so 0 is +0, never -0).
//
// Only codes of x's sign (and code 0) can win: a code of the other sign is
// further from x than 0 is, and its error ties code 0's only when both are
// zero, where code 0 has the lower index. So the search covers codes 0..7
// for x ≥ 0 and 0, 9..15 for x < 0, in index order with ggml's arithmetic:
// the same answer in half the comparisons (synthesising a 12 GB MXFP4 model
// spends most of its time here).
func bestIndexMXFP4(x, e float32) uint8 {
	best := uint8(0)
	bestErr := abs32(float32(float32(MXFP4Values[0])*e) - x)
	lo, hi := 1, 8
	if x < 0 {
		lo, hi = 9, 16
	}
	for i := lo; i < hi; i++ {
		if err := abs32(float32(float32(MXFP4Values[i])*e) - x); err < bestErr {
			best, bestErr = uint8(i), err
		}
	}
	return best
}

func quantMXFP4(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk; i++ {
		x := src[i*qk : i*qk+qk]
		b := dst[i*17 : i*17+17]
		amax, _ := absMax(x)
		// The scale puts amax in [4, 8) times 2^(e-127), i.e. in the top binade
		// of E2M1 (4 and 6). ggml computes floorf(log2f(amax)) in float32; the
		// float32 rounding of log2 matters just below a power of two (log2f of
		// 8*(1-2^-24) rounds to 3.0), so log2 is rounded to float32 before the
		// floor, as log2f's correctly rounded result would be.
		var e uint8
		if amax > 0 {
			l := float32(math.Floor(float64(float32(math.Log2(float64(amax))))))
			e = uint8(cvtI32(l - 2 + 127))
		}
		d := e8m0Half(e)
		b[0] = e
		for j := 0; j < 16; j++ {
			b[1+j] = bestIndexMXFP4(x[j], d) | bestIndexMXFP4(x[j+16], d)<<4
		}
	}
}

// MXFP4FromHF repacks MXFP4 as Hugging Face (openai/gpt-oss) and mlx-lm
// store it into ggml's block_mxfp4, exactly: the same E2M1 codes and E8M0
// scale bytes, rearranged. blocks holds 16 bytes per block of 32 values,
// byte b with element 2b in its low nibble and 2b+1 in its high one (the
// openai *_blocks tensor; mlx-lm's U32 words are the same bytes read
// little-endian); scales holds one E8M0 byte per block (2^(s-127), the
// meaning of ggml's e byte). dst receives len(scales) blocks of 17 bytes.
func MXFP4FromHF(dst, blocks, scales []byte) error {
	nb := len(scales)
	if len(blocks) != 16*nb || len(dst) != 17*nb {
		return fmt.Errorf("quant: MXFP4 repack of %d blocks: %d block bytes (want %d), %d output bytes (want %d)", nb, len(blocks), 16*nb, len(dst), 17*nb)
	}
	for i := 0; i < nb; i++ {
		src := (*[16]byte)(blocks[16*i:])
		b := (*[17]byte)(dst[17*i:])
		b[0] = scales[i]
		// Element e sits in byte e/2, nibble e%2: ggml's byte j holds
		// elements j and j+16.
		for j := 0; j < 16; j++ {
			lo := src[j/2] >> (4 * (j & 1)) & 15
			hi := src[8+j/2] >> (4 * (j & 1)) & 15
			b[1+j] = lo | hi<<4
		}
	}
	return nil
}
