package main

import "fmt"

// Group kernels: eight weight rows interleaved as for the amd64 kernels
// (codegen/goasm/gen/kerndot/gemv.go has the layout). Per 32-element block:
// the eight rows' f16 scales (16 bytes), then 32-byte vectors t whose bytes
// 4r..4r+3 are row r's quant bytes 4t..4t+3. A 128-bit register holds half
// a vector: rows 0–3 in the first, rows 4–7 in the second, so every row
// quantity below is a pair of registers (h = 0, 1).
//
// Q4_0 (144 bytes a block, four vectors): the low nibbles of vector t are
// elements 4t..4t+3 and the high nibbles 16+4t..16+4t+3, unsigned 0..15.
// Q8_0 (272 bytes, eight vectors): signed elements 4t..4t+3.
// MXFP4 (136 bytes, four vectors after the eight rows' E8M0 exponent bytes):
// codes as Q4_0's nibbles, which TBL turns into ggml's kvalues_mxfp4 (twice
// the E2M1 values, signed) before the SDOTs, so the dot needs no correction.
//
// An activation row is nb Q8_0 blocks (34 bytes: f16 scale, 32 quants)
// followed by nb pairs {int32 8·Σq, float32 d} (kern's QuantizePackedActs).
// SDOT by element multiplies a weight register's four bytes per lane with
// one four-byte lane of the activation block (quants 0..15 in one register,
// 16..31 in the next) — signed×signed, so Q4_0 nibbles and Q8_0 weights go
// in as they are and Q4_0 subtracts 8·Σq afterwards.
//
// Float order (the amd64 kernels', so every result is theirs bit for bit):
// per row and block the int32 dot is exact (Q4_0: Σ nibble·q − 8Σq; Q8_0:
// Σ w·q; at most 32·128·127 in magnitude, so the split of the integer sum
// over partial SDOT accumulators changes nothing), converted to float32 by
// SCVTF (round to nearest, exact here: |dot| < 2^24), and
//
//	acc = fma(f16(d_w)·d_a, float(dot), acc)
//
// with f16(d_w) widened exactly by FCVTL, the product rounded once (FMUL by
// element), and one fused FMLA: one float32 chain per row over the blocks.
// The one- and four-activation-row kernels share this order.
const (
	actBlockBytes = 34 // Q8_0 block of an activation row
	actSideBytes  = 8  // {int32 8·Σq, float32 d}
)

// Registers. General: R0 block count, R1 the group's bytes, R3+r row r's
// activation quants (block + 2), R7+r its side pairs, R11 stride, R12 and
// R2 scratch, R13 dst, R14 ld. Vector: V0..V7 float accumulators (row r
// half h in V(2r+h)), V8..V15 int32 block sums, V16..V23 activation blocks
// (row r in V(16+2r), V(17+2r)), V24..V29 weights, V30 the block's scales,
// V31 the nibble mask. After the SDOTs the activation and weight registers
// hold the float steps: V16, V17 the widened scales, V18 a side pair,
// V19, V20 the per-row scales d, V21 the Q4_0 correction.
const (
	rNB, rX, rTmp2 = 0, 1, 2
	rY, rSide      = 3, 7
	rStride, rTmp  = 11, 12
	rDst, rLd      = 13, 14

	vAcc, vSum, vAct      v = 0, 8, 16
	vW, vLo, vHi          v = 24, 26, 28
	vScales, vMask        v = 30, 31
	vDw, vPair, vD, vCorr v = 16, 18, 19, 21
)

func gemv(f *file, consts map[string]string, typ string, rows int) {
	groupBlockBytes, vectors, head := 144, 4, 16
	switch typ {
	case "Q8_0":
		groupBlockBytes, vectors = 272, 8
	case "MXFP4":
		groupBlockBytes, head = 136, 8
	}
	nibbles := typ != "Q8_0" // Q4_0 and MXFP4: two codes a byte
	args := []param{{"nb", "int"}, {"w", "[]byte"}, {"a", "[]byte"}, {"dst", "[]float32"}}
	name := "gemv" + typ + "x8NEON"
	doc := []string{
		name + " sets dst[0:8] to the dots of a group of eight packed " + typ + " rows (nb",
		"blocks) with one packed Q8_0 activation row, bit for bit as gemv" + typ + "x8AVX2.",
		"It needs AdvSIMD and the dot product extension (SDOT).",
	}
	if rows > 1 {
		name = fmt.Sprintf("gemm%sx8x%dNEON", typ, rows)
		args = []param{{"nb", "int"}, {"w", "[]byte"}, {"a", "[]byte"}, {"stride", "int"}, {"dst", "[]float32"}, {"ld", "int"}}
		doc = []string{
			fmt.Sprintf("%s sets dst[r*ld:r*ld+8] to gemv%sx8NEON of the group and", name, typ),
			fmt.Sprintf("activation row a[r*stride:], bit for bit, for r < %d, unpacking each", rows),
			"weight block once.",
		}
	}
	if typ == "MXFP4" && rows == 1 {
		doc = []string{doc[0],
			"blocks) with one packed Q8_0 activation row, bit for bit as gemvMXFP4x8VNNI.",
			"Per block: the codes' E2M1 values (kvalues, doubled) by TBL, their exact",
			"dot by SDOT, then acc = fma(e8m0_half(e)·d_a, float(dot), acc), as the VNNI kernels.",
			doc[2]}
	}
	if head+32*vectors != groupBlockBytes {
		panic("kernneon: group block layout") // the post-indexed loads walk it
	}
	g := f.function(name, doc, args, nil)

	// Partial sums per row half: the one-row kernel splits its chain of
	// SDOTs in two (Q4_0: low and high nibbles; Q8_0: even and odd
	// vectors); four rows have four independent chains per half already.
	parts := 1
	if rows == 1 {
		parts = 2
	}
	sum := func(r, p, h int) v { return vSum + v(2*(r*parts+p)+h) }
	acc := func(r, h int) v { return vAcc + v(2*r+h) }
	act := func(r, half int) v { return vAct + v(2*r+half) }

	g.op("MOVD %s, R%d", g.arg("nb"), rNB)
	g.op("MOVD %s, R%d", g.arg("w_base"), rX)
	g.op("MOVD %s, R%d", g.arg("a_base"), rY)
	if rows > 1 {
		g.op("MOVD %s, R%d", g.arg("stride"), rStride)
	}
	g.op("MOVD $%d, R%d", actBlockBytes, rTmp)
	g.op("MUL R%d, R%d, R%d", rNB, rTmp, rTmp) // the Q8_0 part of a row
	for r := range rows {
		if r > 0 {
			g.op("ADD R%d, R%d, R%d", rStride, rY+r-1, rY+r)
		}
		g.op("ADD R%d, R%d, R%d", rTmp, rY+r, rSide+r)
	}
	for r := range rows { // after the side pointers: y[r] is y[r-1]'s base
		g.op("ADD $2, R%d", rY+r)
	}
	if nibbles {
		g.op("MOVD $%s, R%d", consts["nibbleMask"], rTmp2)
		g.op("VLD1 (R%d), [%s]", rTmp2, vMask.arr("B16"))
	}
	if typ == "MXFP4" {
		// The code table's address stays in R2: every register is
		// spoken for with four rows, so the table is loaded into V30
		// per block, and the block's eight exponent bytes wait in R12
		// until the SDOTs are done.
		g.op("MOVD $%s, R%d", consts["mxfp4Values"], rTmp2)
	}
	for r := range rows {
		for h := range 2 {
			a := acc(r, h)
			g.op("VEOR %s, %s, %s", a.arr("B16"), a.arr("B16"), a.arr("B16"))
		}
	}
	g.op("CBZ R%d, %s", rNB, g.lbl("done"))

	g.label("block")
	if typ == "MXFP4" {
		g.op("VLD1 (R%d), [%s]", rTmp2, vScales.arr("B16"))
		g.op("MOVD.P %d(R%d), R%d", head, rX, rTmp)
	} else {
		g.op("VLD1.P 16(R%d), [%s]", rX, vScales.arr("B16"))
	}
	for r := range rows {
		g.op("VLD1 (R%d), %s", rY+r, act(r, 0).list(2, "B16"))
		g.op("ADD $%d, R%d", actBlockBytes, rY+r)
	}
	for r := range rows {
		for p := range parts {
			for h := range 2 {
				s := sum(r, p, h).arr("B16")
				g.op("VEOR %s, %s, %s", s, s, s)
			}
		}
	}
	for t := range vectors {
		g.op("VLD1.P 32(R%d), %s", rX, vW.list(2, "B16"))
		if nibbles {
			for h := range v(2) {
				g.op("VAND %s, %s, %s", vMask.arr("B16"), (vW + h).arr("B16"), (vLo + h).arr("B16"))
				g.op("VUSHR $4, %s, %s", (vW + h).arr("B16"), (vHi + h).arr("B16"))
				if typ == "MXFP4" {
					// The codes' values, signed, for SDOT: no
					// offset to take back afterwards.
					for _, q := range []v{vLo + h, vHi + h} {
						g.op("VTBL %s, [%s], %s", q.arr("B16"), vScales.arr("B16"), q.arr("B16"))
					}
				}
			}
			for r := range rows {
				// Low nibbles: elements 4t..4t+3, activation quants
				// 4t..4t+3; high: 16+4t.., the next register's lane t.
				for half, q := range []v{vLo, vHi} {
					p := half % parts
					for h := range 2 {
						g.sdot(sum(r, p, h), q+v(h), act(r, half), t)
					}
				}
			}
		} else {
			for r := range rows {
				p := t % parts
				for h := range 2 {
					g.sdot(sum(r, p, h), vW+v(h), act(r, t/4), t%4)
				}
			}
		}
	}
	if parts == 2 {
		for r := range rows {
			for h := range 2 {
				s0, s1 := sum(r, 0, h).arr("S4"), sum(r, 1, h).arr("S4")
				g.op("VADD %s, %s, %s", s1, s0, s0)
			}
		}
	}
	if typ == "MXFP4" {
		e8m0Half(g)
	} else {
		g.fcvtl(vDw, vScales)    // rows 0–3
		g.fcvtl2(vDw+1, vScales) // rows 4–7
	}
	for r := range rows {
		g.op("VLD1.P %d(R%d), [%s]", actSideBytes, rSide+r, vPair.arr("S2")) // {8Σq, d_a}
		if typ == "Q4_0" {
			g.op("VDUP %s.S[0], %s", vPair, vCorr.arr("S4"))
		}
		for h := range 2 {
			s := sum(r, 0, h)
			if typ == "Q4_0" {
				g.op("VSUB %s, %s, %s", vCorr.arr("S4"), s.arr("S4"), s.arr("S4")) // Σ (nibble-8)·q
			}
			g.scvtf(s, s)
			g.fmulElem(vD+v(h), vDw+v(h), vPair, 1) // f16(d_w)·d_a per row
			a := acc(r, h)
			g.op("VFMLA %s, %s, %s", (vD + v(h)).arr("S4"), s.arr("S4"), a.arr("S4")) // acc += d·dot
		}
	}
	g.op("SUBS $1, R%d, R%d", rNB, rNB)
	g.op("BNE %s", g.lbl("block"))

	g.label("done")
	storeGroupRows(g, rows)
}

// storeGroupRows ends a group kernel: the eight float lanes of each
// activation row r (V(2r), V(2r+1)) to dst[r*ld:], and returns.
func storeGroupRows(g *fn, rows int) {
	g.op("MOVD %s, R%d", g.arg("dst_base"), rDst)
	if rows > 1 {
		g.op("MOVD %s, R%d", g.arg("ld"), rLd)
		g.op("LSL $2, R%d, R%d", rLd, rLd) // bytes
	}
	for r := range rows {
		if r > 0 {
			g.op("ADD R%d, R%d, R%d", rLd, rDst, rDst)
		}
		g.op("VST1 %s, (R%d)", (vAcc+v(2*r)).list(2, "S4"), rDst)
	}
	g.end()
}

// e8m0Half sets vDw (rows 0–3) and vDw+1 (rows 4–7) to the eight rows'
// ggml_e8m0_to_fp32_half(e) = 2^(e-128) from their exponent bytes in R12,
// as the VNNI kernels do: the float bits (e-1)<<23 for e ≥ 2, and the
// subnormals 0x00200000<<e for e = 0, 1, which are (e+1)<<21. The
// weight and low/high registers (V24..V29) are free by then.
func e8m0Half(g *fn) {
	const (
		vE                   v = 24
		vOne, vNotOne, vNorm v = 25, 26, 27
		vBig                 v = 28
	)
	g.op("FMOVD R%d, F%d", rTmp, int(vScales)) // the low 8 bytes, the rest zeroed
	g.xtl(false, vE, vScales, false, false)    // bytes to halves
	g.xtl(false, vDw, vE, true, false)         // rows 0–3 to words
	g.xtl(false, vDw+1, vE, true, true)        // rows 4–7
	g.op("MOVD $1, R%d", rTmp)
	g.op("VDUP R%d, %s", rTmp, vOne.arr("S4"))
	g.op("MOVD $0xfffffffe, R%d", rTmp)
	g.op("VDUP R%d, %s", rTmp, vNotOne.arr("S4"))
	for h := range v(2) {
		e := (vDw + h).arr("S4")
		g.op("VSUB %s, %s, %s", vOne.arr("S4"), e, vNorm.arr("S4")) // e-1
		g.op("VSHL $23, %s, %s", vNorm.arr("S4"), vNorm.arr("S4"))
		g.op("VCMTST %s, %s, %s", vNotOne.arr("S4"), e, vBig.arr("S4")) // e ≥ 2
		g.op("VADD %s, %s, %s", vOne.arr("S4"), e, e)                   // e+1
		g.op("VSHL $21, %s, %s", e, e)
		g.bit(vDw+h, vNorm, vBig)
	}
}
