package main

import (
	"fmt"
	"github.com/minerva-llm/minerva/codegen/goasm/gen/internal/avoutil"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Packed kernels: eight weight rows interleaved so that one YMM lane (four
// bytes) belongs to one row. Layout of a group of eight rows (kern's Pack),
// per 32-element block:
//
//	[0:16]  the eight rows' f16 scales, row r at 2r
//	then    32-byte vectors t = 0, 1, ...; bytes 4r..4r+3 of vector t are
//	        row r's quant bytes 4t..4t+3.
//
// Q4_0 (144 bytes a block): four vectors, whose bytes' low nibbles are
// elements 4t..4t+3 and high nibbles elements 16+4t..16+4t+3. Q8_0 (272
// bytes): eight vectors of signed elements 4t..4t+3.
//
// MXFP4 (136 bytes a block): the eight rows' E8M0 exponent bytes, then four
// vectors of codes as Q4_0's nibbles.
//
// An activation row is a Q8_0 row of nb blocks (34 bytes each) followed by
// nb pairs {int32 8·Σq, float32 d} (kern's QuantizePackedActs), so the Q4_0
// kernel multiplies unsigned nibbles by the activations and subtracts 8·Σq
// instead of recentring every weight. The Q8_0 kernel moves each weight's
// sign onto the activation (vpsignb) to use the unsigned×signed vpmaddubsw.
//
// Per row and block the integer dot is exact (Q4_0: pair sums ≤ 2·15·127,
// eight of them per int16 lane ≤ 30,480; Q8_0: pair sums ≤ 2·128·127
// widened to int32 at once), and each row accumulates
// acc = fma(f16(d_w)·d_a, float(dot), acc) block after block, in one float32
// chain per row. The one- and four-activation-row kernels share this order.
const (
	actBlockBytes = 34
	actSideBytes  = 8
)

func gemv(c *build.Context, typ string, rows int) {
	groupBlockBytes, vectors, head := 144, 4, 16
	switch typ {
	case "Q8_0":
		groupBlockBytes, vectors = 272, 8
	case "MXFP4":
		groupBlockBytes, head = 136, 8
	}
	name := "gemv" + typ + "x8AVX2"
	sig := "func(nb int, w, a []byte, dst []float32)"
	if rows > 1 {
		name = fmt.Sprintf("gemm%sx8x%dAVX2", typ, rows)
		sig = "func(nb int, w, a []byte, stride int, dst []float32, ld int)"
	}
	c.Function(name)
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr(sig)
	switch {
	case rows == 1 && typ == "MXFP4":
		c.Doc(
			name+" sets dst[0:8] to the dots of a group of eight packed MXFP4 rows (nb",
			"blocks) with one packed Q8_0 activation row, bit for bit gemvMXFP4x8VNNI: per",
			"block the exact integer dot (kvalues through vpshufb, their signs moved onto",
			"the activations), then one fma with e8m0_half(e)·d_a. It needs AVX2 and FMA.",
		)
	case rows == 1:
		c.Doc(
			name+" sets dst[0:8] to the dots of a group of eight packed "+typ+" rows (nb",
			"blocks) with one packed Q8_0 activation row. It needs AVX2, FMA and F16C.",
		)
	default:
		c.Doc(
			fmt.Sprintf("%s sets dst[r*ld:r*ld+8] to gemv%sx8AVX2 of the group and", name, typ),
			fmt.Sprintf("activation row a[r*stride:], bit for bit, for r < %d, unpacking each", rows),
			"weight block once.",
		)
	}
	lbl := func(s string) string { return fmt.Sprintf("%s_%s", name, s) }

	nb := c.Load(c.Param("nb"), c.GP64())
	x := c.Load(c.Param("w").Base(), c.GP64())
	y, side := avoutil.ActRowPointers(c, nb, rows, actBlockBytes) // blocks, {8·Σq, d}
	acc := avoutil.ZeroYMMs(c, rows)
	// MXFP4's value table (vpshufb): loaded once for one row.
	var lut reg.VecVirtual
	loadLUT := func() {
		lut = c.YMM()
		c.VBROADCASTI128(consts["mxfp4Values"], lut)
	}
	if typ == "MXFP4" && rows == 1 {
		loadLUT()
	}
	c.TESTQ(nb, nb)
	c.JZ(LabelRef(lbl("done")))
	c.Label(lbl("block"))
	if rows == 1 { // as the VNNI kernels
		// Decode streams the weights once: every line of the block
		// avoutil.GroupPrefetchBytes ahead.
		avoutil.GroupPrefetch(c, x, groupBlockBytes)
	}
	sum := make([]reg.VecVirtual, rows)
	// add accumulates partial sums into sum[r] (the first one initializes it).
	add := func(r int, first bool, v reg.VecVirtual, op func(...Op)) {
		if first {
			sum[r] = v
		} else {
			op(v, sum[r], sum[r])
		}
	}
	switch typ {
	case "Q4_0", "MXFP4":
		// Q4_0's nibbles go into vpmaddubsw as they are (unsigned), with
		// 8·Σq taken back below. MXFP4's codes become their signed values
		// (|v| ≤ 12) by vpshufb, and vpmaddubsw takes |v| with each
		// activation given v's sign: a pair sum is at most 2·12·128, and
		// eight of them fit an int16 lane (24,576), so the dot is exact
		// with nothing to take back.
		if typ == "MXFP4" && rows > 1 {
			loadLUT() // once a block: four rows leave no register for it
		}
		for t := 0; t < vectors; t++ {
			v := c.YMM()
			c.VMOVDQU(Mem{Base: x, Disp: head + 32*t}, v)
			lo, hi := c.YMM(), c.YMM()
			c.VPAND(consts["nibbleMask"], v, lo)
			c.VPSRLW(Imm(4), v, hi)
			c.VPAND(consts["nibbleMask"], hi, hi)
			unsigned := [2]reg.VecVirtual{lo, hi}
			if typ == "MXFP4" {
				c.VPSHUFB(lo, lut, lo)
				c.VPSHUFB(hi, lut, hi)
				unsigned = [2]reg.VecVirtual{c.YMM(), c.YMM()}
				c.VPABSB(lo, unsigned[0])
				c.VPABSB(hi, unsigned[1])
			}
			for r := range rows {
				for half, q := range []reg.VecVirtual{lo, hi} {
					b := c.YMM()
					c.VPBROADCASTD(Mem{Base: y[r], Disp: 2 + 16*half + 4*t}, b)
					if typ == "MXFP4" {
						c.VPSIGNB(q, b, b) // activation with the value's sign
					}
					c.VPMADDUBSW(b, unsigned[half], b) // 16 int16: pairs of code·activation
					add(r, t == 0 && half == 0, b, c.VPADDW)
				}
			}
		}
	default:
		for t := 0; t < vectors; t++ {
			q, aq := c.YMM(), c.YMM()
			c.VMOVDQU(Mem{Base: x, Disp: head + 32*t}, q)
			c.VPABSB(q, aq)
			for r := range rows {
				b := c.YMM()
				c.VPBROADCASTD(Mem{Base: y[r], Disp: 2 + 4*t}, b)
				c.VPSIGNB(q, b, b)               // activation with the weight's sign
				c.VPMADDUBSW(b, aq, b)           // 16 int16: |w|·±a pairs
				c.VPMADDWD(consts["ones"], b, b) // 8 int32
				add(r, t == 0, b, c.VPADDD)
			}
		}
	}
	dw := c.YMM()
	if typ == "MXFP4" {
		avoutil.E8M0Half(c, e8m0, Mem{Base: x}, dw)
	} else {
		c.VCVTPH2PS(Mem{Base: x}, dw) // the eight rows' scales
	}
	for r := range rows {
		s := sum[r]
		if typ != "Q8_0" { // int16 pair sums
			c.VPMADDWD(consts["ones"], s, s) // 8 int32: row r's Σ code·q
		}
		if typ == "Q4_0" {
			corr := c.YMM()
			c.VPBROADCASTD(Mem{Base: side[r]}, corr)
			c.VPSUBD(corr, s, s) // Σ (nibble-8)·q, exact
		}
		c.VCVTDQ2PS(s, s)
		d := c.YMM()
		c.VBROADCASTSS(Mem{Base: side[r], Disp: 4}, d)
		c.VMULPS(dw, d, d)          // f16(d_w)·d_a per row
		c.VFMADD231PS(s, d, acc[r]) // acc = d·dot + acc
	}
	c.ADDQ(U32(groupBlockBytes), x)
	for r := range rows {
		c.ADDQ(U32(actBlockBytes), y[r])
		c.ADDQ(U32(actSideBytes), side[r])
	}
	c.DECQ(nb)
	c.JNZ(LabelRef(lbl("block")))
	c.Label(lbl("done"))
	avoutil.StoreGroupRows(c, acc)
	c.VZEROUPPER()
	c.RET()
}
