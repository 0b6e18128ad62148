// Command kernvnni generates runtime/cpu/kern/vnni_amd64.s and
// vnni_amd64_stubs.go: the group kernels of kern's Packed (eight
// interleaved Q4_0 or Q8_0 rows, see codegen/goasm/gen/kerndot/gemv.go for
// the layout) for CPUs with AVX-512 VNNI and VL. vpdpbusd multiplies
// unsigned by signed bytes and adds each four products into an int32 lane in
// one instruction, with the activation's four bytes broadcast from memory
// ({1to8}); the AVX2 kernels need a broadcast, vpmaddubsw and an add for the
// same work. The vectors stay 256 bits wide, so the packed layout is the
// AVX2 one, and the float arithmetic (and so every result) is the AVX2
// kernels' bit for bit.
//
// Q8_0 weights are packed with their sign bit flipped (w+128, unsigned); the
// kernel subtracts 16·8Σq = 128Σq from each row's block sum to undo it.
// Q4_0 nibbles are unsigned already and get 8Σq subtracted, as in AVX2.
//
// avo has no VNNI instructions, so vpdpbusd is emitted as a raw instruction
// with its operands, inputs and outputs declared for the register allocator.
//
// Usage (from runtime/cpu/kern, see its go:generate line in vnni.go):
//
//	go run ../../../codegen/goasm/gen/kernvnni -dir .
package main

import (
	"flag"
	"fmt"
	"github.com/minerva-llm/minerva/codegen/goasm/gen/internal/avoutil"
	"github.com/minerva-llm/minerva/quant"
	"os"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func main() {
	dir := flag.String("dir", ".", "directory that receives vnni_amd64.s and vnni_amd64_stubs.go")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "kernvnni:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	c := build.NewContext()
	c.ConstraintExpr("amd64")
	mask := c.StaticGlobal("vnniNibbleMask")
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for i := 0; i < 4; i++ {
		c.AddDatum(8*i, U64(0x0f0f0f0f0f0f0f0f))
	}
	mxfp4Consts(c)
	// MXFP4 (the gpt-oss experts): the group kernels for one and four
	// activation rows only; a MoE step gives an expert few rows.
	gemv(c, "MXFP4", 1, mask)
	gemv(c, "MXFP4", 4, mask)
	for _, typ := range []string{"Q4_0", "Q8_0"} {
		if typ != "Q4_0" {
			gemv(c, typ, 1, mask) // Q4_0's: gemvQ4_0Lean, after kquants
		}
		gemv(c, typ, 4, mask)
		gemm8(c, typ, mask)
		// No one-row pair kernel: in decode, reading the two groups as
		// two streams made it slower than the eight-lane gemv (TinyLlama
		// Q4_0 decode 30 against 42 tok/s).
		for _, rows := range []int{4, 8} {
			gemm16(c, typ, rows, mask)
		}
	}
	kquants(c)
	gemvQ4_0Lean(c, mask)
	kquants23(c)
	for _, q5 := range []bool{false, true} {
		q4KGroup(c, 1, mask, q5)
		q4KGroup(c, 4, mask, q5)
	}
	for _, q5 := range []bool{false, true} {
		q4KGroupWide(c, 1, q5)
		q4KGroupWide(c, 2, q5)
	}
	for _, k := range []offsetCodes{q6Codes, q3Codes, q2Codes} {
		offsetGroup(c, k, 1, 1)
		offsetGroup(c, k, 4, 1)
		offsetGroup(c, k, 4, 2)
	}
	// Q6_K's pair kernel over eight activation rows too: each block's
	// codes unpacked once for twice the rows (prefill).
	offsetGroup(c, q6Codes, 8, 2)
	return avoutil.Write(c, "codegen/goasm/gen/kernvnni", dir, "vnni_amd64.s", "vnni_amd64_stubs.go")
}

// vpdpbusdBcst emits VPDPBUSD.BCST m, q, acc: acc[i] += Σ_j q[4i+j]·m[j]
// (q unsigned, the four bytes at m signed and broadcast to every lane).
func vpdpbusdBcst(c *build.Context, m Mem, q, acc reg.VecVirtual) {
	vnniBcst(c, "VPDPBUSD", m, q, acc)
}

// vnniBcst emits the VNNI instruction op with its memory operand broadcast
// ({1to8}): op.BCST m, q, acc.
func vnniBcst(c *build.Context, op string, m Mem, q, acc reg.VecVirtual) {
	c.Instruction(&ir.Instruction{
		Opcode:   op,
		Suffixes: []string{"BCST"},
		Operands: []Op{m, q, acc},
		Inputs:   []Op{m, q, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512VNNI", "AVX512VL"},
	})
}

// groupLayout returns the bytes of a packed group's block of typ (Q4_0,
// Q8_0 or MXFP4) and how many 32-byte weight vectors follow its eight
// scales (f16, or MXFP4's E8M0 bytes: groupHead).
func groupLayout(typ string) (blockBytes, vectors int) {
	switch typ {
	case "Q8_0":
		return 272, 8
	case "MXFP4":
		return 136, 4
	}
	return 144, 4
}

// groupHead is the bytes of a group block's eight scales.
func groupHead(typ string) int {
	if typ == "MXFP4" {
		return 8
	}
	return 16
}

// mxfp4Consts defines the MXFP4 group kernels' constants: ggml's
// kvalues_mxfp4 plus 12 (so that vpdpbusd, whose weight operand is
// unsigned, takes them: Σ(kv+12)·q − 12·Σq is the dot), twice for the two
// 128-bit lanes of vpshufb; and the dwords 1 and 2^-128's bits (0x00200000)
// for the E8M0 scale.
func mxfp4Consts(c *build.Context) {
	mx.lut = c.StaticGlobal("vnniMXFP4Plus12")
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for lane := 0; lane < 2; lane++ {
		for i, v := range quant.MXFP4Values {
			c.AddDatum(16*lane+i, U8(uint8(int(v)+12)))
		}
	}
	mx.e8m0 = avoutil.DefineE8M0Consts(c, "vnni")
}

// mx holds the MXFP4 constants' addresses (mxfp4Consts).
var mx struct {
	lut  Mem
	e8m0 avoutil.E8M0Consts
}

// prefetchBlocks is how many blocks ahead the pair kernels prefetch.
const prefetchBlocks = 8

const (
	actBlockBytes = 34
	actSideBytes  = 8
)

func gemv(c *build.Context, typ string, rows int, mask Mem) {
	groupBlockBytes, vectors := groupLayout(typ)
	head := groupHead(typ) // the weight vectors follow the eight scales
	name := "gemv" + typ + "x8VNNI"
	sig := "func(nb int, w, a []byte, dst []float32)"
	if rows > 1 {
		name = fmt.Sprintf("gemm%sx8x%dVNNI", typ, rows)
		sig = "func(nb int, w, a []byte, stride int, dst []float32, ld int)"
	}
	c.Function(name)
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr(sig)
	if typ == "MXFP4" {
		c.Doc(fmt.Sprintf("%s sets the dots of a packed group of eight MXFP4 rows (nb blocks) with %d", name, rows),
			"packed Q8_0 activation rows: per block the exact integer dot (kvalues+12 through vpshufb,",
			"vpdpbusd, minus 12·Σq), then one fma with e8m0_half(e)·d_a. It needs AVX-512 VNNI and VL, FMA, AVX2.")
	} else {
		c.Doc(fmt.Sprintf("%s is gemv/gemm%sx8AVX2 (%d activation rows) with vpdpbusd, for", name, typ, rows),
			"VNNI-packed groups (Q8_0 weights sign-flipped). It needs AVX-512 VNNI and VL, FMA, F16C.")
	}
	lbl := func(s string) string { return name + "_" + s }

	nb := c.Load(c.Param("nb"), c.GP64())
	x := c.Load(c.Param("w").Base(), c.GP64())
	y, side := avoutil.ActRowPointers(c, nb, rows, actBlockBytes) // blocks, {8·Σq, d}
	acc := avoutil.ZeroYMMs(c, rows)
	// One row's loop goes at the rate of its loads, so its constants live
	// in registers, loaded once, rather than being loaded by every vpand
	// (Q4_0, whose one-row kernel is gemvQ4_0Lean now: 110 → 86 cycles per
	// 256 weights of the group, BenchmarkGroupCycles, Zen 4); with more
	// rows the sixteen VEX registers are spoken for, and MXFP4's table is
	// loaded once a block.
	var nib Op = mask
	var lut reg.VecVirtual
	loadLUT := func() {
		lut = c.YMM()
		c.VMOVDQU(mx.lut, lut)
	}
	if rows == 1 && typ != "Q8_0" {
		m := c.YMM()
		c.VMOVDQU(mask, m)
		nib = m
		if typ == "MXFP4" {
			loadLUT()
		}
	}
	c.TESTQ(nb, nb)
	c.JZ(LabelRef(lbl("done")))
	c.Label(lbl("block"))
	if typ == "MXFP4" && rows > 1 {
		loadLUT()
	}
	// Each row's block sum is split over parts partial sums (integer adds
	// are exact, so the split changes no result): chains of dependent
	// vpdpbusd (5 cycles each) would otherwise bound the loop.
	parts := 4
	if rows > 1 {
		parts = 2
	}
	part := make([][]reg.VecVirtual, rows)
	n := make([]int, rows) // vpdpbusd issued per row, for the round robin
	for r := range rows {
		part[r] = make([]reg.VecVirtual, parts)
		for i := range part[r] {
			part[r][i] = c.YMM()
			c.VPXOR(part[r][i], part[r][i], part[r][i])
		}
	}
	dp := func(r int, m Mem, q reg.VecVirtual) {
		vpdpbusdBcst(c, m, q, part[r][n[r]%parts])
		n[r]++
	}
	if rows == 1 {
		// Decode streams the weights once: every line of the block
		// avoutil.GroupPrefetchBytes ahead, as the AVX2 kernels ask.
		// MXFP4 (a MoE step's expert matrices, one activation row each
		// in decode) did without until it streamed at 0.66 of Q4_0's
		// rate, and 0.89–0.93 with it (BenchmarkPackedStreamPaired).
		avoutil.GroupPrefetch(c, x, groupBlockBytes)
	}
	for t := 0; t < vectors; t++ {
		if typ == "MXFP4" {
			// Low nibbles are elements 4t.., high ones 16+4t..: their
			// codes become kv+12 through the table.
			lo, hi := c.YMM(), c.YMM()
			c.VMOVDQU(Mem{Base: x, Disp: head + 32*t}, lo)
			c.VPSRLW(Imm(4), lo, hi)
			c.VPAND(nib, lo, lo)
			c.VPAND(nib, hi, hi)
			c.VPSHUFB(lo, lut, lo)
			c.VPSHUFB(hi, lut, hi)
			for r := range rows {
				dp(r, Mem{Base: y[r], Disp: 2 + 4*t}, lo)
				dp(r, Mem{Base: y[r], Disp: 18 + 4*t}, hi)
			}
		} else if typ == "Q4_0" {
			v, lo, hi := c.YMM(), c.YMM(), c.YMM()
			c.VMOVDQU(Mem{Base: x, Disp: head + 32*t}, v)
			c.VPAND(nib, v, lo)
			c.VPSRLW(Imm(4), v, hi)
			c.VPAND(nib, hi, hi)
			for r := range rows {
				dp(r, Mem{Base: y[r], Disp: 2 + 4*t}, lo)
				dp(r, Mem{Base: y[r], Disp: 18 + 4*t}, hi)
			}
		} else {
			q := c.YMM()
			c.VMOVDQU(Mem{Base: x, Disp: head + 32*t}, q)
			for r := range rows {
				dp(r, Mem{Base: y[r], Disp: 2 + 4*t}, q)
			}
		}
	}
	sum := make([]reg.VecVirtual, rows)
	for r := range rows {
		sum[r] = part[r][0]
		for _, p := range part[r][1:] {
			c.VPADDD(p, sum[r], sum[r])
		}
		corr := c.YMM()
		c.VPBROADCASTD(Mem{Base: side[r]}, corr) // 8Σq
		switch typ {
		case "Q8_0":
			c.VPSLLD(Imm(4), corr, corr) // 128Σq
		case "MXFP4":
			half := c.YMM()
			c.VPSRAD(Imm(1), corr, half) // 4Σq (8Σq is a multiple of 8)
			c.VPADDD(half, corr, corr)   // 12Σq
		}
		c.VPSUBD(corr, sum[r], sum[r])
	}
	dw := c.YMM()
	if typ == "MXFP4" {
		avoutil.E8M0Half(c, mx.e8m0, Mem{Base: x}, dw)
	} else {
		c.VCVTPH2PS(Mem{Base: x}, dw)
	}
	for r := range rows {
		s := sum[r]
		c.VCVTDQ2PS(s, s)
		d := c.YMM()
		c.VBROADCASTSS(Mem{Base: side[r], Disp: 4}, d)
		c.VMULPS(dw, d, d)
		c.VFMADD231PS(s, d, acc[r])
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

// gemm8 emits gemm<T>x8x8VNNI: eight activation rows per weight group, each
// block's weights unpacked once for all eight (prefill). Eight block sums
// and the weights fill the sixteen YMM registers, so the rows' float
// accumulators live in the stack frame; the float steps are the other
// kernels' (one fma per row and block, in block order), so results are
// theirs bit for bit.
func gemm8(c *build.Context, typ string, mask Mem) {
	const rows = 8
	groupBlockBytes, vectors := groupLayout(typ)
	name := fmt.Sprintf("gemm%sx8x8VNNI", typ)
	c.Function(name)
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr("func(nb int, w, a []byte, stride int, dst []float32, ld int)")
	c.Doc(fmt.Sprintf("%s sets dst[r*ld:r*ld+8] to gemv%sx8VNNI of the group and", name, typ),
		"activation row a[r*stride:] for r < 8, bit for bit, unpacking each weight block once.")
	lbl := func(s string) string { return name + "_" + s }
	acc := c.AllocLocal(32 * rows)
	nb := c.Load(c.Param("nb"), c.GP64())
	x := c.Load(c.Param("w").Base(), c.GP64())
	act := eightActRows(c, nb)
	z := c.YMM()
	c.VXORPS(z, z, z)
	zeroStackRows(c, acc, 32, rows, z)
	c.TESTQ(nb, nb)
	c.JZ(LabelRef(lbl("done")))
	c.Label(lbl("block"))
	sum := make([]reg.VecVirtual, rows)
	for r := range sum {
		sum[r] = c.YMM()
		c.VPXOR(sum[r], sum[r], sum[r])
	}
	for t := 0; t < vectors; t++ {
		if typ == "Q4_0" {
			v, lo, hi := c.YMM(), c.YMM(), c.YMM()
			c.VMOVDQU(Mem{Base: x, Disp: 16 + 32*t}, v)
			c.VPAND(mask, v, lo)
			c.VPSRLW(Imm(4), v, hi)
			c.VPAND(mask, hi, hi)
			for r := 0; r < rows; r++ {
				vpdpbusdBcst(c, act.at(false, r, 2+4*t), lo, sum[r])
				vpdpbusdBcst(c, act.at(false, r, 18+4*t), hi, sum[r])
			}
		} else {
			q := c.YMM()
			c.VMOVDQU(Mem{Base: x, Disp: 16 + 32*t}, q)
			for r := 0; r < rows; r++ {
				vpdpbusdBcst(c, act.at(false, r, 2+4*t), q, sum[r])
			}
		}
	}
	dw := c.YMM()
	c.VCVTPH2PS(Mem{Base: x}, dw)
	for r := 0; r < rows; r++ {
		corr := c.YMM()
		c.VPBROADCASTD(act.at(true, r, 0), corr) // 8Σq
		if typ == "Q8_0" {
			c.VPSLLD(Imm(4), corr, corr) // 128Σq
		}
		c.VPSUBD(corr, sum[r], sum[r])
		c.VCVTDQ2PS(sum[r], sum[r])
		d := c.YMM()
		c.VBROADCASTSS(act.at(true, r, 4), d)
		c.VMULPS(dw, d, d)
		a := c.YMM()
		c.VMOVUPS(acc.Offset(32*r), a)
		c.VFMADD231PS(sum[r], d, a)
		c.VMOVUPS(a, acc.Offset(32*r))
	}
	c.ADDQ(U32(groupBlockBytes), x)
	act.advance(rows)
	c.DECQ(nb)
	c.JNZ(LabelRef(lbl("block")))
	c.Label(lbl("done"))
	storeStackRows(c, acc, 32, rows, c.YMM)
	c.VZEROUPPER()
	c.RET()
}

// actRows8 addresses the eight activation rows of a gemm…x8 kernel (parameters
// "a" and "stride") with three base registers and the stride as an index:
// rows 0..7 at yA, yA+s, yA+2s, yB=yA+3s, yA+4s, yB+2s, yC=yA+6s, yB+4s,
// and each row's side data ({8·Σq, d} per block, after its nb blocks) at the
// same offsets from sA, sB, sC.
type actRows8 struct {
	c      *build.Context
	s      reg.Register
	ys, ss [3]reg.Register
}

func eightActRows(c *build.Context, nb reg.Register) actRows8 {
	s := c.Load(c.Param("stride"), c.GP64())
	yA := c.Load(c.Param("a").Base(), c.GP64())
	yB, yC := c.GP64(), c.GP64()
	c.LEAQ(Mem{Base: yA, Index: s, Scale: 2}, yB)
	c.ADDQ(s, yB)
	c.LEAQ(Mem{Base: yB, Index: s, Scale: 2}, yC)
	c.ADDQ(s, yC)
	k := c.GP64()
	c.IMUL3Q(U32(actBlockBytes), nb, k)
	a := actRows8{c: c, s: s, ys: [3]reg.Register{yA, yB, yC}}
	for i, y := range a.ys {
		a.ss[i] = c.GP64()
		c.LEAQ(Mem{Base: y, Index: k, Scale: 1}, a.ss[i])
	}
	return a
}

// at is row r's quant bytes (or with side its side data) at disp.
func (a actRows8) at(side bool, r, disp int) Mem {
	base := a.ys
	if side {
		base = a.ss
	}
	s := a.s
	switch r {
	case 0:
		return Mem{Base: base[0], Disp: disp}
	case 1:
		return Mem{Base: base[0], Index: s, Scale: 1, Disp: disp}
	case 2:
		return Mem{Base: base[0], Index: s, Scale: 2, Disp: disp}
	case 3:
		return Mem{Base: base[1], Disp: disp}
	case 4:
		return Mem{Base: base[0], Index: s, Scale: 4, Disp: disp}
	case 5:
		return Mem{Base: base[1], Index: s, Scale: 2, Disp: disp}
	case 6:
		return Mem{Base: base[2], Disp: disp}
	}
	return Mem{Base: base[1], Index: s, Scale: 4, Disp: disp}
}

// advance moves the first rows rows to their next block.
func (a actRows8) advance(rows int) {
	bases := 3 // rows 6 and 7 use the third base
	if rows <= 5 {
		bases = 2
	}
	for i := range bases {
		a.c.ADDQ(U32(actBlockBytes), a.ys[i])
		a.c.ADDQ(U32(actSideBytes), a.ss[i])
	}
}

// gemm16 emits gemm<T>x16x<rows>VNNI: two adjacent packed groups (sixteen
// weight rows, w and w+gstride) against rows (4 or 8) activation rows
// with 512-bit vectors, lanes 0..7 the first group's rows and 8..15 the
// second's. Per block and activation row it issues the same vpdpbusd count
// as the eight-lane kernels do for eight weight rows, and the float steps
// (block-sum correction, scale product, fma) take their operands broadcast
// from memory, so the block sums and accumulators stay in registers
// (AVX-512 has 32). Each lane computes what the eight-lane kernels compute
// for its row, in the same order, so results are theirs bit for bit.
func gemm16(c *build.Context, typ string, rows int, mask Mem) {
	name := fmt.Sprintf("gemm%sx16x%dVNNI", typ, rows)
	c.Function(name)
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr("func(nb int, w []byte, gstride int, a []byte, stride int, dst []float32, ld int)")
	c.Doc(fmt.Sprintf("%s sets dst[r*ld:r*ld+16] to the eight-lane %s kernels' results for the", name, typ),
		fmt.Sprintf("groups at w and w[gstride:] side by side, for activation rows r < %d, bit for bit.", rows),
		"It needs AVX-512 F, BW, VL and VNNI.")
	lbl := func(s string) string { return name + "_" + s }
	nb := c.Load(c.Param("nb"), c.GP64())
	x := c.Load(c.Param("w").Base(), c.GP64())
	g := c.Load(c.Param("gstride"), c.GP64())
	act := eightActRows(c, nb)
	var m reg.VecVirtual
	if typ == "Q4_0" {
		m = c.ZMM()
		c.VPBROADCASTD(mask, m)
	}
	acc := make([]reg.VecVirtual, rows)
	for r := range acc {
		acc[r] = c.ZMM()
		c.VPXORD(acc[r], acc[r], acc[r])
	}
	zero := c.ZMM()
	c.VPXORD(zero, zero, zero)
	// The loop runs in two parts that differ in what they prefetch
	// (pairBlock): all but the last prefetchBlocks blocks, then those.
	c.CMPQ(nb, U32(prefetchBlocks))
	c.JLE(LabelRef(lbl("tail")))
	c.Label(lbl("block"))
	pairBlock(c, typ, rows, false, x, g, m, zero, act, acc)
	c.DECQ(nb)
	c.CMPQ(nb, U32(prefetchBlocks))
	c.JG(LabelRef(lbl("block")))
	c.Label(lbl("tail"))
	c.TESTQ(nb, nb)
	c.JZ(LabelRef(lbl("done")))
	c.Label(lbl("tailblock"))
	pairBlock(c, typ, rows, true, x, g, m, zero, act, acc)
	c.DECQ(nb)
	c.JNZ(LabelRef(lbl("tailblock")))
	c.Label(lbl("done"))
	avoutil.StoreGroupRows(c, acc)
	c.VZEROUPPER()
	c.RET()
}

// pairBlock emits one block of gemm16's loop; tail says it is one of the
// last prefetchBlocks blocks.
func pairBlock(c *build.Context, typ string, rows int, tail bool, x, g reg.Register, m, zero reg.VecVirtual, act actRows8, acc []reg.VecVirtual) {
	groupBlockBytes, vectors := groupLayout(typ)
	// With fewer rows, each row's block sum is split over parts partial
	// sums (integer adds are exact): a chain of dependent vpdpbusd would
	// otherwise bound the loop.
	parts := 8 / rows
	part := make([][]reg.VecVirtual, rows)
	n := make([]int, rows)
	for r := range part {
		part[r] = make([]reg.VecVirtual, parts)
		for i := range part[r] {
			// Zeroed as zero ^ zero, not part ^ part: avo takes the
			// latter for a read of part, which would then be live from
			// the function's entry through the other copy of the loop,
			// and the registers run out.
			part[r][i] = c.ZMM()
			c.VPXORD(zero, zero, part[r][i])
		}
	}
	dp := func(r, disp int, q reg.VecVirtual) {
		vpdpbusdBcst(c, act.at(false, r, disp), q, part[r][n[r]%parts])
		n[r]++
	}
	// load16 loads 32 bytes at disp of both groups' blocks into one vector.
	load16 := func(disp int) reg.VecVirtual {
		v := c.ZMM()
		movLow(c, Mem{Base: x, Disp: disp}, v.AsY(), v)
		c.VINSERTI64X4(Imm(1), Mem{Base: x, Index: g, Scale: 1, Disp: disp}, v, v)
		return v
	}
	// Prefetch both groups' blocks prefetchBlocks ahead: in a serving
	// step the weights stream from memory once for all activation rows,
	// and two interleaved streams left the hardware prefetchers behind.
	// The last prefetchBlocks blocks (tail) prefetch the next pair's first
	// blocks instead (the groups at w+2·gstride and w+3·gstride, where the
	// next tile of a work item lies), not past the end of the first group
	// into the second's start, read already: otherwise each tile's first
	// blocks would wait on memory. Prefetches past the matrix are hints
	// and never fault.
	for scale := range 2 {
		if tail {
			scale++
		}
		for off := 0; off < groupBlockBytes; off += 64 {
			m := Mem{Base: x, Disp: prefetchBlocks*groupBlockBytes + off}
			if scale > 0 {
				m.Index, m.Scale = g, uint8(scale)
			}
			c.PREFETCHT0(m)
		}
	}
	for t := 0; t < vectors; t++ {
		if typ == "Q4_0" {
			v := load16(16 + 32*t)
			lo, hi := c.ZMM(), c.ZMM()
			c.VPANDD(m, v, lo)
			c.VPSRLW(Imm(4), v, hi)
			c.VPANDD(m, hi, hi)
			for r := 0; r < rows; r++ {
				dp(r, 2+4*t, lo)
				dp(r, 18+4*t, hi)
			}
		} else {
			q := load16(16 + 32*t)
			for r := 0; r < rows; r++ {
				dp(r, 2+4*t, q)
			}
		}
	}
	h, dw := c.YMM(), c.ZMM()
	movLow(c, Mem{Base: x}, h.AsX(), h)
	c.VINSERTI32X4(Imm(1), Mem{Base: x, Index: g, Scale: 1}, h, h)
	c.VCVTPH2PS(h, dw)
	for r := 0; r < rows; r++ {
		sum := part[r][0]
		for _, p := range part[r][1:] {
			c.VPADDD(p, sum, sum)
		}
		if typ == "Q8_0" {
			corr := c.ZMM()
			c.VPBROADCASTD(act.at(true, r, 0), corr) // 8Σq
			c.VPSLLD(Imm(4), corr, corr)             // 128Σq
			c.VPSUBD(corr, sum, sum)
		} else {
			c.VPSUBD_BCST(act.at(true, r, 0), sum, sum) // 8Σq
		}
		c.VCVTDQ2PS(sum, sum)
		d := c.ZMM()
		c.VMULPS_BCST(act.at(true, r, 4), dw, d)
		c.VFMADD231PS(sum, d, acc[r])
	}
	c.ADDQ(U32(groupBlockBytes), x)
	act.advance(rows)
}

// movLow emits VMOVDQU32 m, low, where low is the low part of full, and
// tells avo that it writes all of full (a VEX or EVEX load zeroes the bits
// above low). Otherwise avo takes full's high bits for never written, and
// full for live from the function's entry: with two copies of a loop the
// registers run out.
func movLow(c *build.Context, m Mem, low reg.Register, full reg.VecVirtual) {
	c.Instruction(&ir.Instruction{
		Opcode:   "VMOVDQU32",
		Operands: []Op{m, low},
		Inputs:   []Op{m},
		Outputs:  []Op{full},
		ISA:      []string{"AVX512F", "AVX512VL"},
	})
}

// zeroStackRows zeroes rows accumulators of width bytes in the stack frame
// (acc) from z, a zeroed vector register of that width.
func zeroStackRows(c *build.Context, acc Mem, width, rows int, z reg.VecVirtual) {
	for r := 0; r < rows; r++ {
		c.VMOVUPS(z, acc.Offset(width*r))
	}
}

// storeStackRows copies rows accumulators of width bytes from the stack
// frame (acc) to dst[r*ld:] (parameters "dst" and "ld"), through a vector
// register vec gives.
func storeStackRows(c *build.Context, acc Mem, width, rows int, vec func() reg.VecVirtual) {
	dst := c.Load(c.Param("dst").Base(), c.GP64())
	ld := c.Load(c.Param("ld"), c.GP64())
	c.SHLQ(Imm(2), ld)
	for r := 0; r < rows; r++ {
		if r > 0 {
			c.ADDQ(ld, dst)
		}
		v := vec()
		c.VMOVUPS(acc.Offset(width*r), v)
		c.VMOVUPS(v, Mem{Base: dst})
	}
}

// gemvQ4_0Lean emits gemvQ4_0x8VNNI, the decode kernel of packed Q4_0
// groups: gemv's one-row form with every instruction it could spare. A
// decode step streams the weights from memory, and a kernel that issues
// fewer instructions per byte streams faster even far from its compute
// limit: the core's window of instructions in flight then reaches further
// ahead of the loads that wait on memory. (Q4_K's one-row kernel, given 100
// or 200 needless additions a super-block, streamed 3% and 7% slower in
// BenchmarkPackedStreamPaired, an Intel Xeon VM, while its own time in cache
// stayed far below the memory's.) Against gemv:
//
//   - high nibbles are taken in place (q & 0xf0, sixteen times the code)
//     into their own sum, shifted back once a block (exact: every term is a
//     multiple of 16), instead of a shift and a mask per vector; the low and
//     high sums are the two partial sums;
//   - the nibble masks live in registers;
//   - the 8Σq correction and the activation scale are broadcast memory
//     operands (EVEX) of the subtraction and the multiply;
//   - four blocks a loop iteration, with one prefetch per 64-byte line of
//     them (nine, where gemv asks for three lines of every 144-byte block).
//
// The integer sums and float steps are gemv's, so are the results, bit for
// bit.
func gemvQ4_0Lean(c *build.Context, mask Mem) {
	const typ = "Q4_0"
	groupBlockBytes, vectors := groupLayout(typ)
	head := groupHead(typ)
	name := "gemvQ4_0x8VNNI"
	c.Function(name)
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr("func(nb int, w, a []byte, dst []float32)")
	c.Doc(name+" is gemvQ4_0x8AVX2 with vpdpbusd, for VNNI-packed groups, in as few",
		"instructions per byte as it can (gemvQ4_0Lean). It needs AVX-512 VNNI and VL, FMA, F16C.")
	lbl := func(s string) string { return name + "_" + s }
	nb := c.Load(c.Param("nb"), c.GP64())
	x := c.Load(c.Param("w").Base(), c.GP64())
	y, side := avoutil.ActRowPointers(c, nb, 1, actBlockBytes)
	acc := avoutil.ZeroYMMs(c, 1)[0]
	lo, hi := c.YMM(), c.YMM()
	c.VMOVDQU(mask, lo)
	c.VMOVDQU32(kq512.hin, hi)
	block := func(b int) {
		xo, yo, so := b*groupBlockBytes, b*actBlockBytes, b*actSideBytes
		sl, sh := c.YMM(), c.YMM()
		c.VPXOR(sl, sl, sl)
		c.VPXOR(sh, sh, sh)
		for t := 0; t < vectors; t++ {
			v, l, h := c.YMM(), c.YMM(), c.YMM()
			c.VMOVDQU(Mem{Base: x, Disp: xo + head + 32*t}, v)
			c.VPAND(lo, v, l)
			c.VPAND(hi, v, h)
			vpdpbusdBcst(c, Mem{Base: y[0], Disp: yo + 2 + 4*t}, l, sl)
			vpdpbusdBcst(c, Mem{Base: y[0], Disp: yo + 18 + 4*t}, h, sh)
		}
		c.VPSRAD(Imm(4), sh, sh) // 16·Σ, exact
		c.VPADDD(sh, sl, sl)
		c.VPSUBD_BCST(Mem{Base: side[0], Disp: so}, sl, sl) // − 8Σq
		dw := c.YMM()
		c.VCVTPH2PS(Mem{Base: x, Disp: xo}, dw)
		c.VCVTDQ2PS(sl, sl)
		c.VMULPS_BCST(Mem{Base: side[0], Disp: so + 4}, dw, dw) // d_w·d_a
		c.VFMADD231PS(sl, dw, acc)
	}
	advance := func(blocks int) {
		c.ADDQ(U32(blocks*groupBlockBytes), x)
		c.ADDQ(U32(blocks*actBlockBytes), y[0])
		c.ADDQ(U32(blocks*actSideBytes), side[0])
	}
	const unroll = 4
	span := unroll * groupBlockBytes
	ahead := (avoutil.GroupPrefetchBytes + span - 1) / span * span
	c.CMPQ(nb, U8(unroll))
	c.JB(LabelRef(lbl("tail")))
	c.Label(lbl("blocks"))
	for b := range unroll {
		avoutil.PrefetchShare(c, x, ahead, span, b, unroll)
		block(b)
	}
	advance(unroll)
	c.SUBQ(U8(unroll), nb)
	c.CMPQ(nb, U8(unroll))
	c.JAE(LabelRef(lbl("blocks")))
	c.Label(lbl("tail"))
	c.TESTQ(nb, nb)
	c.JZ(LabelRef(lbl("done")))
	c.Label(lbl("block"))
	avoutil.GroupPrefetch(c, x, groupBlockBytes)
	block(0)
	advance(1)
	c.DECQ(nb)
	c.JNZ(LabelRef(lbl("block")))
	c.Label(lbl("done"))
	avoutil.StoreGroupRows(c, []reg.VecVirtual{acc})
	c.VZEROUPPER()
	c.RET()
}
