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
	"os"
	"path/filepath"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/pass"
	"github.com/mmcloughlin/avo/printer"
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
	for _, typ := range []string{"Q4_0", "Q8_0"} {
		gemv(c, typ, 1, mask)
		gemv(c, typ, 4, mask)
	}
	pc := printer.Config{Name: "codegen/goasm/gen/kernvnni", Pkg: "kern"}
	asm, err := os.Create(filepath.Join(dir, "vnni_amd64.s"))
	if err != nil {
		return err
	}
	defer asm.Close()
	stubs, err := os.Create(filepath.Join(dir, "vnni_amd64_stubs.go"))
	if err != nil {
		return err
	}
	defer stubs.Close()
	cfg := &build.Config{
		ErrOut:    os.Stderr,
		MaxErrors: 10,
		Passes: []pass.Interface{
			pass.Compile,
			&pass.Output{Writer: asm, Printer: printer.NewGoAsm(pc)},
			&pass.Output{Writer: stubs, Printer: printer.NewStubs(pc)},
		},
	}
	if build.Main(cfg, c) != 0 {
		return fmt.Errorf("generation failed")
	}
	return nil
}

// vpdpbusdBcst emits VPDPBUSD.BCST m, q, acc: acc[i] += Σ_j q[4i+j]·m[j]
// (q unsigned, the four bytes at m signed and broadcast to every lane).
func vpdpbusdBcst(c *build.Context, m Mem, q, acc reg.VecVirtual) {
	c.Instruction(&ir.Instruction{
		Opcode:   "VPDPBUSD",
		Suffixes: []string{"BCST"},
		Operands: []Op{m, q, acc},
		Inputs:   []Op{m, q, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512VNNI", "AVX512VL"},
	})
}

const (
	actBlockBytes = 34
	actSideBytes  = 8
)

func gemv(c *build.Context, typ string, rows int, mask Mem) {
	groupBlockBytes, vectors := 144, 4
	if typ == "Q8_0" {
		groupBlockBytes, vectors = 272, 8
	}
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
	c.Doc(fmt.Sprintf("%s is gemv/gemm%sx8AVX2 (%d activation rows) with vpdpbusd, for", name, typ, rows),
		"VNNI-packed groups (Q8_0 weights sign-flipped). It needs AVX-512 VNNI and VL, FMA, F16C.")
	lbl := func(s string) string { return name + "_" + s }

	nb := c.Load(c.Param("nb"), c.GP64())
	x := c.Load(c.Param("w").Base(), c.GP64())
	y := make([]reg.Register, rows)
	side := make([]reg.Register, rows)
	y[0] = c.Load(c.Param("a").Base(), c.GP64())
	var stride reg.Register
	if rows > 1 {
		stride = c.Load(c.Param("stride"), c.GP64())
	}
	for r := range rows {
		if r > 0 {
			y[r] = c.GP64()
			c.LEAQ(Mem{Base: y[r-1], Index: stride, Scale: 1}, y[r])
		}
		side[r] = c.GP64()
		c.IMUL3Q(U32(actBlockBytes), nb, side[r])
		c.ADDQ(y[r], side[r])
	}
	acc := make([]reg.VecVirtual, rows)
	for r := range acc {
		acc[r] = c.YMM()
		c.VXORPS(acc[r], acc[r], acc[r])
	}
	c.TESTQ(nb, nb)
	c.JZ(LabelRef(lbl("done")))
	c.Label(lbl("block"))
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
	for t := 0; t < vectors; t++ {
		if typ == "Q4_0" {
			v, lo, hi := c.YMM(), c.YMM(), c.YMM()
			c.VMOVDQU(Mem{Base: x, Disp: 16 + 32*t}, v)
			c.VPAND(mask, v, lo)
			c.VPSRLW(Imm(4), v, hi)
			c.VPAND(mask, hi, hi)
			for r := range rows {
				dp(r, Mem{Base: y[r], Disp: 2 + 4*t}, lo)
				dp(r, Mem{Base: y[r], Disp: 18 + 4*t}, hi)
			}
		} else {
			q := c.YMM()
			c.VMOVDQU(Mem{Base: x, Disp: 16 + 32*t}, q)
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
		if typ == "Q8_0" {
			c.VPSLLD(Imm(4), corr, corr) // 128Σq
		}
		c.VPSUBD(corr, sum[r], sum[r])
	}
	dw := c.YMM()
	c.VCVTPH2PS(Mem{Base: x}, dw)
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
	dst := c.Load(c.Param("dst").Base(), c.GP64())
	if rows == 1 {
		c.VMOVUPS(acc[0], Mem{Base: dst})
	} else {
		ld := c.Load(c.Param("ld"), c.GP64())
		c.SHLQ(Imm(2), ld)
		for r := range rows {
			if r > 0 {
				c.ADDQ(ld, dst)
			}
			c.VMOVUPS(acc[r], Mem{Base: dst})
		}
	}
	c.VZEROUPPER()
	c.RET()
}
