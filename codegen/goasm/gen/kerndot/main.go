// Command kerndot generates runtime/cpu/kern/dot_amd64.s and
// dot_amd64_stubs.go: AVX2+FMA+F16C dot products of Q8_0 and Q4_0 weight rows
// with Q8_0 activation rows, computed as ggml's AVX2 ggml_vec_dot_q8_0_q8_0 /
// ggml_vec_dot_q4_0_q8_0 do (same instructions, same float order).
//
// Usage (from runtime/cpu/kern, see its go:generate line):
//
//	go run ../../../codegen/goasm/gen/kerndot -dir .
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/pass"
	"github.com/mmcloughlin/avo/printer"
	"github.com/mmcloughlin/avo/reg"
)

func main() {
	dir := flag.String("dir", ".", "directory that receives dot_amd64.s and dot_amd64_stubs.go")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "kerndot:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	c := build.NewContext()
	// dot_amd64_stubs.go is not constrained by its name.
	c.ConstraintExpr("amd64")
	dotQ8_0(c)
	dotQ4_0(c)

	// A fixed header, whatever the output directory.
	pc := printer.Config{Name: "codegen/goasm/gen/kerndot", Pkg: "kern"}
	asm, err := os.Create(filepath.Join(dir, "dot_amd64.s"))
	if err != nil {
		return err
	}
	stubs, err := os.Create(filepath.Join(dir, "dot_amd64_stubs.go"))
	if err != nil {
		asm.Close()
		return err
	}
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

// broadcast32 fills a YMM register with the 32-bit constant v.
func broadcast32(c *build.Context, v uint32) reg.VecVirtual {
	t := c.GP32()
	c.MOVL(U32(v), t)
	x := c.XMM()
	c.VMOVD(t, x)
	y := c.YMM()
	c.VPBROADCASTD(x, y)
	return y
}

// blockScale returns a YMM register holding f16(x[0:2])*f16(y[0:2]) in every
// lane: ggml's _mm256_set1_ps(FP16_TO_FP32(x.d) * FP16_TO_FP32(y.d)).
func blockScale(c *build.Context, x, y reg.Register) reg.VecVirtual {
	// vcvtph2ps reads four halves (8 bytes); both block types are longer.
	dx, dy := c.XMM(), c.XMM()
	c.VCVTPH2PS(Mem{Base: x}, dx)
	c.VCVTPH2PS(Mem{Base: y}, dy)
	c.VMULSS(dy, dx, dx)
	d := c.YMM()
	c.VBROADCASTSS(dx, d)
	return d
}

// mulSumI8PairsFloat is ggml's mul_sum_i8_pairs_float: the products of the 32
// signed byte pairs of qx and qy, summed in fours into eight int32 lanes
// (exact) and converted to float. vpmaddubsw multiplies unsigned by signed
// bytes, so it gets |qx| and qy with qx's sign; qy must not hold -128.
func mulSumI8PairsFloat(c *build.Context, qx, qy, ones reg.VecVirtual) reg.VecVirtual {
	ax, sy := c.YMM(), c.YMM()
	c.VPSIGNB(qx, qx, ax) // ax = _mm256_sign_epi8(qx, qx)
	c.VPSIGNB(qx, qy, sy) // sy = _mm256_sign_epi8(qy, qx)
	dot := c.YMM()
	c.VPMADDUBSW(sy, ax, dot)  // 16 int16: ax[2i]*sy[2i] + ax[2i+1]*sy[2i+1]
	c.VPMADDWD(ones, dot, dot) // 8 int32
	f := c.YMM()
	c.VCVTDQ2PS(dot, f)
	return f
}

// hsumFloat8 is ggml's hsum_float_8, leaving the sum in the low lane of an XMM
// register.
func hsumFloat8(c *build.Context, acc reg.VecVirtual) reg.VecVirtual {
	r := c.XMM()
	c.VEXTRACTF128(Imm(1), acc, r)
	c.VADDPS(acc.AsX(), r, r) // hi + lo
	h := c.XMM()
	c.VMOVHLPS(r, r, h)
	c.VADDPS(h, r, r) // r0+r2, r1+r3
	c.VMOVSHDUP(r, h)
	c.VADDSS(h, r, r) // (r0+r2) + (r1+r3)
	return r
}

// dotLoop emits the loop over nb blocks; body adds one block's contribution
// into acc and the pointers advance by xStride and yStride.
func dotLoop(c *build.Context, name string, xStride, yStride int, body func(x, y reg.Register, acc reg.VecVirtual)) {
	nb := c.Load(c.Param("nb"), c.GP64())
	x := c.Load(c.Param("w").Base(), c.GP64())
	y := c.Load(c.Param("a").Base(), c.GP64())
	acc := c.YMM()
	c.VXORPS(acc, acc, acc)
	c.TESTQ(nb, nb)
	c.JZ(LabelRef(name + "_done"))
	c.Label(name + "_loop")
	body(x, y, acc)
	c.ADDQ(U32(xStride), x)
	c.ADDQ(U32(yStride), y)
	c.DECQ(nb)
	c.JNZ(LabelRef(name + "_loop"))
	c.Label(name + "_done")
	r := hsumFloat8(c, acc)
	c.VZEROUPPER()
	c.Store(r, c.ReturnIndex(0))
	c.RET()
}

func dotQ8_0(c *build.Context) {
	c.Function("dotQ8_0AVX2")
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr("func(nb int, w, a []byte) float32")
	c.Doc(
		"dotQ8_0AVX2 is ggml_vec_dot_q8_0_q8_0 (AVX2) over nb blocks of w (Q8_0)",
		"and a (Q8_0). It needs AVX2, FMA and F16C; a must not hold -128.",
	)
	ones := broadcast32(c, 0x00010001)
	dotLoop(c, "q8_0", 34, 34, func(x, y reg.Register, acc reg.VecVirtual) {
		d := blockScale(c, x, y)
		qx, qy := c.YMM(), c.YMM()
		c.VMOVDQU(Mem{Base: x, Disp: 2}, qx)
		c.VMOVDQU(Mem{Base: y, Disp: 2}, qy)
		q := mulSumI8PairsFloat(c, qx, qy, ones)
		c.VFMADD231PS(q, d, acc) // acc = d*q + acc
	})
}

func dotQ4_0(c *build.Context) {
	c.Function("dotQ4_0AVX2")
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr("func(nb int, w, a []byte) float32")
	c.Doc(
		"dotQ4_0AVX2 is ggml_vec_dot_q4_0_q8_0 (AVX2) over nb blocks of w (Q4_0)",
		"and a (Q8_0). It needs AVX2, FMA and F16C; a must not hold -128.",
	)
	ones := broadcast32(c, 0x00010001)
	lowMask := broadcast32(c, 0x0f0f0f0f)
	off := broadcast32(c, 0x08080808)
	dotLoop(c, "q4_0", 18, 34, func(x, y reg.Register, acc reg.VecVirtual) {
		d := blockScale(c, x, y)
		// bytes_from_nibbles_32: low nibbles are elements 0..15, high 16..31.
		lo, hi := c.XMM(), c.XMM()
		c.VMOVDQU(Mem{Base: x, Disp: 2}, lo)
		c.VPSRLW(Imm(4), lo, hi)
		qx := c.YMM()
		c.VINSERTI128(Imm(1), hi, lo.AsY(), qx)
		c.VPAND(lowMask, qx, qx)
		c.VPSUBB(off, qx, qx) // qx - 8
		qy := c.YMM()
		c.VMOVDQU(Mem{Base: y, Disp: 2}, qy)
		q := mulSumI8PairsFloat(c, qx, qy, ones)
		c.VFMADD231PS(q, d, acc)
	})
}
