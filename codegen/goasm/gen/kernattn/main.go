// Command kernattn generates runtime/cpu/kern/attn_amd64.s and
// attn_amd64_stubs.go: the AVX2+FMA+F16C attention tile kernels over f16
// and q8_0 KV caches (the f32 ones are kernvec's scoresF32 and
// axpyRowsF32). A tile's scores are one call (q against each cache row),
// its weighted values another (the accumulator held in registers while the
// rows stream past), so a row of K or V is read once per query head and
// tile.
//
// Every kernel's order, which kern's Go loops emulate (attn.go):
//
//   - scores: lane l of an eight-lane accumulator sums, with FMA, q[i]·k[i]
//     for i ≡ l mod 8 in order (q8_0: per block a fresh accumulator, then
//     acc = fma(d, block, acc)); the lanes are then summed as ggml's
//     hsum_float_8 (avoutil.HSumFloat8).
//   - weighted values: acc[i] = fma(v[i], w, acc[i]) row by row (q8_0:
//     v[i] = q, and w·d rounded first).
//
// Usage (from runtime/cpu/kern, see its go:generate line in attn.go):
//
//	go run ../../../codegen/goasm/gen/kernattn -dir .
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/minerva-llm/minerva/codegen/goasm/gen/internal/avoutil"
)

func main() {
	dir := flag.String("dir", ".", "directory that receives attn_amd64.s and attn_amd64_stubs.go")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "kernattn:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	c := build.NewContext()
	c.ConstraintExpr("amd64")
	scoresF16(c)
	axpyRowsF16(c)
	scoresQ8(c)
	axpyRowsQ8(c)
	return avoutil.Write(c, "codegen/goasm/gen/kernattn", dir, "attn_amd64.s", "attn_amd64_stubs.go")
}

// scoresF16 emits func scoresF16AVX2(q []float32, k []uint16, stride int,
// out []float32): out[j] = q · k[j*stride : j*stride+len(q)], the halves
// widened with F16C, len(q) a multiple of 8.
func scoresF16(c *build.Context) {
	c.Function("scoresF16AVX2")
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr("func(q []float32, k []uint16, stride int, out []float32)")
	c.Doc("scoresF16AVX2 sets out[j] to the dot of q (len a multiple of 8) with row j of the f16",
		"cache k (rows stride halves apart). It needs AVX2, FMA and F16C.")
	d := c.Load(c.Param("q").Len(), c.GP64())
	qp := c.Load(c.Param("q").Base(), c.GP64())
	kp := c.Load(c.Param("k").Base(), c.GP64())
	st := c.Load(c.Param("stride"), c.GP64())
	c.SHLQ(Imm(1), st)
	n := c.Load(c.Param("out").Len(), c.GP64())
	op := c.Load(c.Param("out").Base(), c.GP64())
	c.SHRQ(Imm(3), d)
	c.TESTQ(n, n)
	c.JZ(LabelRef("sf16_done"))
	c.Label("sf16_row")
	acc := c.YMM()
	c.VXORPS(acc, acc, acc)
	i, qi, ki := c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(d, i)
	c.MOVQ(qp, qi)
	c.MOVQ(kp, ki)
	c.Label("sf16_col")
	v := c.YMM()
	c.VCVTPH2PS(Mem{Base: ki}, v)
	c.VFMADD231PS(Mem{Base: qi}, v, acc)
	c.ADDQ(U32(32), qi)
	c.ADDQ(U32(16), ki)
	c.DECQ(i)
	c.JNZ(LabelRef("sf16_col"))
	r := avoutil.HSumFloat8(c, acc)
	c.VMOVSS(r, Mem{Base: op})
	c.ADDQ(U32(4), op)
	c.ADDQ(st, kp)
	c.DECQ(n)
	c.JNZ(LabelRef("sf16_row"))
	c.Label("sf16_done")
	c.VZEROUPPER()
	c.RET()
}

// axpyRowsF16 emits func axpyRowsF16AVX2(acc, w []float32, v []uint16,
// stride int): acc += Σ_j w[j]·v[j*stride : j*stride+len(acc)], len(acc) a
// multiple of 8, acc held in registers 64 floats at a time.
func axpyRowsF16(c *build.Context) {
	c.Function("axpyRowsF16AVX2")
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr("func(acc, w []float32, v []uint16, stride int)")
	c.Doc("axpyRowsF16AVX2 adds w[j]·(row j of the f16 cache v, rows stride halves apart) to acc",
		"(len a multiple of 8) for every j, in row order with FMA. It needs AVX2, FMA and F16C.")
	d := c.Load(c.Param("acc").Len(), c.GP64())
	ap := c.Load(c.Param("acc").Base(), c.GP64())
	wp0 := c.Load(c.Param("w").Base(), c.GP64())
	n0 := c.Load(c.Param("w").Len(), c.GP64())
	vp0 := c.Load(c.Param("v").Base(), c.GP64())
	st := c.Load(c.Param("stride"), c.GP64())
	c.SHLQ(Imm(1), st)
	c.SHRQ(Imm(3), d)
	c.TESTQ(n0, n0)
	c.JZ(LabelRef("af16_done"))
	c.Label("af16_chunk")
	c.TESTQ(d, d)
	c.JZ(LabelRef("af16_done"))
	c.CMPQ(d, Imm(8))
	c.JL(LabelRef("af16_small"))
	axpyF16Pass(c, "af16_row8", 8, ap, wp0, n0, vp0, st)
	c.ADDQ(U32(8*32), ap)
	c.ADDQ(U32(8*16), vp0)
	c.SUBQ(Imm(8), d)
	c.JMP(LabelRef("af16_chunk"))
	c.Label("af16_small")
	axpyF16Pass(c, "af16_row1", 1, ap, wp0, n0, vp0, st)
	c.ADDQ(U32(32), ap)
	c.ADDQ(U32(16), vp0)
	c.DECQ(d)
	c.JMP(LabelRef("af16_chunk"))
	c.Label("af16_done")
	c.VZEROUPPER()
	c.RET()
}

// axpyF16Pass runs every row over nv vectors of acc at ap.
func axpyF16Pass(c *build.Context, label string, nv int, ap, wp0, n0, vp0, st reg.Register) {
	r := make([]reg.VecVirtual, nv)
	for i := range r {
		r[i] = c.YMM()
		c.VMOVUPS(Mem{Base: ap, Disp: 32 * i}, r[i])
	}
	n, wp, vp := c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(n0, n)
	c.MOVQ(wp0, wp)
	c.MOVQ(vp0, vp)
	c.Label(label)
	wv := c.YMM()
	c.VBROADCASTSS(Mem{Base: wp}, wv)
	for i := range r {
		t := c.YMM()
		c.VCVTPH2PS(Mem{Base: vp, Disp: 16 * i}, t)
		c.VFMADD231PS(t, wv, r[i])
	}
	c.ADDQ(U32(4), wp)
	c.ADDQ(st, vp)
	c.DECQ(n)
	c.JNZ(LabelRef(label))
	for i := range r {
		c.VMOVUPS(r[i], Mem{Base: ap, Disp: 32 * i})
	}
}

// q8Scale broadcasts the f16 scale d at the start of the q8_0 block at m
// (the first of its 34 bytes) to every lane.
func q8Scale(c *build.Context, m Mem) reg.VecVirtual {
	h := c.XMM()
	c.VCVTPH2PS(m, h) // d and three values of the block: lane 0 is d
	d := c.YMM()
	c.VBROADCASTSS(h, d)
	return d
}

// q8Values widens eight int8 values at m to float32 lanes.
func q8Values(c *build.Context, m Mem) reg.VecVirtual {
	t := c.YMM()
	c.VPMOVSXBD(m, t)
	c.VCVTDQ2PS(t, t)
	return t
}

// scoresQ8 emits func scoresQ8AVX2(q []float32, k []byte, stride int, out
// []float32): out[j] = q · row j of the q8_0 cache k (rows stride bytes
// apart, len(q) a multiple of 32): per block the four vectors of q times
// the widened values into a fresh accumulator, then acc = fma(d, block,
// acc).
func scoresQ8(c *build.Context) {
	c.Function("scoresQ8AVX2")
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr("func(q []float32, k []byte, stride int, out []float32)")
	c.Doc("scoresQ8AVX2 sets out[j] to the dot of q (len a multiple of 32) with row j of the q8_0",
		"cache k (rows stride bytes apart). It needs AVX2, FMA and F16C.")
	nb := c.Load(c.Param("q").Len(), c.GP64())
	qp := c.Load(c.Param("q").Base(), c.GP64())
	kp := c.Load(c.Param("k").Base(), c.GP64())
	st := c.Load(c.Param("stride"), c.GP64())
	n := c.Load(c.Param("out").Len(), c.GP64())
	op := c.Load(c.Param("out").Base(), c.GP64())
	c.SHRQ(Imm(5), nb)
	c.TESTQ(n, n)
	c.JZ(LabelRef("sq8_done"))
	c.Label("sq8_row")
	acc := c.YMM()
	c.VXORPS(acc, acc, acc)
	b, qi, ki := c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(nb, b)
	c.MOVQ(qp, qi)
	c.MOVQ(kp, ki)
	c.Label("sq8_block")
	blk := c.YMM()
	c.VXORPS(blk, blk, blk)
	for i := 0; i < 4; i++ {
		t := q8Values(c, Mem{Base: ki, Disp: 2 + 8*i})
		c.VFMADD231PS(Mem{Base: qi, Disp: 32 * i}, t, blk)
	}
	d := q8Scale(c, Mem{Base: ki})
	c.VFMADD231PS(blk, d, acc)
	c.ADDQ(U32(128), qi)
	c.ADDQ(U32(34), ki)
	c.DECQ(b)
	c.JNZ(LabelRef("sq8_block"))
	r := avoutil.HSumFloat8(c, acc)
	c.VMOVSS(r, Mem{Base: op})
	c.ADDQ(U32(4), op)
	c.ADDQ(st, kp)
	c.DECQ(n)
	c.JNZ(LabelRef("sq8_row"))
	c.Label("sq8_done")
	c.VZEROUPPER()
	c.RET()
}

// axpyRowsQ8 emits func axpyRowsQ8AVX2(acc, w []float32, v []byte, stride
// int): acc += Σ_j w[j]·row j of the q8_0 cache v (rows stride bytes apart,
// len(acc) a multiple of 32), two blocks (64 floats) of acc in registers
// at a time: per row and block wd = w[j]·d, then acc = fma(q, wd, acc).
func axpyRowsQ8(c *build.Context) {
	c.Function("axpyRowsQ8AVX2")
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr("func(acc, w []float32, v []byte, stride int)")
	c.Doc("axpyRowsQ8AVX2 adds w[j]·(row j of the q8_0 cache v, rows stride bytes apart) to acc",
		"(len a multiple of 32) for every j, in row order with FMA. It needs AVX2, FMA and F16C.")
	nb := c.Load(c.Param("acc").Len(), c.GP64())
	ap := c.Load(c.Param("acc").Base(), c.GP64())
	wp0 := c.Load(c.Param("w").Base(), c.GP64())
	n0 := c.Load(c.Param("w").Len(), c.GP64())
	vp0 := c.Load(c.Param("v").Base(), c.GP64())
	st := c.Load(c.Param("stride"), c.GP64())
	c.SHRQ(Imm(5), nb)
	c.TESTQ(n0, n0)
	c.JZ(LabelRef("aq8_done"))
	c.Label("aq8_chunk")
	c.TESTQ(nb, nb)
	c.JZ(LabelRef("aq8_done"))
	c.CMPQ(nb, Imm(2))
	c.JL(LabelRef("aq8_small"))
	axpyQ8Pass(c, "aq8_row2", 2, ap, wp0, n0, vp0, st)
	c.ADDQ(U32(2*128), ap)
	c.ADDQ(U32(2*34), vp0)
	c.SUBQ(Imm(2), nb)
	c.JMP(LabelRef("aq8_chunk"))
	c.Label("aq8_small")
	axpyQ8Pass(c, "aq8_row1", 1, ap, wp0, n0, vp0, st)
	c.ADDQ(U32(128), ap)
	c.ADDQ(U32(34), vp0)
	c.DECQ(nb)
	c.JMP(LabelRef("aq8_chunk"))
	c.Label("aq8_done")
	c.VZEROUPPER()
	c.RET()
}

// axpyQ8Pass runs every row over nblk blocks (4·nblk vectors) of acc at ap.
func axpyQ8Pass(c *build.Context, label string, nblk int, ap, wp0, n0, vp0, st reg.Register) {
	r := make([]reg.VecVirtual, 4*nblk)
	for i := range r {
		r[i] = c.YMM()
		c.VMOVUPS(Mem{Base: ap, Disp: 32 * i}, r[i])
	}
	n, wp, vp := c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(n0, n)
	c.MOVQ(wp0, wp)
	c.MOVQ(vp0, vp)
	c.Label(label)
	wv := c.YMM()
	c.VBROADCASTSS(Mem{Base: wp}, wv)
	for b := 0; b < nblk; b++ {
		wd := q8Scale(c, Mem{Base: vp, Disp: 34 * b})
		c.VMULPS(wv, wd, wd)
		for i := 0; i < 4; i++ {
			t := q8Values(c, Mem{Base: vp, Disp: 34*b + 2 + 8*i})
			c.VFMADD231PS(t, wd, r[4*b+i])
		}
	}
	c.ADDQ(U32(4), wp)
	c.ADDQ(st, vp)
	c.DECQ(n)
	c.JNZ(LabelRef(label))
	for i := range r {
		c.VMOVUPS(r[i], Mem{Base: ap, Disp: 32 * i})
	}
}
