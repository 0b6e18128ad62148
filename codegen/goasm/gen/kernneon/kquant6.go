package main

// Q6_K group kernels: kern's Packed, eight Q6_K rows interleaved at load
// (the layout is codegen/goasm/gen/kernvnni's kquants.go, 1680 bytes a
// super-block: f16 d[8] at 0, the int8 scales sc[16][8] at 16 as bytes
// [sub-block][row], then per half n of the super-block, at 144+768n, three
// runs of eight 32-byte vectors t whose bytes 4r..4r+3 are row r's
// ql[64n+4t…] (A, at +32t), ql[64n+32+4t…] (B, at +256+32t) and
// qh[32n+4t…] (H, at +512+32t)), against Q8_K activation rows (kq45Group
// has their layout). Vector t of each run meets positions l = 4t..4t+3 of
// the half's four 32-element chunks: chunk ch's code is the low (ch < 2)
// or high nibble of A (ch even) or B (ch odd), with H's bits 2ch, 2ch+1 as
// bits 4, 5 (q6Code); its element is 128n+32ch+l, its sub-block
// 8n+2ch+l/16, so vectors t < 4 and t ≥ 4 meet different sub-blocks.
//
// The codes are 0..63 and the weights code − 32. As in the amd64 kernels
// (avoutil.KQ6Prologue's correction, kerndot's offsetGroupAVX2) the −32 is taken out
// with the activation block sums: per row
//
//	isum = Σ_s sc[s]·(Σ_{e∈s} code·y − 32·bs[s]),
//
// which is the amd64 kernels' Σ sc·code·y − 32·Σ_s sc[s]·bs[s]: SDOT by
// element (signed bytes: the codes are positive int8) adds four codes of
// each row times their four activations into a sub-block's dot, which
// starts at −32·bs[s] (bs sign-extended, then shifted and negated in int32,
// exact); MLA adds it times the rows' scales (sign-extended to int32) into
// isum. All of it is int32 arithmetic, which wraps modulo 2^32, so the
// grouping changes no bit of a sum that fits in int32 (kern's
// emulateQ6KGroup checks that it does), and isum is the amd64 kernels'.
// The float steps are theirs too, per row and super-block:
//
//	d = f16(d_w)·d_y (rounded once), acc = fma(d, float(isum), acc),
//
// so the results equal gemvQ6_Kx8AVX2's bit for bit. The four-row kernel
// walks the same super-block once per activation row (it stays in L1),
// each row's accumulators in registers.
const q6KGroupBytes = 1680

// Registers of the Q6_K group kernels. General: R0 super-blocks left, R1
// the group's super-block, R3+r activation row r, R7 its block sums, R8
// the runs of a half, R11 stride, R13 dst, R14 ld. Vector: V0..V7 float
// accumulators (row r half h in V(2r+h)), V8, V9 isum, V10 the block sums
// bs[8n..8n+7] of half n (int16), V11 −32·bs of the four sub-blocks of a
// position range, V12..V15 their activations (chunk ch in V(12+ch)),
// V16..V23 their dots (chunk ch half h in V(16+2ch+h)), V24, V25 an A or B
// vector, V26, V27 the H vector, V28 a code, V29 scratch, V30 0x30 bytes,
// V31 the nibble mask; the scale and float steps use V24..V27.
const (
	vQ6ISum, vQ6BS, vQ6Neg, vQ6Act v = 8, 10, 11, 12
	vQ6Dot, vQ6Run, vQ6H           v = 16, 24, 26
	vQ6Code, vQ6Tmp, vQ6M30        v = 28, 29, 30
	vQ6Sc                          v = 24
	q6BSums, q6Runs                  = 7, 8
)

// An offsetCodes is a k-quant whose group kernel is offsetGroup's: int8
// scales [sub-block][row] at 16, f16 d[8] at 0, codes whose weight is
// code − 2^offShift (or Q2_K's minima, mins), made per position vector t
// of half n by codes, which loads what it needs through the group's
// pointer R1 (Q6_K: through R8, which it points at the half's runs at t =
// 0, the half's first call) and calls dot with each chunk's code, for
// each 16-byte half h of the vectors.
type offsetCodes struct {
	typ        string
	blockBytes int
	offShift   int
	// mins: Q2_K's scale bytes (a 4-bit scale, low, and minimum m, high)
	// at 32 and f16 dmin[8] at 16 instead of an offset: per row
	// msum = Σ_s m[s]·bs[s] (in V10, V11, which the offset's block sums
	// and negation use otherwise) and acc = fma(−(d_y·dmin), msum, acc)
	// after the d step, as gemvQ2_Kx8AVX2.
	mins  bool
	masks []splat
	codes func(g *fn, n, t int, dot func(ch int, h v, code v))
}

// q6Codes is Q6_K's: each t's H vector, then its A and B runs (chunks 0, 2
// and 1, 3).
var q6Codes = offsetCodes{
	typ: "Q6_K", blockBytes: q6KGroupBytes, offShift: 5, masks: []splat{{vQ6M30, 0x30}},
	codes: func(g *fn, n, t int, dot func(ch int, h v, code v)) {
		if t == 0 { // (past LDP's reach from R1 for n = 1)
			g.op("ADD $%d, R%d, R%d", 144+768*n, rX, q6Runs)
		}
		g.op("FLDPQ %d(R%d), (F%d, F%d)", 512+32*t, q6Runs, vQ6H, vQ6H+1)
		for run := 0; run < 2; run++ { // A: chunks 0, 2; B: 1, 3
			g.op("FLDPQ %d(R%d), (F%d, F%d)", 256*run+32*t, q6Runs, vQ6Run, vQ6Run+1)
			for ch := run; ch < 4; ch += 2 {
				for h := range v(2) {
					q6Code(g, ch, vQ6Run+h, vQ6H+h, vQ6Code, vQ6Tmp, vMask, vQ6M30)
					dot(ch, h, vQ6Code)
				}
			}
		}
	},
}

// q3Codes is Q3_K's (layout in codegen/goasm/gen/kernvnni's kquants.go:
// hmask vectors t at 144+32t, half n's qs vectors at 400+256n+32t): chunk
// j's code is (qs>>2j)&3 with bit 4n+j of the hmask byte as bit 2. The
// masks replace the nibble mask, which Q3_K does not use, by 0x03 bytes.
var q3Codes = offsetCodes{
	typ: "Q3_K", blockBytes: 912, offShift: 2, masks: []splat{{vMask, 0x03}, {vQ6M30, 0x04}},
	codes: func(g *fn, n, t int, dot func(ch int, h v, code v)) {
		g.op("FLDPQ %d(R%d), (F%d, F%d)", 144+32*t, rX, vQ6H, vQ6H+1)
		g.op("FLDPQ %d(R%d), (F%d, F%d)", 400+256*n+32*t, rX, vQ6Run, vQ6Run+1)
		for j := 0; j < 4; j++ {
			for h := range v(2) {
				hm := vQ6H + h
				twoBits(g, vQ6Run+h, vQ6Code, vMask, j)
				insertBit(g, 4*n+j, 2, hm, vQ6Tmp, vQ6Code, vQ6M30) // the hmask bit
				dot(j, h, vQ6Code)
			}
		}
	},
}

// q2Codes is Q2_K's (layout in codegen/goasm/gen/kernvnni's kquants.go:
// half n's qs vectors at 160+256n+32t): chunk j's code is (qs>>2j)&3, with
// V30 holding 0x03 bytes (the nibble mask stays for the scales).
var q2Codes = offsetCodes{
	typ: "Q2_K", blockBytes: 8 * 84, mins: true, masks: []splat{{vQ6M30, 0x03}},
	codes: func(g *fn, n, t int, dot func(ch int, h v, code v)) {
		g.op("FLDPQ %d(R%d), (F%d, F%d)", 160+256*n+32*t, rX, vQ6Run, vQ6Run+1)
		for j := 0; j < 4; j++ {
			for h := range v(2) {
				twoBits(g, vQ6Run+h, vQ6Code, vQ6M30, j)
				dot(j, h, vQ6Code)
			}
		}
	},
}

// twoBits sets code's bytes to bits 2j, 2j+1 of q's (m3: 0x03 bytes), the
// 2-bit codes of chunk j of Q2_K and Q3_K.
func twoBits(g *fn, q, code, m3 v, j int) {
	src := q
	if j > 0 {
		g.op("VUSHR $%d, %s, %s", 2*j, q.arr("B16"), code.arr("B16"))
		src = code
	}
	g.op("VAND %s, %s, %s", m3.arr("B16"), src.arr("B16"), code.arr("B16"))
}

// q2Minima sets V10, V11 (rows 0..3, 4..7) to Σ_s m[s]·bs[s] of the group's
// super-block (R1) and the Q8_K block at y, in int32 (exact: |m·bs| ≤
// 15·4080): the block sums sign-extended to words in V12..V15, each m row
// of eight bytes shifted down and widened, then one MLA by element per
// half.
func q2Minima(g *fn, y int) {
	g.op("FLDPQ 260(R%d), (F%d, F%d)", y, vQ6Tmp-1, vQ6Tmp) // bs[0..15], int16
	for i := range v(2) {
		g.xtl(true, vQ6Act+2*i, vQ6Tmp-1+i, true, false)
		g.xtl(true, vQ6Act+2*i+1, vQ6Tmp-1+i, true, true)
	}
	for h := range v(2) {
		m := (vQ6BS + h).arr("B16")
		g.op("VEOR %s, %s, %s", m, m, m)
	}
	for s := 0; s < 16; s++ {
		g.op("FMOVD %d(R%d), F%d", 32+8*s, rX, vQ6Sc)
		g.op("VUSHR $4, %s, %s", vQ6Sc.arr("B16"), vQ6Sc.arr("B16"))
		g.xtl(false, vQ6Sc, vQ6Sc, false, false)
		g.xtl(false, vQ6Sc+1, vQ6Sc, true, false)
		g.xtl(false, vQ6Sc+2, vQ6Sc, true, true)
		g.mlaElem(vQ6BS, vQ6Sc+1, vQ6Act+v(s/4), s%4)
		g.mlaElem(vQ6BS+1, vQ6Sc+2, vQ6Act+v(s/4), s%4)
	}
}

// offsetGroup emits k's gemv<typ>x8NEON (rows 1) or gemm<typ>x8x<rows>NEON.
func offsetGroup(f *file, consts map[string]string, k offsetCodes, rows int) {
	g := startKQGroup(f, consts, k.typ, rows, k.masks...)
	acc := func(r, h v) v { return vAcc + 2*r + h }
	dot := func(ch int, h v) v { return vQ6Dot + v(2*ch) + h }
	for r := range v(rows) {
		y := rY + int(r)
		for h := range v(2) {
			s := (vQ6ISum + h).arr("B16")
			g.op("VEOR %s, %s, %s", s, s, s)
		}
		if k.mins {
			q2Minima(g, y)
		} else {
			g.op("ADD $260, R%d, R%d", y, q6BSums)
		}
		for n := 0; n < 2; n++ {
			if !k.mins {
				g.op("FMOVQ %d(R%d), F%d", 16*n, q6BSums, vQ6BS)
			}
			for tr := 0; tr < 2; tr++ {
				// Positions 16tr…16tr+15 (vectors 4tr…4tr+3) of the four
				// chunks: sub-blocks s = 8n+2ch+tr. Word k of V10 is
				// bs[8n+2k] (low half), bs[8n+2k+1] (high half).
				switch {
				case k.mins:
				case tr == 0:
					g.op("VSHL $16, %s, %s", vQ6BS.arr("S4"), vQ6Neg.arr("S4"))
					g.sshr(vQ6Neg, vQ6Neg, 16-k.offShift) // 2^offShift·bs[8n+2k]
				default:
					g.sshr(vQ6Neg, vQ6BS, 16)
					g.op("VSHL $%d, %s, %s", k.offShift, vQ6Neg.arr("S4"), vQ6Neg.arr("S4")) // 2^offShift·bs[8n+2k+1]
				}
				if !k.mins {
					g.neg(vQ6Neg, vQ6Neg)
				}
				for ch := 0; ch < 4; ch++ {
					g.op("FMOVQ %d(R%d), F%d", 4+128*n+32*ch+16*tr, y, vQ6Act+v(ch))
				}
				for ch := 0; ch < 4; ch++ {
					for h := range v(2) {
						d := dot(ch, h)
						if k.mins { // the dots start at 0
							g.op("VEOR %s, %s, %s", d.arr("B16"), d.arr("B16"), d.arr("B16"))
						} else {
							g.op("VDUP %s.S[%d], %s", vQ6Neg, ch, d.arr("S4"))
						}
					}
				}
				for t := 4 * tr; t < 4*tr+4; t++ {
					k.codes(g, n, t, func(ch int, h v, code v) {
						g.sdot(dot(ch, h), code, vQ6Act+v(ch), t%4)
					})
				}
				for ch := 0; ch < 4; ch++ { // isum += sc[s]·dot
					s := 8*n + 2*ch + tr
					if k.mins { // the scale nibble, unsigned
						g.op("FMOVD %d(R%d), F%d", 32+8*s, rX, vQ6Sc)
						g.op("VAND %s, %s, %s", vMask.arr("B16"), vQ6Sc.arr("B16"), vQ6Sc.arr("B16"))
					} else {
						g.op("FMOVD %d(R%d), F%d", 16+8*s, rX, vQ6Sc)
					}
					g.xtl(!k.mins, vQ6Sc, vQ6Sc, false, false)
					g.xtl(!k.mins, vQ6Sc+1, vQ6Sc, true, false)
					g.xtl(!k.mins, vQ6Sc+2, vQ6Sc, true, true)
					g.mla(vQ6ISum, dot(ch, 0), vQ6Sc+1)
					g.mla(vQ6ISum+1, dot(ch, 1), vQ6Sc+2)
				}
			}
		}
		// The float steps: d of the eight rows times d_y.
		g.op("FMOVQ (R%d), F%d", rX, vQ6Sc) // f16 d[8]
		g.fcvtl(vQ6Sc+1, vQ6Sc)
		g.fcvtl2(vQ6Sc+2, vQ6Sc)
		g.op("FMOVS (R%d), F%d", y, vQ6Sc+3) // d_y in lane 0
		for h := range v(2) {
			d := vQ6Sc + 1 + h
			g.fmulElem(d, d, vQ6Sc+3, 0)
			g.scvtf(vQ6ISum+h, vQ6ISum+h)
			g.op("VFMLA %s, %s, %s", d.arr("S4"), (vQ6ISum + h).arr("S4"), acc(r, h).arr("S4"))
		}
		if k.mins { // then acc −= (dmin·d_y)·msum, fused
			g.op("FMOVQ 16(R%d), F%d", rX, vQ6Sc) // f16 dmin[8]
			g.fcvtl(vQ6Sc+1, vQ6Sc)
			g.fcvtl2(vQ6Sc+2, vQ6Sc)
			for h := range v(2) {
				dm := vQ6Sc + 1 + h
				g.fmulElem(dm, dm, vQ6Sc+3, 0)
				g.scvtf(vQ6BS+h, vQ6BS+h)
				g.op("VFMLS %s, %s, %s", dm.arr("S4"), (vQ6BS + h).arr("S4"), acc(r, h).arr("S4"))
			}
		}
	}
	endKQGroup(g, rows, k.blockBytes)
}

// q6Code sets code to the Q6_K codes of chunk ch (0..3) at one position
// vector: the low (ch < 2) or high nibbles of run (an A or B vector), with
// bits 2ch, 2ch+1 of the H vector h as bits 4, 5, through tmp; m0f and m30
// hold 0x0f and 0x30 bytes. Byte shifts: no bit crosses into the next
// byte.
func q6Code(g *fn, ch int, run, h, code, tmp, m0f, m30 v) {
	if ch < 2 {
		g.op("VAND %s, %s, %s", m0f.arr("B16"), run.arr("B16"), code.arr("B16"))
	} else {
		g.op("VUSHR $4, %s, %s", run.arr("B16"), code.arr("B16"))
	}
	src := tmp
	switch ch {
	case 0:
		g.op("VSHL $4, %s, %s", h.arr("B16"), tmp.arr("B16"))
	case 1:
		g.op("VSHL $2, %s, %s", h.arr("B16"), tmp.arr("B16"))
	case 2:
		src = h
	case 3:
		g.op("VUSHR $2, %s, %s", h.arr("B16"), tmp.arr("B16"))
	}
	g.bit(code, src, m30)
}
