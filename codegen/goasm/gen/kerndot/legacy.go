package main

import (
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The remaining legacy formats, after ggml's AVX2 ggml_vec_dot_q5_0_q8_0,
// ggml_vec_dot_q4_1_q8_1 and ggml_vec_dot_q5_1_q8_1, summed as dotRows
// describes (two block accumulators; for Q4_1/Q5_1 the m·s terms in a third
// sum added last):
//
//	Q5_0 {f16 d; u8 qh[4]; u8 qs[16]}          22 bytes, against Q8_0
//	Q4_1 {f16 d; f16 m; u8 qs[16]}             20 bytes, against Q8_1
//	Q5_1 {f16 d; f16 m; u8 qh[4]; u8 qs[16]}   24 bytes, against Q8_1
//
// Q5_0's values are (nibble | bit<<4) - 16, formed as ggml does by or-ing
// 0xF0 into the bytes whose fifth bit is clear, and multiplied with the
// vpsignb trick (mul_sum_i8_pairs_float). Q4_1's and Q5_1's values are the
// unsigned nibble (| bit<<4), multiplied with the activations by vpmaddubsw
// directly (mul_sum_us8_pairs_float). All integer steps are exact.

// legacyConsts adds the vectors of bytes_from_bits_32 and the fifth-bit
// masks to consts.
func legacyConsts(c *build.Context) {
	// vpshufb of the broadcast qh dword: byte k of the result is byte k/8 of
	// qh.
	m := c.StaticGlobal("bitsShuf")
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for i := 0; i < 4; i++ {
		c.AddDatum(8*i, U64(0x0101010101010101*uint64(i)))
	}
	consts["bitsShuf"] = m
	// Every bit but bit k%8 of byte k set: the byte is all ones iff bit k
	// of qh is.
	consts["bitsMask"] = vecConst(c, "bitsMask", 0x7fbfdfeff7fbfdfe)
	consts["allOnes"] = vecConst(c, "allOnes", 0xffffffffffffffff)
	consts["highNibble"] = vecConst(c, "highNibble", 0xf0f0f0f0f0f0f0f0)
	consts["fifthBit"] = vecConst(c, "fifthBit", 0x1010101010101010)
}

// nibbles32 is bytes_from_nibbles_32 of the 16 bytes at x: low nibbles are
// elements 0..15, high 16..31.
func nibbles32(c *build.Context, x Mem) reg.VecVirtual {
	lo, hi := c.XMM(), c.XMM()
	c.VMOVDQU(x, lo)
	c.VPSRLW(Imm(4), lo, hi)
	qx := c.YMM()
	c.VINSERTI128(Imm(1), hi, lo.AsY(), qx)
	c.VPAND(consts["nibbleMask"], qx, qx)
	return qx
}

// bits32 is bytes_from_bits_32 of the dword at x: byte k is 0xFF where bit
// k is set, 0 elsewhere.
func bits32(c *build.Context, x Mem) reg.VecVirtual {
	b := c.YMM()
	c.VPBROADCASTD(x, b)
	c.VPSHUFB(consts["bitsShuf"], b, b)
	c.VPOR(consts["bitsMask"], b, b)
	c.VPCMPEQB(consts["allOnes"], b, b)
	return b
}

var q5_0Block = blockKernel{name: "Q5_0", wBytes: 22,
	load: func(c *build.Context, x Mem) reg.VecVirtual {
		qx := nibbles32(c, x.Offset(6))
		hi := bits32(c, x.Offset(2))
		c.VPANDN(consts["highNibble"], hi, hi) // 0xF0 where the bit is clear
		c.VPOR(hi, qx, qx)                     // signed: value - 16
		return qx
	},
}

var q4_1Block = blockKernel{name: "Q4_1", wBytes: 20, unsigned: true, q8_1: true,
	load: func(c *build.Context, x Mem) reg.VecVirtual {
		return nibbles32(c, x.Offset(4))
	},
}

var q5_1Block = blockKernel{name: "Q5_1", wBytes: 24, unsigned: true, q8_1: true,
	load: func(c *build.Context, x Mem) reg.VecVirtual {
		qx := nibbles32(c, x.Offset(8))
		hi := bits32(c, x.Offset(4))
		c.VPAND(consts["fifthBit"], hi, hi)
		c.VPOR(hi, qx, qx) // 0..31
		return qx
	},
}
