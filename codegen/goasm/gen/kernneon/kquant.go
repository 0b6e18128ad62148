package main

import "fmt"

// Q4_K and Q5_K group kernels: kern's Packed, eight Q4_K rows interleaved
// at load (the layout is codegen/goasm/gen/kernvnni's kquants.go: f16 d[8]
// at 0, f16 dmin[8] at 16, the decoded 6-bit scales sc[8][8] at 32 and
// minima mn[8][8] at 96 as bytes [sub-block][row], and at 160+256g+32t+4r
// row r's quant bytes 4t..4t+3 of its 32-byte group g: low nibbles
// sub-block 2g, high 2g+1), against Q8_K activation rows (float32 d, int8
// q[256] at 4, int16 bsums[16] at 260; 292 bytes a super-block). A packed
// Q5_K group is the same 1184 bytes (the codes' low four bits), then at
// 1184+32t+4r row r's qh bytes 4t..4t+3: bit s of qh byte l is the fifth
// bit of element l of sub-block s, so the qh vector t holds the fifth bits
// of the same positions as each group's quant vector t (1440 bytes).
//
// One int32 lane per row, rows 0–3 in one register and 4–7 in the next:
// SDOT by element multiplies four of each row's codes (Q4_K 0..15, Q5_K
// 0..31: positive int8) with the four activation bytes they meet, so a
// sub-block's integer dot forms for eight rows at once; MLA adds it times
// the rows' scales (widened to int32) into isum, and msum = Σ_s
// mn[s]·(bs[2s]+bs[2s+1]) is SADDLP of the block sums and an MLA by
// element per sub-block. Both are exact int32 sums (kern's
// emulateQ45KGroup checks the bound; int32 adds wrap modulo 2^32, so any
// order of them gives the same bits), the amd64 kernels' isum and msum.
// The float steps are the amd64 kernels' (avoutil.Q4KGroupFloats), per row
// and super-block:
//
//	d = f16(d_w)·d_y, dm = f16(dmin_w)·d_y (each product rounded once),
//	acc = fma(d, float(isum), acc), then acc = acc − dm·float(msum), fused,
//
// so the results equal gemvQ4_Kx8AVX2's (gemvQ5_Kx8AVX2's) bit for bit.
// The four-row kernels walk the same super-block once per activation row
// (it stays in L1), each row's accumulators in registers.
const (
	q4KGroupBytes = 1184
	q5KGroupBytes = q4KGroupBytes + 256
	q8KBytes      = 292
)

// Registers of the Q4_K and Q5_K group kernels. General: R0 super-blocks
// left, R1 the group's super-block, R3+r activation row r, R11 stride, R8
// the weight walker, R9 the activation walker, R10 a scale pointer, R12
// the qh walker (Q5_K), R13 dst, R14 ld. Vector: V0..V7 float accumulators
// (row r half h in V(2r+h)), V8, V9 isum, V10, V11 msum, V12..V15 a
// group's activations (sub-blocks 2g, 2g+1), then the block sums;
// V16..V19 the sub-block dots (2g: V16, V17; 2g+1: V18, V19), V20..V25 a
// weight vector and its nibbles, V26, V27 its qh vector (Q5_K) and V28 a
// fifth bit, V26..V28 widened scales; in the float steps V20..V28 hold the
// scales; V30 0x10 bytes (Q5_K), V31 the nibble mask.
const (
	kqWalk, kqActWalk, kqScale, kqQH   = 8, 9, 10, 12
	vKISum, vKMSum, vKAct            v = 8, 10, 12
	vKDot, vKW, vKLo, vKHi           v = 16, 20, 22, 24
	vKSc, vKScLo, vKScHi             v = 26, 27, 28
	vKQH, vKBit, vK10                v = 26, 28, 30
)

// kq45Group emits the Q4_K or Q5_K (typ) group kernel against rows
// activation rows.
func kq45Group(f *file, consts map[string]string, typ string, rows int) {
	q5 := typ == "Q5_K"
	blockBytes := q4KGroupBytes
	var masks []splat
	if q5 {
		blockBytes = q5KGroupBytes
		masks = []splat{{vK10, 0x10}}
	}
	g := startKQGroup(f, consts, typ, rows, masks...)
	acc := func(r, h int) v { return vAcc + v(2*r+h) }
	for r := range rows {
		y := rY + r
		for _, s := range []v{vKISum, vKISum + 1, vKMSum, vKMSum + 1} {
			g.op("VEOR %s, %s, %s", s.arr("B16"), s.arr("B16"), s.arr("B16"))
		}
		g.op("ADD $160, R%d, R%d", rX, kqWalk)
		g.op("ADD $4, R%d, R%d", y, kqActWalk)
		g.op("ADD $32, R%d, R%d", rX, kqScale)
		for grp := 0; grp < 4; grp++ {
			// Sub-blocks 2g and 2g+1 of the activation row.
			g.op("VLD1.P 64(R%d), %s", kqActWalk, vKAct.list(4, "B16"))
			for i := range v(4) {
				d := (vKDot + i).arr("B16")
				g.op("VEOR %s, %s, %s", d, d, d)
			}
			if q5 {
				g.op("ADD $%d, R%d, R%d", q4KGroupBytes, rX, kqQH)
			}
			for t := 0; t < 8; t++ {
				g.op("VLD1.P 32(R%d), %s", kqWalk, vKW.list(2, "B16"))
				for h := range v(2) {
					g.op("VAND %s, %s, %s", vMask.arr("B16"), (vKW + h).arr("B16"), (vKLo + h).arr("B16"))
					g.op("VUSHR $4, %s, %s", (vKW + h).arr("B16"), (vKHi + h).arr("B16"))
				}
				if q5 {
					// The fifth bits: qh bit 2g of the low nibbles'
					// sub-block, 2g+1 of the high ones'.
					g.op("VLD1.P 32(R%d), %s", kqQH, vKQH.list(2, "B16"))
					for h := range v(2) {
						fifthBit(g, 2*grp, vKQH+h, vKBit, vKLo+h, vK10)
						fifthBit(g, 2*grp+1, vKQH+h, vKBit, vKHi+h, vK10)
					}
				}
				// Vector t holds elements 4t..4t+3 of each sub-block: the
				// activation register of its half (t < 4: the first 16
				// bytes), lane t mod 4.
				for h := range v(2) {
					g.sdot(vKDot+h, vKLo+h, vKAct+v(t/4), t%4)
					g.sdot(vKDot+2+h, vKHi+h, vKAct+2+v(t/4), t%4)
				}
			}
			for i := range 2 { // sub-block 2g+i: isum += sc[2g+i]·dot
				g.op("VLD1.P 8(R%d), [%s]", kqScale, vKSc.arr("B8"))
				g.xtl(false, vKSc, vKSc, false, false)
				g.xtl(false, vKScLo, vKSc, true, false)
				g.xtl(false, vKScHi, vKSc, true, true)
				g.mla(vKISum, vKDot+v(2*i), vKScLo)
				g.mla(vKISum+1, vKDot+v(2*i)+1, vKScHi)
			}
		}
		// msum: the pair sums of the block sums, times the minima (R10 is
		// now at mn, 96 bytes into the super-block).
		g.op("ADD $260, R%d, R%d", y, kqActWalk)
		g.op("VLD1 (R%d), %s", kqActWalk, vKAct.list(2, "B16"))
		g.saddlp(vKAct+2, vKAct)
		g.saddlp(vKAct+3, vKAct+1)
		for s := 0; s < 8; s++ {
			g.op("VLD1.P 8(R%d), [%s]", kqScale, vKSc.arr("B8"))
			g.xtl(false, vKSc, vKSc, false, false)
			g.xtl(false, vKScLo, vKSc, true, false)
			g.xtl(false, vKScHi, vKSc, true, true)
			g.mlaElem(vKMSum, vKScLo, vKAct+2+v(s/4), s%4)
			g.mlaElem(vKMSum+1, vKScHi, vKAct+2+v(s/4), s%4)
		}
		// The float steps: d and dmin of the eight rows, times d_y.
		g.op("VLD1 (R%d), %s", rX, vKW.list(2, "B16")) // f16 d[8], dmin[8]
		g.fcvtl(vKLo, vKW)
		g.fcvtl2(vKLo+1, vKW)
		g.fcvtl(vKHi, vKW+1)
		g.fcvtl2(vKHi+1, vKW+1)
		g.op("FMOVS (R%d), F%d", y, int(vKSc)) // d_y in lane 0
		for h := range v(2) {
			g.fmulElem(vKLo+h, vKLo+h, vKSc, 0) // d
			g.fmulElem(vKHi+h, vKHi+h, vKSc, 0) // dm
			g.scvtf(vKISum+h, vKISum+h)
			g.scvtf(vKMSum+h, vKMSum+h)
			a := acc(r, int(h)).arr("S4")
			g.op("VFMLA %s, %s, %s", (vKLo + h).arr("S4"), (vKISum + h).arr("S4"), a)
			g.op("VFMLS %s, %s, %s", (vKHi + h).arr("S4"), (vKMSum + h).arr("S4"), a)
		}
	}
	endKQGroup(g, rows, blockBytes)
}

// A splat is a vector register to fill with one byte value (VMOVI).
type splat struct {
	r v
	b byte
}

// startKQGroup starts the packed k-quant group kernel of typ against rows
// activation rows: gemv<typ>x8NEON for one, gemm<typ>x8x<rows>NEON else,
// with their doc comments. It loads nb (R0), w (R1), the activation rows
// (R3+r; R11 stride), the nibble mask (V31) and the masks, zeroes the
// accumulators (row r in V(2r), V(2r+1)) and opens the super-block loop
// (label block, which endKQGroup closes).
func startKQGroup(f *file, consts map[string]string, typ string, rows int, masks ...splat) *fn {
	name := "gemv" + typ + "x8NEON"
	args := []param{{"nb", "int"}, {"w", "[]byte"}, {"a", "[]byte"}, {"dst", "[]float32"}}
	doc := []string{
		name + " sets dst[0:8] to the dots of a packed group of eight " + typ + " rows (nb",
		"super-blocks) with one Q8_K activation row, bit for bit as gemv" + typ + "x8AVX2.",
		"It needs AdvSIMD and the dot product extension (SDOT).",
	}
	if rows > 1 {
		args = []param{{"nb", "int"}, {"w", "[]byte"}, {"a", "[]byte"}, {"stride", "int"}, {"dst", "[]float32"}, {"ld", "int"}}
		doc = []string{
			fmt.Sprintf("gemm%sx8x%dNEON sets dst[r*ld:r*ld+8] to %s of the group and", typ, rows, name),
			fmt.Sprintf("activation row a[r*stride:], bit for bit, for r < %d.", rows),
		}
		name = fmt.Sprintf("gemm%sx8x%dNEON", typ, rows)
	}
	g := f.function(name, doc, args, nil)
	g.op("MOVD %s, R%d", g.arg("nb"), rNB)
	g.op("MOVD %s, R%d", g.arg("w_base"), rX)
	g.op("MOVD %s, R%d", g.arg("a_base"), rY)
	if rows > 1 {
		g.op("MOVD %s, R%d", g.arg("stride"), rStride)
		for r := 1; r < rows; r++ {
			g.op("ADD R%d, R%d, R%d", rStride, rY+r-1, rY+r)
		}
	}
	g.op("MOVD $%s, R%d", consts["nibbleMask"], rTmp2)
	g.op("VLD1 (R%d), [%s]", rTmp2, vMask.arr("B16"))
	for r := range rows {
		for h := range 2 {
			a := (vAcc + v(2*r+h)).arr("B16")
			g.op("VEOR %s, %s, %s", a, a, a)
		}
	}
	for _, m := range masks {
		g.op("VMOVI $%d, %s", m.b, m.r.arr("B16"))
	}
	g.op("CBZ R%d, %s", rNB, g.lbl("done"))

	g.label("block")
	return g
}

// endKQGroup closes a group kernel's super-block loop (blockBytes of
// weights and a Q8_K block of each activation row per step) and stores the
// rows' results.
func endKQGroup(g *fn, rows, blockBytes int) {
	g.op("ADD $%d, R%d", blockBytes, rX)
	for r := range rows {
		g.op("ADD $%d, R%d", q8KBytes, rY+r)
	}
	g.op("SUBS $1, R%d, R%d", rNB, rNB)
	g.op("BNE %s", g.lbl("block"))

	g.label("done")
	storeGroupRows(g, rows)
}

// fifthBit sets bit 4 of the Q5_K codes in code (whose bit 4 is clear) to
// bit b of the qh bytes in qh, through tmp; m10 holds 0x10 bytes. Byte
// shifts: no bit crosses into the next byte.
func fifthBit(g *fn, b int, qh, tmp, code, m10 v) { insertBit(g, b, 4, qh, tmp, code, m10) }

// insertBit sets bit to of code's bytes (clear there) to bit b of h's,
// through tmp; mask holds the bytes 1<<to. Byte shifts: no bit crosses
// into the next byte.
func insertBit(g *fn, b, to int, h, tmp, code, mask v) {
	src := tmp
	switch {
	case b < to:
		g.op("VSHL $%d, %s, %s", to-b, h.arr("B16"), tmp.arr("B16"))
	case b == to:
		src = h
	default:
		g.op("VUSHR $%d, %s, %s", b-to, h.arr("B16"), tmp.arr("B16"))
	}
	g.bit(code, src, mask)
}

// Q6_K, Q3_K and Q2_K row kernels: rows consecutive weight rows against
// one Q8_K activation row, in the order of gemvQ6_KAVX2, gemvQ3_KAVX2 and
// gemvQ2_KAVX2 (kern's emulateKQuant): eight int32 lanes per super-block,
// lane k holding elements ≡ 4k..4k+3 (mod 32) of each 32-element chunk
// times their 16-element sub-block's scale. Q6_K and Q3_K store codes
// (0..63, 0..7) whose weights are code − 32 and code − 4, so lane k starts
// at −off·(sc[2k]·bs[2k] + sc[2k+1]·bs[2k+1]); Q2_K's minima come first,
// acc = fma(−(d_y·dmin_w), float(mn[2k]·bs[2k] + mn[2k+1]·bs[2k+1]), acc),
// in the same float lanes. Then acc = fma(d_y·d_w, float(lane), acc), and
// per row ggml's hsum of the eight lanes: (acc[0]+acc[4] + acc[2]+acc[6])
// + (acc[1]+acc[5] + acc[3]+acc[7]). Lanes 0–3 are one register and 4–7
// the next, so a chunk's two 16-byte halves are one SDOT (vector) each,
// and the scale of a half is one MLA by element.
//
// The layouts (ggml's): Q6_K (210 bytes) ql[128] low nibbles, qh[64] high
// bit pairs, int8 scales[16] at 192, f16 d at 208; Q3_K (110) hmask[32],
// qs[64] at 32 (2-bit), 12 bytes of 6-bit scales at 96, f16 d at 108; Q2_K
// (84) scales[16] at 0 (low nibble scale, high minimum), qs[64] at 16,
// f16 d and dmin at 80. Chunk c of half n (elements 128n + 32c…) takes
// Q6_K's ql[64n + 32(c&1)…] nibble c>>1 and qh[32n…] bits 2c, 2c+1; Q3_K's
// qs[32n…] bits 2c, 2c+1 and hmask bit 4n+c; Q2_K's qs[32n…] bits 2c, 2c+1.
//
// Registers. General: R0 super-blocks per row, R1 the block, R2 rows
// left, R3 the activation row, R4 its block, R5 super-blocks left,
// R6..R10 scratch, R13 dst. Vector: V0, V1 float lanes, V2, V3 int lanes,
// V4..V7 ql / qs, V8, V9 qh / hmask, V10, V11 a chunk's codes, V12, V13
// its activations, V14, V15 its dots, V16..V19 the sixteen scales as
// int32, V20..V23 scratch (Q2_K's minima), V24..V27 the block sums, V28
// zero, V29 0x30 (Q6_K) or 0x04 bytes, V30 0x0f or 0x03 bytes.
func kqSmallGemv(f *file, consts map[string]string, typ string) {
	bb := map[string]int{"Q6_K": 210, "Q3_K": 110, "Q2_K": 84}[typ]
	g := rowKernel(f, typ)
	const (
		vF, vI, vQL, vQH  v = 0, 2, 4, 8
		vQ, vY, vDot, vSc v = 10, 12, 14, 16
		vT, vBs, vZero    v = 20, 24, 28
		vHi, vLo          v = 29, 30
	)
	b16 := func(r v) string { return r.arr("B16") }
	zero := func(r v) { g.op("VEOR %s, %s, %s", b16(r), b16(r), b16(r)) }
	g.op("MOVD $%s, R6", consts["nibbleMask"])
	g.op("VLD1 (R6), [%s]", b16(vLo))
	g.op("VUSHR $3, %s, %s", b16(vLo), b16(vHi)) // 0x01
	if typ == "Q6_K" {
		g.op("VSHL $4, %s, %s", b16(vLo), b16(vHi))  // 0xf0
		g.op("VUSHR $2, %s, %s", b16(vHi), b16(vHi)) // 0x3c
		g.op("VAND %s, %s, %s", b16(vLo), b16(vHi), b16(vT))
		g.op("VEOR %s, %s, %s", b16(vT), b16(vHi), b16(vHi)) // 0x30
	} else {
		g.op("VSHL $2, %s, %s", b16(vHi), b16(vHi))  // 0x04
		g.op("VUSHR $2, %s, %s", b16(vLo), b16(vLo)) // 0x03
	}
	zero(vZero)
	g.op("CBZ R2, %s", g.lbl("done"))

	g.label("row")
	zero(vF)
	zero(vF + 1)
	g.op("MOVD R3, R4")
	g.op("MOVD R0, R5")
	g.op("CBZ R5, %s", g.lbl("sum"))

	g.label("block")
	// The sixteen scales as int32 in V16..V19 (Q2_K: its minima in
	// V20..V23).
	switch typ {
	case "Q6_K":
		g.op("ADD $192, R1, R6")
		g.op("VLD1 (R6), [%s]", b16(vT))
		g.widen(vT, vSc, vDot, true)
	case "Q3_K":
		// q3Scales: a0, a1 the low bytes, t the high bit pairs; then −32.
		g.op("MOVWU 96(R1), R6")
		g.op("MOVWU 100(R1), R7")
		g.op("MOVWU 104(R1), R8")
		for j, p := range []struct {
			word     int // 6 (a0) or 7 (a1)
			lo4, tsh int
		}{{6, 0, 0}, {7, 0, 2}, {6, 4, 4}, {7, 4, 6}} {
			if p.lo4 > 0 {
				g.op("LSRW $4, R%d, R9", p.word)
				g.op("ANDW $0x0f0f0f0f, R9, R9")
			} else {
				g.op("ANDW $0x0f0f0f0f, R%d, R9", p.word)
			}
			if p.tsh > 0 {
				g.op("LSRW $%d, R8, R10", p.tsh)
				g.op("ANDW $0x03030303, R10, R10")
			} else {
				g.op("ANDW $0x03030303, R8, R10")
			}
			g.op("LSLW $4, R10, R10")
			g.op("ORRW R10, R9, R9")
			g.op("VMOV R9, %s.S[%d]", vT, j)
		}
		g.widen(vT, vSc, vDot, false)
		g.op("MOVW $32, R6")
		g.op("VDUP R6, %s", vBs.arr("S4"))
		for i := range v(4) {
			g.op("VSUB %s, %s, %s", vBs.arr("S4"), (vSc + i).arr("S4"), (vSc + i).arr("S4"))
		}
	case "Q2_K":
		g.op("VLD1 (R1), [%s]", b16(vQL))
		g.op("VSHL $2, %s, %s", b16(vLo), b16(vQL+2))
		g.op("VORR %s, %s, %s", b16(vLo), b16(vQL+2), b16(vQL+2)) // 0x0f
		g.op("VAND %s, %s, %s", b16(vQL+2), b16(vQL), b16(vQL+1))
		g.op("VUSHR $4, %s, %s", b16(vQL), b16(vQL+3)) // minima
		g.widen(vQL+1, vSc, vDot, false)
		g.widen(vQL+3, vT, vDot, false)
	}
	// The block sums (int16 at 260) as int32, times the scales (Q2_K: the
	// minima), pairs added: the lanes' corrections (minima sums).
	g.op("ADD $260, R4, R6")
	g.op("VLD1 (R6), %s", vQ.list(2, "B16"))
	g.xtl(true, vBs, vQ, true, false)
	g.xtl(true, vBs+1, vQ, true, true)
	g.xtl(true, vBs+2, vQ+1, true, false)
	g.xtl(true, vBs+3, vQ+1, true, true)
	by := vSc
	if typ == "Q2_K" {
		by = vT
	}
	for i := range v(4) {
		zero(vQ + i)
		g.mla(vQ+i, vBs+i, by+i)
	}
	g.op("VADDP %s, %s, %s", (vQ + 1).arr("S4"), vQ.arr("S4"), vDot.arr("S4"))
	g.op("VADDP %s, %s, %s", (vQ + 3).arr("S4"), (vQ + 2).arr("S4"), (vDot + 1).arr("S4"))
	switch typ {
	case "Q6_K", "Q3_K":
		shift := map[string]int{"Q6_K": 5, "Q3_K": 2}[typ]
		for h := range v(2) {
			g.op("VSHL $%d, %s, %s", shift, (vDot + h).arr("S4"), (vDot + h).arr("S4"))
			g.op("VSUB %s, %s, %s", (vDot + h).arr("S4"), vZero.arr("S4"), (vI + h).arr("S4"))
		}
	case "Q2_K":
		// acc = acc − (d_y·dmin_w)·float(sum), fused, before the lanes.
		g.op("MOVWU 80(R1), R6") // f16 d, f16 dmin
		g.op("VMOV R6, %s.S[0]", vT)
		g.fcvtl(vT+1, vT)
		g.op("FMOVS (R4), F%d", int(vT+2))
		g.fmulElem(vT+1, vT+1, vT+2, 0) // lane 0 d, lane 1 dm
		g.op("VDUP %s.S[1], %s", vT+1, (vT + 3).arr("S4"))
		for h := range v(2) {
			g.scvtf(vDot+h, vDot+h)
			g.op("VFMLS %s, %s, %s", (vT + 3).arr("S4"), (vDot + h).arr("S4"), (vF + h).arr("S4"))
			zero(vI + h)
		}
	}
	if typ == "Q3_K" {
		g.op("VLD1 (R1), %s", vQH.list(2, "B16")) // hmask
	}
	g.op("ADD $4, R4, R8") // the activation quants
	for half := 0; half < 2; half++ {
		switch typ {
		case "Q6_K":
			g.op("ADD $%d, R1, R6", 64*half)
			g.op("VLD1 (R6), %s", vQL.list(4, "B16"))
			g.op("ADD $%d, R1, R6", 128+32*half)
			g.op("VLD1 (R6), %s", vQH.list(2, "B16"))
		case "Q3_K", "Q2_K":
			g.op("ADD $%d, R1, R6", map[string]int{"Q3_K": 32, "Q2_K": 16}[typ]+32*half)
			g.op("VLD1 (R6), %s", vQL.list(2, "B16"))
		}
		for c := 0; c < 4; c++ {
			for h := range v(2) {
				q, t := b16(vQ+h), b16(vT+h)
				switch typ {
				case "Q6_K":
					q6Code(g, c, vQL+v(2*(c%2))+h, vQH+h, vQ+h, vT+h, vLo, vHi)
				case "Q3_K", "Q2_K":
					if c == 0 {
						g.op("VAND %s, %s, %s", b16(vLo), b16(vQL+h), q)
					} else {
						g.op("VUSHR $%d, %s, %s", 2*c, b16(vQL+h), q)
						g.op("VAND %s, %s, %s", b16(vLo), q, q)
					}
					if typ == "Q3_K" {
						// hmask bit 4n+c as bit 2.
						switch b := 4*half + c; {
						case b < 2:
							g.op("VSHL $%d, %s, %s", 2-b, b16(vQH+h), t)
						case b == 2:
							g.op("VORR %s, %s, %s", b16(vQH+h), b16(vQH+h), t)
						default:
							g.op("VUSHR $%d, %s, %s", b-2, b16(vQH+h), t)
						}
						g.op("VAND %s, %s, %s", b16(vHi), t, t)
						g.op("VORR %s, %s, %s", t, q, q)
					}
				}
			}
			g.op("VLD1.P 32(R8), %s", vY.list(2, "B16"))
			cg := 4*half + c // chunk of the super-block: sub-blocks 2cg, 2cg+1
			for h := range v(2) {
				zero(vDot + h)
				g.sdotVec(vDot+h, vQ+h, vY+h)
				s := 2*cg + int(h)
				g.mlaElem(vI+h, vDot+h, vSc+v(s/4), s%4)
			}
		}
	}
	// The float steps: d = d_y·f16(d_w), acc = fma(d, float(lane), acc).
	g.op("MOVHU %d(R1), R6", map[string]int{"Q6_K": 208, "Q3_K": 108, "Q2_K": 80}[typ])
	g.op("VMOV R6, %s.H[0]", vT)
	g.fcvtl(vT+1, vT)
	g.op("FMOVS (R4), F%d", int(vT+2))
	g.fmulElem(vT+3, vT+1, vT+2, 0) // lane 0: f16(d_w)·d_y
	g.op("VDUP %s.S[0], %s", vT+3, (vT + 3).arr("S4"))
	for h := range v(2) {
		g.scvtf(vI+h, vI+h)
		g.op("VFMLA %s, %s, %s", (vT + 3).arr("S4"), (vI + h).arr("S4"), (vF + h).arr("S4"))
	}
	g.op("ADD $%d, R1", bb)
	g.op("ADD $%d, R4", q8KBytes)
	g.op("SUBS $1, R5, R5")
	g.op("BNE %s", g.lbl("block"))

	g.label("sum")
	rowSum(g, vF, vF+1)
}

// Q4_K and Q5_K row kernels: rows consecutive weight rows (144 or 176 bytes
// a super-block: f16 d, f16 dmin, 12 bytes of packed 6-bit scales and
// minima, Q5_K's qh[32] at 16, then the quants qs[128] at 16 or 48)
// against one Q8_K activation row, in the order of gemvQ4_KAVX2 and
// gemvQ5_KAVX2 (kern's emulateKQuant): eight int32 lanes per super-block
// as the Q6_K kernel's (chunk c of 32 elements is sub-block c, one scale
// for both halves), acc = fma(d_y·d_w, float(lane), acc); the minima in
// four float lanes, lane j: accm = accm − (d_y·dmin_w)·float(mn[2j]·(bs[4j]
// + bs[4j+1]) + mn[2j+1]·(bs[4j+2] + bs[4j+3])), fused; per row the sum
// is hsum(acc) + ((accm[0] + accm[2]) + (accm[1] + accm[3])).
//
// The scales are unpacked in general registers as ggml's utmp trick does
// (bytes 4..15 as three words x0, x1, x2): sc[0..3] = x0 & 0x3f…, mn[0..3]
// = x1 & 0x3f…, sc[4..7] = x2 & 0x0f… | (x0 >> 6 & 0x03…) << 4, mn[4..7] =
// x2 >> 4 & 0x0f… | (x1 >> 6 & 0x03…) << 4.
//
// Registers. General: R0 super-blocks per row, R1 the weight walker, R2
// rows left, R3 the activation row, R4 its block, R5 super-blocks left,
// R6..R10 scratch, R13 dst. Vector: V0, V1 float lanes, V2 the minima's
// float lanes, V3, V4 int lanes, V5, V6 qh, V7, V8 32 bytes of qs, V9,
// V10 a chunk's quants, V11, V12 its activations, V13, V14 its dots, V15,
// V16 the scales and V17, V18 the minima as int32, V19..V23 scratch, V28
// zero, V29 0x10 bytes, V30 0x0f bytes.
func kq45Gemv(f *file, consts map[string]string, typ string) {
	bb, qsAt := 144, 16
	if typ == "Q5_K" {
		bb, qsAt = 176, 48
	}
	g := rowKernel(f, typ)
	const (
		vF, vM, vI, vQH   v = 0, 2, 3, 5
		vQS, vQ, vY, vDot v = 7, 9, 11, 13
		vSc, vMn, vT      v = 15, 17, 19
		vZero, v10, v0F   v = 28, 29, 30
	)
	g.op("MOVD $%s, R6", consts["nibbleMask"])
	g.op("VLD1 (R6), [%s]", v0F.arr("B16"))
	g.op("VUSHR $3, %s, %s", v0F.arr("B16"), v10.arr("B16")) // 0x01
	g.op("VSHL $4, %s, %s", v10.arr("B16"), v10.arr("B16"))  // 0x10
	g.op("VEOR %s, %s, %s", vZero.arr("B16"), vZero.arr("B16"), vZero.arr("B16"))
	g.op("CBZ R2, %s", g.lbl("done"))

	g.label("row")
	for _, r := range []v{vF, vF + 1, vM} {
		g.op("VEOR %s, %s, %s", r.arr("B16"), r.arr("B16"), r.arr("B16"))
	}
	g.op("MOVD R3, R4")
	g.op("MOVD R0, R5")
	g.op("CBZ R5, %s", g.lbl("sum"))

	g.label("block")
	// Scales and minima as bytes, then int32 lanes.
	g.op("MOVWU 4(R1), R6")  // x0
	g.op("MOVWU 8(R1), R7")  // x1
	g.op("MOVWU 12(R1), R8") // x2
	g.op("ANDW $0x3f3f3f3f, R6, R9")
	g.op("VMOV R9, %s.S[0]", vT)
	g.op("ANDW $0x3f3f3f3f, R7, R9")
	g.op("VMOV R9, %s.S[0]", vT+1)
	g.op("LSRW $6, R6, R9")
	g.op("ANDW $0x03030303, R9, R9")
	g.op("LSLW $4, R9, R9")
	g.op("ANDW $0x0f0f0f0f, R8, R10")
	g.op("ORRW R10, R9, R9")
	g.op("VMOV R9, %s.S[1]", vT)
	g.op("LSRW $6, R7, R9")
	g.op("ANDW $0x03030303, R9, R9")
	g.op("LSLW $4, R9, R9")
	g.op("LSRW $4, R8, R10")
	g.op("ANDW $0x0f0f0f0f, R10, R10")
	g.op("ORRW R10, R9, R9")
	g.op("VMOV R9, %s.S[1]", vT+1)
	for i, dst := range []v{vSc, vMn} {
		t := vT + v(i)
		g.xtl(false, t, t, false, false)
		g.xtl(false, dst, t, true, false)
		g.xtl(false, dst+1, t, true, true)
	}
	// The minima's integer sums: mn[s]·(bs[2s] + bs[2s+1]), pairs added.
	g.op("ADD $260, R4, R6")
	g.op("VLD1 (R6), %s", vT.list(2, "B16"))
	g.saddlp(vT+2, vT)
	g.saddlp(vT+3, vT+1)
	for i := range v(2) {
		g.op("VEOR %s, %s, %s", (vT + i).arr("B16"), (vT + i).arr("B16"), (vT + i).arr("B16"))
		g.mla(vT+i, vMn+i, vT+2+i)
	}
	g.op("VADDP %s, %s, %s", (vT + 1).arr("S4"), vT.arr("S4"), (vT + 4).arr("S4")) // prod[0..3]
	for h := range v(2) {
		g.op("VEOR %s, %s, %s", (vI + h).arr("B16"), (vI + h).arr("B16"), (vI + h).arr("B16"))
	}
	if typ == "Q5_K" {
		g.op("ADD $16, R1, R6")
		g.op("VLD1 (R6), %s", vQH.list(2, "B16"))
	}
	g.op("ADD $%d, R1, R6", qsAt)
	g.op("ADD $4, R4, R7")
	for c := 0; c < 8; c++ {
		if c%2 == 0 {
			g.op("VLD1.P 32(R6), %s", vQS.list(2, "B16"))
		}
		for h := range v(2) {
			q := (vQ + h).arr("B16")
			if c%2 == 0 {
				g.op("VAND %s, %s, %s", v0F.arr("B16"), (vQS + h).arr("B16"), q)
			} else {
				g.op("VUSHR $4, %s, %s", (vQS + h).arr("B16"), q)
			}
			if typ == "Q5_K" {
				fifthBit(g, c, vQH+h, vT+h, vQ+h, v10) // bit c of qh as bit 4
			}
		}
		g.op("VLD1.P 32(R7), %s", vY.list(2, "B16"))
		for h := range v(2) {
			g.op("VEOR %s, %s, %s", (vDot + h).arr("B16"), (vDot + h).arr("B16"), (vDot + h).arr("B16"))
			g.sdotVec(vDot+h, vQ+h, vY+h)
			g.mlaElem(vI+h, vDot+h, vSc+v(c/4), c%4)
		}
	}
	// The float steps: d and dmin times d_y, each rounded once.
	g.op("MOVWU (R1), R6") // f16 d, f16 dmin
	g.op("VMOV R6, %s.S[0]", vT)
	g.fcvtl(vT+1, vT) // lane 0 d_w, lane 1 dmin_w
	g.op("FMOVS (R4), F%d", int(vT+2))
	g.fmulElem(vT+1, vT+1, vT+2, 0)
	g.op("VDUP %s.S[0], %s", vT+1, (vT + 2).arr("S4")) // d
	g.op("VDUP %s.S[1], %s", vT+1, (vT + 3).arr("S4")) // dm
	g.scvtf(vT+4, vT+4)
	g.op("VFMLS %s, %s, %s", (vT + 3).arr("S4"), (vT + 4).arr("S4"), vM.arr("S4"))
	for h := range v(2) {
		g.scvtf(vI+h, vI+h)
		g.op("VFMLA %s, %s, %s", (vT + 2).arr("S4"), (vI + h).arr("S4"), (vF + h).arr("S4"))
	}
	g.op("ADD $%d, R1", bb)
	g.op("ADD $%d, R4", q8KBytes)
	g.op("SUBS $1, R5, R5")
	g.op("BNE %s", g.lbl("block"))

	g.label("sum")
	rowSum(g, vF, vT, vM)
}

// rowKernel starts the k-quant row kernel of typ (gemv<typ>NEON: rows
// consecutive weight rows against one Q8_K row) and loads its arguments:
// R2 rows, R0 super-blocks per row, R1 w, R3 a, R13 dst.
func rowKernel(f *file, typ string) *fn {
	name := "gemv" + typ + "NEON"
	args := []param{{"rows", "int"}, {"nb", "int"}, {"w", "[]byte"}, {"a", "[]byte"}, {"dst", "[]float32"}}
	doc := []string{
		name + " sets dst[j] to the dot of " + typ + " row j (rows rows of nb super-blocks,",
		"one after another in w) with one Q8_K activation row, bit for bit as",
		"gemv" + typ + "AVX2. It needs AdvSIMD and the dot product extension (SDOT).",
	}
	g := f.function(name, doc, args, nil)
	g.op("MOVD %s, R2", g.arg("rows"))
	g.op("MOVD %s, R0", g.arg("nb"))
	g.op("MOVD %s, R1", g.arg("w_base"))
	g.op("MOVD %s, R3", g.arg("a_base"))
	g.op("MOVD %s, R13", g.arg("dst_base"))
	return g
}

// rowSum ends a row kernel's row and the kernel: ggml's hsum of the eight
// float lanes in acc, acc+1 ((r0+r2) + (r1+r3) of r[k] = acc[k]+acc[k+4]),
// plus, for each register in minima, the same sum of its four lanes, into
// dst (R13, then on to the next row while R2 rows are left). tmp is a
// scratch register.
func rowSum(g *fn, acc, tmp v, minima ...v) {
	g.fadd(acc, acc, acc+1) // acc[k] + acc[k+4]
	for _, r := range append([]v{acc}, minima...) {
		g.hsum4(r, tmp)
	}
	for _, m := range minima {
		g.op("FADDS F%d, F%d, F%d", m, acc, acc)
	}
	g.op("FMOVS F%d, (R13)", acc)
	g.op("ADD $4, R13")
	g.op("SUBS $1, R2, R2")
	g.op("BNE %s", g.lbl("row"))

	g.label("done")
	g.end()
}
