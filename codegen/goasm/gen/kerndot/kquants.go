package main

import (
	"github.com/minerva-llm/minerva/codegen/goasm/gen/internal/avoutil"
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// K-quant kernels: one Q2_K…Q6_K weight row (nb super-blocks of 256
// elements) against one Q8_K activation row, after ggml's AVX2
// ggml_vec_dot_q{2..6}_K_q8_K; for Q2_K and Q3_K also against four
// activation rows (kqRows4), each row's result the one-row kernel's.
//
// Q8_K block (292 bytes): f32 d; i8 qs[256] at 4; i16 bsums[16] at 260.
//
// Per super-block the kernels form eight exact int32 lanes sumi[k]: for every
// 32-element sub-block s, vpmaddubsw of the unsigned weights with the signed
// activations and vpmaddwd with the sub-block's scale(s) put
// scale·Σ_{e=4k..4k+3} q[32s+e]·y[32s+e] into lane k. Then
//
//	acc = fma(d_w·d_y, float(sumi), acc)          (eight float lanes)
//
// Q4_K/Q5_K (unsigned q, subtracted minima): prod[j] = m[2j]·(bs[4j]+bs[4j+1])
// + m[2j+1]·(bs[4j+2]+bs[4j+3]) for j < 4 (vphaddw, vpmaddwd) and
//
//	accm = fma(-(d_y·dmin_w), float(prod), accm)  (four float lanes)
//
// with result hsum_float_8(acc) + ((accm0+accm2) + (accm1+accm3)).
//
// Q6_K (q = 0..63 stored, value q-32): the -32 is taken out of sumi exactly
// with the activation block sums, sumi[k] -= 32·(sc[2k]·bs[2k] +
// sc[2k+1]·bs[2k+1]), and the result is hsum_float_8(acc). Q3_K (q = 0..7,
// value q-4) the same with 4 (dotQ3K); Q2_K's minima go into acc before its
// sums (dotQ2K).
//
// All integer steps are exact: vpmaddubsw pairs stay below 2·63·128, the
// scaled lanes below 2^31.

// kqConsts are the kernels' read-only vectors.
var kqConsts struct {
	m10, m30, m0f Mem // bytes 0x10, 0x30, 0x0f
	m03, m04, m20 Mem // bytes 0x03, 0x04, 0x20
	shufK4        Mem // 8 vectors: int16 word i in every lane
	shufQ6        Mem // avoutil.KQScaleShuffle
	q3HighShift   Mem // dwords 0, 2, 4, 6: where each quarter of Q3_K's scales finds its high bits
}

// kquants emits gemvQ{2..6}_KAVX2, dotQ{2,3}_Kx4AVX2 and the packed Q4_K group
// kernels.
func kquants(c *build.Context) {
	rep := func(b byte) uint64 { return uint64(b) * 0x0101010101010101 }
	word := func(i int) uint64 { return rep(byte(2*i)) + 0x0100010001000100 }
	kqConsts.m10 = vecConst(c, "kqMask10", rep(0x10))
	kqConsts.m30 = vecConst(c, "kqMask30", rep(0x30))
	kqConsts.m0f = consts["nibbleMask"]
	kqConsts.shufK4 = c.StaticGlobal("kqShufK4")
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for i := 0; i < 8; i++ {
		for j := 0; j < 4; j++ {
			c.AddDatum(32*i+8*j, U64(word(i)))
		}
	}
	kqConsts.shufQ6 = avoutil.KQScaleShuffle(c, "kqShufQ6")

	kqConsts.m03 = vecConst(c, "kqMask03", rep(0x03))
	kqConsts.m04 = vecConst(c, "kqMask04", rep(0x04))
	kqConsts.m20 = vecConst(c, "kqMask20", rep(0x20))
	kqConsts.q3HighShift = avoutil.Q3KHighShift(c, "kqQ3HighShift")
	avoutil.Function(c, "gemvQ3_KAVX2", avoutil.KQGemvSignature,
		"gemvQ3_KAVX2 sets dst[r] to the dot product of row r of w (rows rows of nb",
		"super-blocks of Q3_K, one after another) and a (nb Q8_K blocks), for r < rows,",
		"as Q6_K's kernel with 3-bit quants (see codegen/goasm/gen/kerndot's kquants.go",
		"for the float order). It needs AVX2, FMA and F16C.",
	)
	avoutil.KQRows(c, "Q3_K", 110, false, dotQ3K)
	avoutil.Function(c, "gemvQ2_KAVX2", avoutil.KQGemvSignature,
		"gemvQ2_KAVX2 sets dst[r] to the dot product of row r of w (rows rows of nb",
		"super-blocks of Q2_K, one after another) and a (nb Q8_K blocks), for r < rows,",
		"after ggml's AVX2 ggml_vec_dot_q2_K_q8_K (see codegen/goasm/gen/kerndot's",
		"kquants.go for the float order). It needs AVX2, FMA and F16C.",
	)
	avoutil.KQRows(c, "Q2_K", 84, false, dotQ2K)
	kqRows4(c, "Q3_K", 110, func(x reg.GPVirtual, y []reg.Register, acc avoutil.KQAcc) {
		q3Block(c, x, y, acc, kqConsts.m03, kqConsts.m04)
	})
	kqRows4(c, "Q2_K", 84, func(x reg.GPVirtual, y []reg.Register, acc avoutil.KQAcc) {
		q2Block(c, x, y, acc, kqConsts.m03)
	})
	for _, t := range avoutil.KQTypes {
		avoutil.Function(c, "gemv"+t.Name+"AVX2", avoutil.KQGemvSignature,
			"gemv"+t.Name+"AVX2 sets dst[r] to the dot product of row r of w (rows rows of nb",
			"super-blocks of "+t.Name+", one after another) and a (nb Q8_K blocks), for r < rows,",
			"with ggml's AVX2 block arithmetic (see codegen/goasm/gen/kerndot's kquants.go",
			"for the float order). It needs AVX2, FMA and F16C.",
		)
		if t.Name == "Q6_K" {
			avoutil.KQRows(c, "Q6_K", 210, false, dotQ6K)
		} else {
			q5 := t.Name == "Q5_K"
			avoutil.KQRows(c, t.Name, t.WBytes, true, func(c *build.Context, x, y reg.GPVirtual, acc, accm reg.VecVirtual) func() {
				return dotQ45K(c, q5, x, y, acc, accm)
			})
		}
	}
	q4KGroupAVX2(c)
}

// dotQ45K is the Q4_K (Q5_K when q5) super-block body (avoutil.KQBody).
func dotQ45K(c *build.Context, q5 bool, x, y reg.GPVirtual, acc, accm reg.VecVirtual) func() {
	m3f, m03, m0f := avoutil.KQ4Masks(c)
	nib := c.YMM()
	c.VMOVDQU(kqConsts.m0f, nib)
	return func() {
		scales, mins := avoutil.KQScalesMinsK4(c, x, m3f, m03, m0f)
		dd := avoutil.KQMinima(c, x, y, mins, accm)

		var qh reg.VecVirtual
		if q5 {
			qh = c.YMM()
			c.VMOVDQU(Mem{Base: x, Disp: 16}, qh)
		}
		// high returns bit `bit` of every qh byte at bit 4.
		high := func(bit int) reg.VecVirtual { return bitsAt(c, qh, bit, 4, kqConsts.m10) }
		qsOff := 16
		if q5 {
			qsOff = 48
		}
		var sumi reg.VecVirtual
		for g := 0; g < 4; g++ {
			bits := c.YMM()
			c.VMOVDQU(Mem{Base: x, Disp: qsOff + 32*g}, bits)
			lo, hi := c.YMM(), c.YMM()
			c.VPAND(nib, bits, lo)
			c.VPSRLW(Imm(4), bits, hi)
			c.VPAND(nib, hi, hi)
			if q5 {
				c.VPOR(high(2*g), lo, lo)
				c.VPOR(high(2*g+1), hi, hi)
			}
			pl, ph := c.YMM(), c.YMM()
			c.VPMADDUBSW(Mem{Base: y, Disp: 4 + 64*g}, lo, pl)
			c.VPMADDUBSW(Mem{Base: y, Disp: 36 + 64*g}, hi, ph)
			sl, sh := c.YMM(), c.YMM()
			c.VPSHUFB(kqConsts.shufK4.Offset(32*(2*g)), scales, sl)
			c.VPSHUFB(kqConsts.shufK4.Offset(32*(2*g+1)), scales, sh)
			c.VPMADDWD(sl, pl, pl)
			c.VPMADDWD(sh, ph, ph)
			c.VPADDD(ph, pl, pl)
			if g == 0 {
				sumi = pl
			} else {
				c.VPADDD(pl, sumi, sumi)
			}
		}
		c.VCVTDQ2PS(sumi, sumi)
		d := c.YMM()
		c.VBROADCASTSS(dd, d)
		c.VFMADD231PS(sumi, d, acc)
	}
}

// dotQ6K is the Q6_K super-block body (avoutil.KQBody). Block (210 bytes):
// ql[128] at 0, qh[64] at 128, i8 scales[16] at 192, f16 d at 208.
func dotQ6K(c *build.Context, x, y reg.GPVirtual, acc, _ reg.VecVirtual) func() {
	nib := c.YMM()
	c.VMOVDQU(kqConsts.m0f, nib)
	return func() {
		dx, sc, corr := avoutil.KQ6Prologue(c, x, y)

		var sumi reg.VecVirtual
		for n := 0; n < 2; n++ {
			half := avoutil.KQHalfScales(c, sc, n)
			qh := c.YMM()
			c.VMOVDQU(Mem{Base: x, Disp: 128 + 32*n}, qh)
			ql := [2]reg.VecVirtual{c.YMM(), c.YMM()}
			c.VMOVDQU(Mem{Base: x, Disp: 64 * n}, ql[0])
			c.VMOVDQU(Mem{Base: x, Disp: 64*n + 32}, ql[1])
			for k := 0; k < 4; k++ {
				v := bitsAt(c, ql[k&1], 4*(k>>1), 0, nib)
				h := bitsAt(c, qh, 2*k, 4, kqConsts.m30) // bits 2k, 2k+1 of qh at bits 4, 5
				c.VPOR(h, v, v)
				addProducts(c, v, y, n, k, avoutil.KQChunkScales(c, half, kqConsts.shufQ6, k), &sumi)
			}
		}
		c.VPSUBD(corr, sumi, sumi)
		c.VCVTDQ2PS(sumi, sumi)
		d := c.YMM()
		c.VBROADCASTSS(dx, d)
		c.VFMADD231PS(sumi, d, acc)
	}
}

// bitsAt returns src's bytes shifted so that bit from lands at bit to,
// masked by mask: 16-bit shifts, whose bits carried across bytes the mask
// clears (it keeps bits that come from the same byte).
func bitsAt(c *build.Context, src reg.VecVirtual, from, to int, mask Op) reg.VecVirtual {
	h := c.YMM()
	c.VPAND(mask, avoutil.ShiftBit(c, from, to, src, h), h)
	return h
}

// addProducts adds quants v (32 unsigned bytes, elements 128n+32k..+31 of
// a Q6_K, Q3_K or Q2_K block) times the Q8_K activations at y, scaled by
// their 16-element groups' scales s (avoutil.KQChunkScales), into the eight
// int32 lanes *sumi (set by the first call).
func addProducts(c *build.Context, v reg.VecVirtual, y reg.Register, n, k int, s reg.VecVirtual, sumi *reg.VecVirtual) {
	p := c.YMM()
	c.VPMADDUBSW(Mem{Base: y, Disp: 4 + 128*n + 32*k}, v, p)
	c.VPMADDWD(s, p, p)
	if *sumi == nil {
		*sumi = p
	} else {
		c.VPADDD(p, *sumi, *sumi)
	}
}

// dotQ3K is the Q3_K super-block body (avoutil.KQBody), Q6_K's with other
// quants. Block (110 bytes): hmask[32] at 0, qs[64] at 32, the sixteen
// 6-bit scales packed in 12 bytes at 96, f16 d at 108. Element 128n+32k+l
// (n < 2, k < 4, l < 32) is bits 2k, 2k+1 of qs[32n+l] and bit 4n+k of
// hmask[l], q = those three bits (0..7), value q-4, scale sc[8n+2k+l/16]
// (the 6-bit scale less 32): the -4 is taken out of sumi exactly as Q6_K's
// -32, with the activation block sums, sumi[k] -= 4·(sc[2k]·bs[2k] +
// sc[2k+1]·bs[2k+1]). |pair| ≤ 2·7·128 in vpmaddubsw.
func dotQ3K(c *build.Context, x, y reg.GPVirtual, acc, _ reg.VecVirtual) func() {
	m3, m4 := c.YMM(), c.YMM()
	c.VMOVDQU(kqConsts.m03, m3)
	c.VMOVDQU(kqConsts.m04, m4)
	return func() { q3Block(c, x, []reg.Register{y}, avoutil.RegAcc(acc), m3, m4) }
}

// q3Block emits a Q3_K super-block against the activation rows y (masks
// m3, m4: bytes 0x03, 0x04, in registers or memory). Each row's sumi
// starts at minus its -4 correction, which is exact.
func q3Block(c *build.Context, x reg.GPVirtual, y []reg.Register, acc avoutil.KQAcc, m3, m4 Op) {
	sc := avoutil.Q3KScales(c, x, kqConsts.m0f, kqConsts.m03, kqConsts.m20, kqConsts.q3HighShift)
	sumi := make([]reg.VecVirtual, len(y))
	for r := range y {
		corr := c.YMM()
		c.VPMADDWD(Mem{Base: y[r], Disp: 260}, sc, corr) // sc[2k]·bs[2k] + sc[2k+1]·bs[2k+1]
		c.VPSLLD(Imm(2), corr, corr)
		sumi[r] = c.YMM()
		c.VPXOR(sumi[r], sumi[r], sumi[r])
		c.VPSUBD(corr, sumi[r], sumi[r])
	}

	hm := c.YMM()
	c.VMOVDQU(Mem{Base: x}, hm)
	for n := 0; n < 2; n++ {
		half := avoutil.KQHalfScales(c, sc, n)
		qs := c.YMM()
		c.VMOVDQU(Mem{Base: x, Disp: 32 + 32*n}, qs)
		for k := 0; k < 4; k++ {
			v := bitsAt(c, qs, 2*k, 0, m3)
			h := bitsAt(c, hm, 4*n+k, 2, m4) // bit 4n+k of hmask at bit 2
			c.VPOR(h, v, v)
			s := avoutil.KQChunkScales(c, half, kqConsts.shufQ6, k)
			for r := range y {
				addProducts(c, v, y[r], n, k, s, &sumi[r])
			}
		}
	}
	avoutil.KQFmaRows(c, avoutil.KQF16(c, x, 108), y, sumi, acc)
}

// dotQ2K is the Q2_K super-block body (avoutil.KQBody), after ggml's AVX2
// kernel. Block (84 bytes): scales[16] at 0 (scale in the low nibble, min
// in the high one, per 16 elements), qs[64] at 16, f16 d at 80, f16 dmin
// at 82. Element 128n+32k+l is bits 2k, 2k+1 of qs[32n+l] (0..3), scale
// sc[8n+2k+l/16], as Q3_K's low bits. Per block, first the minima
//
//	acc = fma(-(d_y·dmin_w), float(mn[2k]·bs[2k] + mn[2k+1]·bs[2k+1]), acc)
//
// then acc = fma(d_y·d_w, float(sumi), acc); the result is hsum_float_8.
func dotQ2K(c *build.Context, x, y reg.GPVirtual, acc, _ reg.VecVirtual) func() {
	m3 := c.YMM()
	c.VMOVDQU(kqConsts.m03, m3)
	return func() { q2Block(c, x, []reg.Register{y}, avoutil.RegAcc(acc), m3) }
}

// q2Block emits a Q2_K super-block against the activation rows y (m3:
// bytes 0x03, in a register or memory).
func q2Block(c *build.Context, x reg.GPVirtual, y []reg.Register, acc avoutil.KQAcc, m3 Op) {
	sc, dw := avoutil.Q2KMinima(c, x, y, acc, kqConsts.m0f)

	sumi := make([]reg.VecVirtual, len(y))
	for n := 0; n < 2; n++ {
		half := avoutil.KQHalfScales(c, sc, n)
		qs := c.YMM()
		c.VMOVDQU(Mem{Base: x, Disp: 16 + 32*n}, qs)
		for k := 0; k < 4; k++ {
			v := bitsAt(c, qs, 2*k, 0, m3)
			s := avoutil.KQChunkScales(c, half, kqConsts.shufQ6, k)
			for r := range y {
				addProducts(c, v, y[r], n, k, s, &sumi[r])
			}
		}
	}
	avoutil.KQFmaRows(c, dw, y, sumi, acc)
}

// kqRows4 emits dot<t>x4AVX2: one weight row of t against four Q8_K
// activation rows (stride bytes apart), each result gemv<t>AVX2's bit for
// bit, each super-block decoded once for the four (block: its body, the
// accumulators in the frame).
func kqRows4(c *build.Context, t string, wBytes int, block func(x reg.GPVirtual, y []reg.Register, acc avoutil.KQAcc)) {
	name := "dot" + t + "x4AVX2"
	avoutil.Function(c, name, avoutil.KQRows4Signature,
		name+" sets dst[r] to the "+t+" row w times activation row r (a[r*stride:], Q8_K)",
		"for r < 4, bit for bit gemv"+t+"AVX2's, decoding each weight super-block once.",
		"It needs AVX2, FMA and F16C.")
	avoutil.KQRows4(c, name, wBytes, block)
}

// q4KGroupAVX2 emits gemvQ4_Kx8AVX2: a packed group of eight Q4_K rows
// (layout in codegen/goasm/gen/kernvnni's kquants.go, one int32 lane per
// row) against one Q8_K activation row, with the VNNI kernel's integer
// sums and float steps, so its results bit for bit. Without vpdpbusd the
// four products of a lane are vpmaddubsw pairs (|pair| ≤ 2·15·128) summed
// as int16 over a sub-block's eight vectors (≤ 30720, exact), and one
// vpmaddwd with the rows' scales, each in both words of its lane, makes
// them the scaled int32 sums; the minima's sums are vpmaddwd of mn[s] (both
// words) with the pair bs[2s], bs[2s+1] broadcast. It emits the Q5_K and
// Q6_K, Q3_K and Q2_K group kernels too (offsetGroupsAVX2).
func q4KGroupAVX2(c *build.Context) {
	dup := c.StaticGlobal("kqShufDup") // byte r into both words of dword r
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for r := 0; r < 8; r++ {
		c.AddDatum(4*r, U32(uint32(r)|0x80<<8|uint32(r)<<16|0x80<<24))
	}
	for _, q5 := range []bool{false, true} {
		q4KGroupAVX2Rows(c, dup, 1, q5)
		q4KGroupAVX2Rows(c, dup, 4, q5)
	}
	offsetGroupsAVX2(c)
}

// q4KGroupAVX2Rows emits gemvQ4_Kx8AVX2 (rows 1) or gemmQ4_Kx8x4AVX2: the
// group against rows activation rows (stride bytes apart), each weight
// vector unpacked once for all of them. With four rows each sub-block half
// (low, then high nibbles) is one pass over the group's quant vectors and
// the float accumulators live in the stack frame (sixteen YMM registers
// hold the rest); with one row each quant vector is loaded once for both
// halves (the two int16 sums fit in the registers).
//
// With q5, gemvQ5_Kx8AVX2 or gemmQ5_Kx8x4AVX2 over a packed Q5_K group
// (kernvnni's q4KGroup says where the fifth bits are): codes up to 31 make
// pairs up to 2·31·128, so the int16 sums cover four vectors (≤ 31744)
// and each sub-block half takes two vpmaddwd with the scales; the integer
// sums, and so the results, are the VNNI kernels'.
func q4KGroupAVX2Rows(c *build.Context, dup Mem, rows int, q5 bool) {
	typ, blockBytes := "Q4_K", avoutil.Q4KGroupBytes
	if q5 {
		typ, blockBytes = "Q5_K", avoutil.Q5KGroupBytes
	}
	k := startAVX2Group(c, typ, rows)
	x, y, acc, frame, nib := k.x, k.y, k.acc, k.frame, k.nib
	isum := make([]reg.VecVirtual, rows)
	parts := 1 // int16 sums per row and sub-block: vectors 8/parts·p… of it
	if q5 {
		parts = 2
	}
	for g := 0; g < 4 && rows == 1; g++ {
		// One row: each quant vector (and Q5_K's qh vector) loaded once
		// for both of its sub-blocks, 2g (low nibbles) and 2g+1 (high).
		var s16 [2][2]reg.VecVirtual // [i][part]
		for t := 0; t < 8; t++ {
			if line := 8*g + t; 64*line < blockBytes {
				// One line avoutil.KQPrefetchBlocks blocks ahead per step.
				avoutil.StreamPrefetch(c, Mem{Base: x, Disp: avoutil.KQPrefetchBlocks*blockBytes + 64*line})
			}
			q, lo, hi := c.YMM(), c.YMM(), c.YMM()
			c.VMOVDQU(Mem{Base: x, Disp: 160 + 256*g + 32*t}, q)
			c.VPAND(q, nib, lo)
			c.VPSRLW(Imm(4), q, hi)
			c.VPAND(nib, hi, hi)
			var h reg.VecVirtual
			if q5 {
				h = c.YMM()
				c.VMOVDQU(Mem{Base: x, Disp: avoutil.Q4KGroupBytes + 32*t}, h)
			}
			for i, v := range []reg.VecVirtual{lo, hi} {
				if q5 {
					fifthBitReg(c, h, 2*g+i, v)
				}
				b := c.YMM()
				c.VPBROADCASTD(Mem{Base: y[0], Disp: 4 + 64*g + 32*i + 4*t}, b)
				c.VPMADDUBSW(b, v, b)
				addTo(&s16[i][t*parts/8], b, c.VPADDW)
			}
		}
		for i := range 2 {
			sc := c.YMM()
			c.VPBROADCASTQ(Mem{Base: x, Disp: 32 + 16*g + 8*i}, sc)
			c.VPSHUFB(dup, sc, sc)
			for _, s := range s16[i][:parts] {
				c.VPMADDWD(sc, s, s)
				addTo(&isum[0], s, c.VPADDD)
			}
		}
	}
	for g := 0; g < 4 && rows > 1; g++ {
		for i := 0; i < 2; i++ { // low nibbles (sub-block 2g), high (2g+1)
			s16 := make([][]reg.VecVirtual, parts)
			for p := range s16 {
				s16[p] = make([]reg.VecVirtual, rows)
			}
			for t := 0; t < 8; t++ {
				v := c.YMM()
				if i == 0 {
					c.VPAND(Mem{Base: x, Disp: 160 + 256*g + 32*t}, nib, v)
				} else {
					c.VMOVDQU(Mem{Base: x, Disp: 160 + 256*g + 32*t}, v)
					c.VPSRLW(Imm(4), v, v)
					c.VPAND(nib, v, v)
				}
				if q5 {
					fifthBitAVX2(c, Mem{Base: x, Disp: avoutil.Q4KGroupBytes + 32*t}, 2*g+i, v)
				}
				for r := range rows {
					b := c.YMM()
					c.VPBROADCASTD(Mem{Base: y[r], Disp: 4 + 64*g + 32*i + 4*t}, b)
					c.VPMADDUBSW(b, v, b)
					addTo(&s16[t*parts/8][r], b, c.VPADDW)
				}
			}
			sc := c.YMM()
			c.VPBROADCASTQ(Mem{Base: x, Disp: 32 + 16*g + 8*i}, sc)
			c.VPSHUFB(dup, sc, sc)
			for _, s := range s16 {
				for r := range rows {
					c.VPMADDWD(sc, s[r], s[r])
					addTo(&isum[r], s[r], c.VPADDD)
				}
			}
		}
	}
	msum := make([]reg.VecVirtual, rows)
	for s := 0; s < 8; s++ {
		m := c.YMM()
		c.VPBROADCASTQ(Mem{Base: x, Disp: 96 + 8*s}, m)
		c.VPSHUFB(dup, m, m)
		for r := range rows {
			b := c.YMM()
			c.VPBROADCASTD(Mem{Base: y[r], Disp: 260 + 4*s}, b)
			c.VPMADDWD(b, m, b)
			addTo(&msum[r], b, c.VPADDD)
		}
	}
	if rows == 1 {
		avoutil.Q4KGroupFloats(c, x, y, isum, msum, acc)
	} else {
		// A row at a time (the scales converted again for each): all
		// rows' accumulators at once would not fit in the registers.
		for r := range rows {
			a := c.YMM()
			c.VMOVUPS(frame.Offset(32*r), a)
			avoutil.Q4KGroupFloats(c, x, y[r:r+1], isum[r:r+1], msum[r:r+1], []reg.VecVirtual{a})
			c.VMOVUPS(a, frame.Offset(32*r))
		}
	}
	k.end(blockBytes)
}

// fifthBitReg ORs bit b of the packed Q5_K qh vector h into v's codes as
// bit 4 (avoutil.Q5FifthBit with VEX instructions).
func fifthBitReg(c *build.Context, h reg.VecVirtual, b int, v reg.VecVirtual) {
	and := func(o ...Op) { c.VPAND(o[0], o[1], o[2]) } // (VEX forms: not variadic)
	or := func(o ...Op) { c.VPOR(o[0], o[1], o[2]) }
	avoutil.Q5FifthBit(c, b, h, c.YMM(), v, kqConsts.m10, and, or)
}

// fifthBitAVX2 is fifthBitReg with the qh vector at m.
func fifthBitAVX2(c *build.Context, m Mem, b int, v reg.VecVirtual) {
	h := c.YMM()
	c.VMOVDQU(m, h)
	fifthBitReg(c, h, b, v)
}

// offsetGroupsAVX2 emits gemvQ6_Kx8AVX2 and gemmQ6_Kx8x4AVX2, and the same for
// Q3_K: a packed group of eight Q6_K (Q3_K) rows (layouts in
// codegen/goasm/gen/kernvnni's kquants.go) against one or four Q8_K
// activation rows, with the VNNI kernels' integer sums and float steps, so
// their results bit for bit. Without vpdpbusd a lane's four products are
// vpmaddubsw pairs (codes 0..63: |pair| ≤ 2·63·128 = 16128) summed as int16
// over two vectors (≤ 32256), then vpmaddwd with the sub-block's scales
// (sign-extended, in both words of each lane) makes them int32; the −32
// (−4) of the codes is −32·Σ_s sc[s]·bs[s], a vpmaddwd of the rows' scale
// pairs with the activation block sums' pairs.
func offsetGroupsAVX2(c *build.Context) {
	// loWord: dword r's low word into both of its words (vpshufb in lanes).
	loWord := c.StaticGlobal("kqShufLoWord")
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for r := 0; r < 8; r++ {
		b := uint32(4 * (r % 4))
		c.AddDatum(4*r, U32(b|(b+1)<<8|b<<16|(b+1)<<24))
	}
	// pair: bytes 0..15 as 0, 8, 1, 9, …: sc[2j][r] next to sc[2j+1][r].
	pair := c.StaticGlobal("kqShufPairQ6")
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for i := 0; i < 16; i++ {
		c.AddDatum(i, U8(uint8(i/2+8*(i%2))))
	}
	for _, k := range []avx2Codes{q6CodesAVX2, q3CodesAVX2, q2CodesAVX2} {
		offsetGroupAVX2(c, k, loWord, pair, 1)
		offsetGroupAVX2(c, k, loWord, pair, 4)
	}
}

// An avx2Codes is an offset-code k-quant's packed group (kernvnni's
// offsetCodes: unsigned codes, the weight code − 2^offShift, int8 scales
// [sub-block][row] at 16, f16 d[8] at 0) as offsetGroupAVX2 makes its
// code vectors.
type avx2Codes struct {
	typ        string
	blockBytes int
	offShift   uint64
	// mins: Q2_K's scale bytes (a 4-bit scale and minimum each, at 32)
	// and dmin (at 16) instead of an offset.
	mins bool
	// prefetchLines: lines asked for per pair of positions (eight a
	// block) by the one-row kernel.
	prefetchLines int
	// load loads position vector t of half n's weight vectors; code
	// makes chunk ch's codes from them (one row: each loaded once for
	// the four chunks).
	load func(c *build.Context, x reg.Register, n, t int) []reg.VecVirtual
	code func(c *build.Context, v []reg.VecVirtual, n, ch int, nib reg.VecVirtual) reg.VecVirtual
	// codeMem makes chunk ch's codes at position vector t of half n,
	// loading what it needs (four rows: each code vector made once for
	// all of them).
	codeMem func(c *build.Context, x reg.Register, n, t, ch int, nib reg.VecVirtual) reg.VecVirtual
}

// scaleOff is where the group's scale bytes [sub-block][row] start.
func (kc avx2Codes) scaleOff() int {
	if kc.mins {
		return 32
	}
	return 16
}

// scaleWords loads sub-block s's scales of the eight rows, each in both
// words of its lane (loWord's shuffle), for vpmaddwd.
func (kc avx2Codes) scaleWords(c *build.Context, x reg.Register, s int, loWord Mem) reg.VecVirtual {
	sc := c.YMM()
	m := Mem{Base: x, Disp: kc.scaleOff() + 8*s}
	if kc.mins {
		c.VPMOVZXBD(m, sc)
		c.VPAND(kqConsts.m0f, sc, sc) // the scale nibble
	} else {
		c.VPMOVSXBD(m, sc)
	}
	c.VPSHUFB(loWord, sc, sc)
	return sc
}

// q2CodesAVX2 is Q2_K's (layout in kernvnni's kquants.go): position
// vector t of half n is its qs vector.
var q2CodesAVX2 = avx2Codes{
	typ: "Q2_K", blockBytes: avoutil.Q2KGroupBytes, mins: true, prefetchLines: 2,
	load: func(c *build.Context, x reg.Register, n, t int) []reg.VecVirtual {
		q := c.YMM()
		c.VMOVDQU(Mem{Base: x, Disp: 160 + 256*n + 32*t}, q)
		return []reg.VecVirtual{q}
	},
	code: func(c *build.Context, v []reg.VecVirtual, _, ch int, _ reg.VecVirtual) reg.VecVirtual {
		return q2CodeAVX2(c, v[0], ch)
	},
	codeMem: func(c *build.Context, x reg.Register, n, t, ch int, _ reg.VecVirtual) reg.VecVirtual {
		q := c.YMM()
		c.VMOVDQU(Mem{Base: x, Disp: 160 + 256*n + 32*t}, q)
		return q2CodeAVX2(c, q, ch)
	},
}

// q2CodeAVX2 returns the 2-bit codes of chunk j: bits 2j, 2j+1 of the qs
// vector q.
func q2CodeAVX2(c *build.Context, q reg.VecVirtual, j int) reg.VecVirtual {
	code := c.YMM()
	if j == 0 {
		c.VPAND(kqConsts.m03, q, code)
	} else {
		c.VPSRLW(Imm(uint64(2*j)), q, code)
		c.VPAND(kqConsts.m03, code, code)
	}
	return code
}

// q6CodesAVX2 is Q6_K's (layout in kernvnni's kquants.go): position
// vector t of half n is its A, B and H vectors.
var q6CodesAVX2 = avx2Codes{
	typ: "Q6_K", blockBytes: avoutil.Q6KGroupBytes, offShift: 5, prefetchLines: 4,
	load: func(c *build.Context, x reg.Register, n, t int) []reg.VecVirtual {
		base := 144 + 768*n
		a, bq, h := c.YMM(), c.YMM(), c.YMM()
		c.VMOVDQU(Mem{Base: x, Disp: base + 32*t}, a)
		c.VMOVDQU(Mem{Base: x, Disp: base + 256 + 32*t}, bq)
		c.VMOVDQU(Mem{Base: x, Disp: base + 512 + 32*t}, h)
		return []reg.VecVirtual{a, bq, h}
	},
	code: func(c *build.Context, v []reg.VecVirtual, _, ch int, nib reg.VecVirtual) reg.VecVirtual {
		return q6CodeAVX2(c, v[ch%2], v[2], ch, nib)
	},
	codeMem: func(c *build.Context, x reg.Register, n, t, ch int, nib reg.VecVirtual) reg.VecVirtual {
		base := 144 + 768*n
		h := c.YMM()
		c.VMOVDQU(Mem{Base: x, Disp: base + 512 + 32*t}, h)
		// chunks 0, 2 in A's nibbles, 1, 3 in B's
		return q6CodeAVX2(c, Mem{Base: x, Disp: base + 256*(ch%2) + 32*t}, h, ch, nib)
	},
}

// q3CodesAVX2 is Q3_K's (layout in kernvnni's kquants.go): position
// vector t of half n is its qs vector and the hmask vector t.
var q3CodesAVX2 = avx2Codes{
	typ: "Q3_K", blockBytes: avoutil.Q3KGroupBytes, offShift: 2, prefetchLines: 2,
	load: func(c *build.Context, x reg.Register, n, t int) []reg.VecVirtual {
		q, h := c.YMM(), c.YMM()
		c.VMOVDQU(Mem{Base: x, Disp: 400 + 256*n + 32*t}, q)
		c.VMOVDQU(Mem{Base: x, Disp: 144 + 32*t}, h)
		return []reg.VecVirtual{q, h}
	},
	code: func(c *build.Context, v []reg.VecVirtual, n, ch int, _ reg.VecVirtual) reg.VecVirtual {
		return q3CodeAVX2(c, v[0], v[1], n, ch)
	},
	codeMem: func(c *build.Context, x reg.Register, n, t, ch int, _ reg.VecVirtual) reg.VecVirtual {
		q, h := c.YMM(), c.YMM()
		c.VMOVDQU(Mem{Base: x, Disp: 400 + 256*n + 32*t}, q)
		c.VMOVDQU(Mem{Base: x, Disp: 144 + 32*t}, h)
		return q3CodeAVX2(c, q, h, n, ch)
	},
}

// q3CodeAVX2 returns the 3-bit codes of chunk j of half n: bits 2j, 2j+1
// of the qs vector q, with bit 4n+j of the hmask vector h as bit 2.
func q3CodeAVX2(c *build.Context, q, h reg.VecVirtual, n, j int) reg.VecVirtual {
	code := q2CodeAVX2(c, q, j)
	hb := avoutil.ShiftBit(c, 4*n+j, 2, h, c.YMM())
	m := c.YMM()
	c.VPAND(kqConsts.m04, hb, m)
	c.VPOR(m, code, code)
	return code
}

// avx2Group is an avx2 k-quant group kernel's frame: its weight and
// activation row pointers, the float accumulators (in registers for one
// row, in the stack frame for more: sixteen YMM registers hold the rest)
// and the nibble mask.
type avx2Group struct {
	c      *build.Context
	name   string
	nb, x  reg.Register
	y      []reg.Register
	acc    []reg.VecVirtual // one row
	frame  Mem              // more rows: row r's accumulator at 32r
	nib    reg.VecVirtual
	frames int
}

// startAVX2Group emits the group kernel of typ against rows activation rows
// up to the start of its super-block loop.
func startAVX2Group(c *build.Context, typ string, rows int) *avx2Group {
	k := &avx2Group{c: c, name: avoutil.KQGroupFunction(c, typ, "AVX2", rows, "kerndot", "AVX2, FMA and F16C")}
	k.nb = c.Load(c.Param("nb"), c.GP64())
	k.x = c.Load(c.Param("w").Base(), c.GP64())
	k.y = avoutil.RowPointers(c, rows)
	if rows == 1 {
		k.acc = avoutil.ZeroYMMs(c, 1)
	} else {
		k.frames = rows
		k.frame = c.AllocLocal(32 * rows)
		z := avoutil.ZeroYMMs(c, 1)[0]
		for r := range rows {
			c.VMOVUPS(z, k.frame.Offset(32*r))
		}
	}
	k.nib = c.YMM()
	c.VMOVDQU(kqConsts.m0f, k.nib)
	c.TESTQ(k.nb, k.nb)
	c.JZ(LabelRef(k.name + "_done"))
	c.Label(k.name + "_block")
	return k
}

// end closes the super-block loop (blockBytes of weights per step) and
// stores the rows' eight results.
func (k *avx2Group) end(blockBytes int) {
	c := k.c
	avoutil.NextKQBlock(c, k.x, blockBytes, k.y, k.nb, k.name+"_block", k.name+"_done")
	acc := k.acc
	if k.frames > 0 {
		acc = make([]reg.VecVirtual, k.frames)
		for r := range acc {
			acc[r] = c.YMM()
			c.VMOVUPS(k.frame.Offset(32*r), acc[r])
		}
	}
	avoutil.StoreGroupRows(c, acc)
	c.VZEROUPPER()
	c.RET()
}

// addTo makes v the sum *sum when there is none yet, else adds v into it
// with op (VPADDW, VPADDD).
func addTo(sum *reg.VecVirtual, v reg.VecVirtual, op func(...Op)) {
	if *sum == nil {
		*sum = v
	} else {
		op(v, *sum, *sum)
	}
}

// q6CodeAVX2 returns the 6-bit codes of chunk ch (0..3) at one position
// vector: the low (ch < 2) or high nibbles of q, the A or B run's vector
// (a register, or its bytes in memory), with the H vector h's bits 2ch,
// 2ch+1 as bits 4, 5.
func q6CodeAVX2(c *build.Context, q Op, h reg.VecVirtual, ch int, nib reg.VecVirtual) reg.VecVirtual {
	code, hb := c.YMM(), c.YMM()
	switch {
	case ch < 2:
		c.VPAND(q, nib, code)
	case IsMem(q):
		c.VMOVDQU(q, code)
		c.VPSRLW(Imm(4), code, code)
		c.VPAND(nib, code, code)
	default:
		c.VPSRLW(Imm(4), q, code)
		c.VPAND(nib, code, code)
	}
	switch ch {
	case 0:
		c.VPSLLW(Imm(4), h, hb)
		c.VPAND(kqConsts.m30, hb, hb)
	case 1:
		c.VPSLLW(Imm(2), h, hb)
		c.VPAND(kqConsts.m30, hb, hb)
	case 2:
		c.VPAND(kqConsts.m30, h, hb)
	case 3:
		c.VPSRLW(Imm(2), h, hb)
		c.VPAND(kqConsts.m30, hb, hb)
	}
	c.VPOR(hb, code, code)
	return code
}

// offsetGroupAVX2 emits kc's group kernel against rows activation rows
// (stride bytes apart). A sub-block (half n, chunk ch, positions
// 16tr…16tr+15) is four code vectors, summed two at a time and scaled into
// isum. With four rows the loop runs by sub-block, each code vector made
// once for the four (k.codeMem); with one row by pairs of positions t,
// each t's weight vectors loaded once for the four chunks (k.load), whose
// sums go to two isum chains.
func offsetGroupAVX2(c *build.Context, kc avx2Codes, loWord, pair Mem, rows int) {
	k := startAVX2Group(c, kc.typ, rows)
	x, y, acc, frame, nib := k.x, k.y, k.acc, k.frame, k.nib
	chains := 1
	if rows == 1 {
		chains = 2
	}
	isum := make([][]reg.VecVirtual, chains)
	for i := range isum {
		isum[i] = make([]reg.VecVirtual, rows)
	}
	for step := 0; step < 8 && rows == 1; step++ {
		// One row: each t's A, B and H vectors loaded once for all four
		// chunks, whose pair sums then take their own scales.
		n, tr, tp := step/4, step/2%2, step%2
		pl := kc.prefetchLines
		for k := pl * step; k < pl*step+pl && 64*k < kc.blockBytes; k++ {
			avoutil.StreamPrefetch(c, Mem{Base: x, Disp: avoutil.KQPrefetchBlocks*kc.blockBytes + 64*k})
		}
		var s16 [4]reg.VecVirtual
		for t := 4*tr + 2*tp; t < 4*tr+2*tp+2; t++ {
			v := kc.load(c, x, n, t)
			for ch := 0; ch < 4; ch++ {
				code := kc.code(c, v, n, ch, nib)
				b := c.YMM()
				c.VPBROADCASTD(Mem{Base: y[0], Disp: 4 + 128*n + 32*ch + 4*t}, b)
				c.VPMADDUBSW(b, code, b)
				addTo(&s16[ch], b, c.VPADDW)
			}
		}
		for ch := 0; ch < 4; ch++ {
			// (made again for each pair: four scale vectors kept
			// over both would need more than sixteen registers)
			sc := kc.scaleWords(c, x, 8*n+2*ch+tr, loWord)
			c.VPMADDWD(sc, s16[ch], s16[ch])
			addTo(&isum[ch%chains][0], s16[ch], c.VPADDD)
		}
	}
	for n := 0; n < 2 && rows > 1; n++ {
		for ch := 0; ch < 4; ch++ {
			for tr := 0; tr < 2; tr++ {
				sc := kc.scaleWords(c, x, 8*n+2*ch+tr, loWord)
				for tp := 0; tp < 2; tp++ {
					s16 := make([]reg.VecVirtual, rows)
					for t := 4*tr + 2*tp; t < 4*tr+2*tp+2; t++ {
						code := kc.codeMem(c, x, n, t, ch, nib)
						for r := range rows {
							b := c.YMM()
							c.VPBROADCASTD(Mem{Base: y[r], Disp: 4 + 128*n + 32*ch + 4*t}, b)
							c.VPMADDUBSW(b, code, b)
							addTo(&s16[r], b, c.VPADDW)
						}
					}
					for r := range rows {
						c.VPMADDWD(sc, s16[r], s16[r])
						addTo(&isum[0][r], s16[r], c.VPADDD)
					}
				}
			}
		}
	}
	// The codes' offset: corr = Σ_j (sc[2j]·bs[2j] + sc[2j+1]·bs[2j+1]),
	// isum −= 2^offShift·corr; with mins, corr is msum (m for sc).
	corr := make([]reg.VecVirtual, rows)
	for j := 0; j < 8; j++ {
		p, w := c.XMM(), c.YMM()
		c.VMOVDQU(Mem{Base: x, Disp: kc.scaleOff() + 16*j}, p)
		c.VPSHUFB(pair, p, p)
		if kc.mins {
			c.VPMOVZXBW(p, w) // lane r: the scale bytes of 2j and 2j+1
			c.VPSRLW(Imm(4), w, w)
		} else {
			c.VPMOVSXBW(p, w) // lane r: the words sc[2j][r], sc[2j+1][r]
		}
		for r := range rows {
			b := c.YMM()
			c.VPBROADCASTD(Mem{Base: y[r], Disp: 260 + 4*j}, b)
			c.VPMADDWD(w, b, b)
			addTo(&corr[r], b, c.VPADDD)
		}
	}
	for r := range rows {
		for _, s := range isum[1:] {
			c.VPADDD(s[r], isum[0][r], isum[0][r])
		}
		if !kc.mins {
			c.VPSLLD(Imm(kc.offShift), corr[r], corr[r])
			c.VPSUBD(corr[r], isum[0][r], isum[0][r])
		}
	}
	dw := c.YMM()
	c.VCVTPH2PS(Mem{Base: x}, dw)
	var dmw reg.VecVirtual
	if kc.mins {
		dmw = c.YMM()
		c.VCVTPH2PS(Mem{Base: x, Disp: 16}, dmw)
	}
	for r := range rows {
		a := acc
		if rows > 1 {
			a = []reg.VecVirtual{c.YMM()}
			c.VMOVUPS(frame.Offset(32*r), a[0])
		}
		dy, d := c.YMM(), c.YMM()
		c.VBROADCASTSS(Mem{Base: y[r]}, dy)
		c.VMULPS(dw, dy, d)
		c.VCVTDQ2PS(isum[0][r], isum[0][r])
		c.VFMADD231PS(isum[0][r], d, a[0])
		if kc.mins {
			dm := c.YMM()
			c.VMULPS(dmw, dy, dm)
			c.VCVTDQ2PS(corr[r], corr[r])
			c.VFNMADD231PS(corr[r], dm, a[0])
		}
		if rows > 1 {
			c.VMOVUPS(a[0], frame.Offset(32*r))
		}
	}
	k.end(kc.blockBytes)
}
