package main

// The one-head attention tile kernels over f16 KV caches (kern's ScoresF16
// and AxpyRowsF16; the grouped kernels call them head by head on arm64):
// the amd64 kernels' arithmetic (codegen/goasm/gen/kernattn), so their
// results bit for bit. Scores keep eight float lanes per row (here two
// registers, lanes 0–3 and 4–7), element i of the head in lane i%8, one
// FMLA chain per lane in element order, then hsum_float_8's sums:
// lanes l+4 onto l, then (r0+r2) + (r1+r3). Weighted values are element by
// element: acc[i] = fma(w[j], v[j][i], acc[i]) for the rows in order. FMLA
// rounds once, as vfmadd231ps does; FCVTL (base AdvSIMD, no FP16
// extension needed) widens f16 exactly, as vcvtph2ps.

// scoreRows is how many cache rows the scores kernel takes at a time: each
// query vector loaded once for them, four independent FMLA chains per lane.
const scoreRows = 4

// Registers of scoresF16NEON: R0 rows left, R1 the current row, R2 q, R3
// q's chunks of eight, R4 the row stride in bytes, R5 out, R6 chunks left,
// R7 the query pointer, R8+r row r's pointer. V(2r), V(2r+1) row r's lanes
// 0–3 and 4–7, V16, V17 the query chunk, V18+r row r's eight halves,
// V22+2r, V23+2r their widened halves.
const (
	vScoreQ    v = 16
	vScoreRow  v = 18
	vScoreWide v = 22
)

// attnF16 emits scoresF16NEON and axpyRowsF16NEON.
func attnF16(f *file) {
	g := f.function("scoresF16NEON", []string{
		"scoresF16NEON sets out[j] = q · k[j*stride : j*stride+len(q)] for j < len(out), k an f16",
		"cache, len(q) a positive multiple of 8, bit for bit scoresF16AVX2",
		"(codegen/goasm/gen/kernneon/attn.go). It needs AdvSIMD.",
	}, []param{{"q", "[]float32"}, {"k", "[]uint16"}, {"stride", "int"}, {"out", "[]float32"}}, nil)
	g.op("MOVD %s, R0", g.arg("out_len"))
	g.op("MOVD %s, R1", g.arg("k_base"))
	g.op("MOVD %s, R2", g.arg("q_base"))
	g.op("MOVD %s, R3", g.arg("q_len"))
	g.op("LSR $3, R3, R3")
	g.op("MOVD %s, R4", g.arg("stride"))
	g.op("LSL $1, R4, R4")
	g.op("MOVD %s, R5", g.arg("out_base"))
	g.op("CMP $%d, R0", scoreRows)
	g.op("BLT %s", g.lbl("single"))
	g.label("rows")
	scoreTile(g, scoreRows, "chunks")
	g.op("ADD R4<<2, R1, R1")
	g.op("SUB $%d, R0, R0", scoreRows)
	g.op("CMP $%d, R0", scoreRows)
	g.op("BGE %s", g.lbl("rows"))
	g.label("single")
	g.op("CBZ R0, %s", g.lbl("done"))
	scoreTile(g, 1, "chunk1")
	g.op("ADD R4, R1, R1")
	g.op("SUB $1, R0, R0")
	g.op("B %s", g.lbl("single"))
	g.label("done")
	g.end()

	axpyRowsF16(f)
}

// scoreTile emits the scores of rows cache rows from R1 into out at R5
// (advanced past them); loop names its chunk loop.
func scoreTile(g *fn, rows int, loop string) {
	for r := range rows {
		for h := range 2 {
			a := v(2*r + h)
			g.op("VEOR %s, %s, %s", a.arr("B16"), a.arr("B16"), a.arr("B16"))
		}
		if r == 0 {
			g.op("MOVD R1, R8")
		} else {
			g.op("ADD R4, R%d, R%d", 7+r, 8+r)
		}
	}
	g.op("MOVD R3, R6")
	g.op("MOVD R2, R7")
	g.label(loop)
	g.op("VLD1.P 32(R7), %s", vScoreQ.list(2, "S4"))
	for r := range rows {
		row, lo, hi := vScoreRow+v(r), vScoreWide+v(2*r), vScoreWide+v(2*r+1)
		g.op("VLD1.P 16(R%d), [%s]", 8+r, row.arr("B16"))
		g.fcvtl(lo, row)
		g.fcvtl2(hi, row)
		g.op("VFMLA %s, %s, %s", vScoreQ.arr("S4"), lo.arr("S4"), v(2*r).arr("S4"))
		g.op("VFMLA %s, %s, %s", (vScoreQ + 1).arr("S4"), hi.arr("S4"), v(2*r+1).arr("S4"))
	}
	g.op("SUBS $1, R6, R6")
	g.op("BNE %s", g.lbl(loop))
	for r := range rows {
		a := v(2 * r)
		g.hsum8(a, a+1)
		g.op("FMOVS F%d, %d(R5)", a, 4*r)
	}
	g.op("ADD $%d, R5, R5", 4*rows)
}

// Registers of axpyRowsF16NEON: R0 the accumulators' block, R1 chunks of
// eight left, R2 w, R3 the rows, R4 the row stride in bytes, R5 the block's
// first cache row, R6 rows left, R7 the weight pointer, R8 the cache row,
// R9 a load pointer. V0..V15 a block of up to 64 accumulators, V16 the
// row's weight, V17..V24 its halves, V25..V30 the widened halves.
const (
	vAxpyW    v = 16
	vAxpyHalf v = 17
	vAxpyWide v = 25
)

// axpyBlock is the most chunks of eight accumulators axpyRowsF16NEON holds
// in registers over a pass of the rows.
const axpyBlock = 8

func axpyRowsF16(f *file) {
	g := f.function("axpyRowsF16NEON", []string{
		"axpyRowsF16NEON adds w[j]·v[j*stride : j*stride+len(acc)] to acc for every j < len(w),",
		"rows in order with fused multiply-adds, v an f16 cache, len(acc) a positive multiple of 8,",
		"bit for bit axpyRowsF16AVX2 (codegen/goasm/gen/kernneon/attn.go). It needs AdvSIMD.",
	}, []param{{"acc", "[]float32"}, {"w", "[]float32"}, {"v", "[]uint16"}, {"stride", "int"}}, nil)
	g.op("MOVD %s, R0", g.arg("acc_base"))
	g.op("MOVD %s, R1", g.arg("acc_len"))
	g.op("LSR $3, R1, R1")
	g.op("MOVD %s, R2", g.arg("w_base"))
	g.op("MOVD %s, R3", g.arg("w_len"))
	g.op("MOVD %s, R4", g.arg("stride"))
	g.op("LSL $1, R4, R4")
	g.op("MOVD %s, R5", g.arg("v_base"))
	g.op("CBZ R3, %s", g.lbl("done"))
	g.label("block")
	g.op("CMP $%d, R1", axpyBlock)
	g.op("BLT %s", g.lbl("single"))
	axpyPass(g, axpyBlock, "rows")
	g.op("B %s", g.lbl("block"))
	g.label("single")
	g.op("CBZ R1, %s", g.lbl("done"))
	axpyPass(g, 1, "row1")
	g.op("B %s", g.lbl("single"))
	g.label("done")
	g.end()
}

// axpyPass emits one pass of the rows over chunks chunks of eight
// accumulators at R0 (advanced past them, as R5 past their halves and R1
// down by chunks); loop names its row loop.
func axpyPass(g *fn, chunks int, loop string) {
	nv := 2 * chunks // accumulator registers
	// Loads and stores of four registers at most per instruction, base
	// advanced past them.
	move := func(load bool, base string) {
		for at := 0; at < nv; at += 4 {
			n := min(4, nv-at)
			regs := v(at).list(n, "S4")
			if load {
				g.op("VLD1.P %d(%s), %s", 16*n, base, regs)
			} else { // Go's order: the registers, then the address
				g.op("VST1.P %s, %d(%s)", regs, 16*n, base)
			}
		}
	}
	g.op("MOVD R0, R9")
	move(true, "R9")
	g.op("MOVD R3, R6")
	g.op("MOVD R2, R7")
	g.op("MOVD R5, R8")
	g.label(loop)
	g.op("VLD1R.P 4(R7), [%s]", vAxpyW.arr("S4"))
	g.op("MOVD R8, R9")
	for at := 0; at < chunks; at += 4 {
		n := min(4, chunks-at)
		g.op("VLD1.P %d(R9), %s", 16*n, (vAxpyHalf+v(at)).list(n, "B16"))
	}
	for c := range chunks {
		half := vAxpyHalf + v(c)
		lo, hi := vAxpyWide+v(2*(c%3)), vAxpyWide+v(2*(c%3)+1)
		g.fcvtl(lo, half)
		g.fcvtl2(hi, half)
		g.op("VFMLA %s, %s, %s", vAxpyW.arr("S4"), lo.arr("S4"), v(2*c).arr("S4"))
		g.op("VFMLA %s, %s, %s", vAxpyW.arr("S4"), hi.arr("S4"), v(2*c+1).arr("S4"))
	}
	g.op("ADD R4, R8, R8")
	g.op("SUBS $1, R6, R6")
	g.op("BNE %s", g.lbl(loop))
	g.op("MOVD R0, R9")
	move(false, "R9")
	g.op("ADD $%d, R0, R0", 32*chunks)
	g.op("ADD $%d, R5, R5", 16*chunks)
	g.op("SUB $%d, R1, R1", chunks)
}
