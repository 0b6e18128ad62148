// Command kerndot generates runtime/cpu/kern/dot_amd64.s and
// dot_amd64_stubs.go: AVX2+FMA+F16C dot products of Q8_0, Q4_0, Q5_0 and MXFP4
// weight rows with Q8_0 activation rows and of Q4_1 and Q5_1 weight rows with
// Q8_1 activation rows, computed with ggml's AVX2 ggml_vec_dot_*_q8_0 /
// ggml_vec_dot_*_q8_1 block arithmetic (see dotRows for the float order),
// plus the k-quant kernels (kquants.go) and the Q4_0/Q8_0 group kernels
// (gemv.go).
//
// Usage (from runtime/cpu/kern, see its go:generate line):
//
//	go run ../../../codegen/goasm/gen/kerndot -dir .
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/minerva-llm/minerva/codegen/goasm/gen/internal/avoutil"
	"github.com/minerva-llm/minerva/quant"
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
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
	consts = map[string]Mem{
		"ones":       vecConst(c, "ones16", 0x0001000100010001),
		"nibbleMask": vecConst(c, "nibbleMask", 0x0f0f0f0f0f0f0f0f),
		"eights":     vecConst(c, "eights", 0x0808080808080808),
	}
	consts["mxfp4Values"] = mxfp4Values(c)
	consts["e8m0Half"] = e8m0HalfTable(c)
	legacyConsts(c)
	for _, k := range []blockKernel{q8_0Block, q4_0Block, mxfp4Block, q5_0Block, q4_1Block, q5_1Block} {
		c.Function("dot" + k.name + "AVX2")
		c.Attributes(attr.NOSPLIT)
		c.Pragma("noescape")
		c.SignatureExpr("func(nb int, w, a []byte) float32")
		c.Doc(
			"dot"+k.name+"AVX2 is the dot product of nb blocks of w ("+k.name+") and a ("+k.actName()+"),",
			"with ggml's AVX2 block arithmetic summed in two accumulators (see kern's",
			"dispatch.go"+k.orderNote()+"). It needs AVX2, FMA and F16C"+k.signNote()+".",
		)
		dotRows(c, k, 1)

		c.Function("dot" + k.name + "x4AVX2")
		c.Attributes(attr.NOSPLIT)
		c.Pragma("noescape")
		c.SignatureExpr("func(nb int, w, a []byte, stride int, dst *[4]float32)")
		c.Doc(
			"dot"+k.name+"x4AVX2 sets dst[r] to dot"+k.name+"AVX2(nb, w, a[r*stride:]) for r < 4,",
			"bit for bit, unpacking each weight block once for the four rows.",
		)
		dotRows(c, k, 4)
	}
	e8m0 = avoutil.DefineE8M0Consts(c, "dot")
	for _, typ := range []string{"Q4_0", "Q8_0", "MXFP4"} {
		gemv(c, typ, 1)
		gemv(c, typ, 4)
	}
	kquants(c)
	mlx(c)

	return avoutil.Write(c, "codegen/goasm/gen/kerndot", dir, "dot_amd64.s", "dot_amd64_stubs.go")
}

// e8m0 holds the MXFP4 group kernels' E8M0 constants (avoutil.E8M0Half).
var e8m0 avoutil.E8M0Consts

// consts holds the 32-byte read-only vectors the kernels take as memory
// operands (which keeps the 16 YMM registers for accumulators).
var consts map[string]Mem

// vecConst defines a 32-byte read-only vector of four copies of v.
func vecConst(c *build.Context, name string, v uint64) Mem {
	m := c.StaticGlobal(name)
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for i := 0; i < 4; i++ {
		c.AddDatum(8*i, U64(v))
	}
	return m
}

// blockScale returns a YMM register holding f16(x[0:2])*f16(y[0:2]) in every
// lane: ggml's _mm256_set1_ps(FP16_TO_FP32(x.d) * FP16_TO_FP32(y.d)).
func blockScale(c *build.Context, x, y Mem) reg.VecVirtual {
	// vcvtph2ps reads four halves (8 bytes); both block types are longer.
	dx, dy := c.XMM(), c.XMM()
	c.VCVTPH2PS(x, dx)
	c.VCVTPH2PS(y, dy)
	c.VMULSS(dy, dx, dx)
	d := c.YMM()
	c.VBROADCASTSS(dx, d)
	return d
}

// A blockKernel describes one weight format's block: its byte size, how to
// load its 32 weights as signed bytes into a YMM register and its scale as
// float32 into the low lane of an XMM register (nil: an f16 at the block's
// start). The activation blocks are Q8_0 (34 bytes: f16 scale, 32 int8)
// unless q8_1 is set (Q8_1, 36 bytes: f16 d, f16 s, 32 int8).
type blockKernel struct {
	name   string // Q8_0, Q4_0, MXFP4, Q5_0, Q4_1, Q5_1
	wBytes int
	load   func(c *build.Context, x Mem) reg.VecVirtual
	scale  func(c *build.Context, x Mem) reg.VecVirtual
	// unsigned: load gives unsigned bytes (0..31), multiplied with the
	// activations by vpmaddubsw directly, without the vpsignb trick.
	unsigned bool
	// q8_1: Q8_1 activations, and an f16 minimum m at byte 2 of the weight
	// block, whose m·s terms go into a separate float sum (see dotRows).
	q8_1 bool
}

// aBytes and aQs are the activation block's size and its quants' offset.
func (k blockKernel) aBytes() int {
	if k.q8_1 {
		return 36
	}
	return 34
}

func (k blockKernel) aQs() int {
	if k.q8_1 {
		return 4
	}
	return 2
}

func (k blockKernel) actName() string {
	if k.q8_1 {
		return "Q8_1"
	}
	return "Q8_0"
}

func (k blockKernel) signNote() string {
	if k.unsigned {
		return ""
	}
	return "; a must not hold -128"
}

func (k blockKernel) orderNote() string {
	if k.q8_1 {
		return "; the m·s terms in a third sum, added last"
	}
	return ""
}

// mxfp4Block: {u8 e (E8M0); u8 qs[16]} — codes looked up in ggml's
// kvalues_mxfp4 (twice the E2M1 values, as int8) with vpshufb, the scale
// ggml_e8m0_to_fp32_half(e) = 2^(e-128) read from a 256-entry table.
var mxfp4Block = blockKernel{name: "MXFP4", wBytes: 17,
	load: func(c *build.Context, x Mem) reg.VecVirtual {
		lo, hi := c.XMM(), c.XMM()
		c.VMOVDQU(x.Offset(1), lo)
		c.VPSRLW(Imm(4), lo, hi)
		qx := c.YMM()
		c.VINSERTI128(Imm(1), hi, lo.AsY(), qx)
		c.VPAND(consts["nibbleMask"], qx, qx)
		lut := c.YMM()
		c.VBROADCASTI128(consts["mxfp4Values"], lut)
		c.VPSHUFB(qx, lut, qx) // code → int8 value
		return qx
	},
	scale: func(c *build.Context, x Mem) reg.VecVirtual {
		e := c.GP64()
		c.MOVBQZX(x, e)
		tab := c.GP64()
		c.LEAQ(consts["e8m0Half"], tab)
		d := c.XMM()
		c.VMOVSS(Mem{Base: tab, Index: e, Scale: 4}, d)
		return d
	},
}

// mxfp4Values defines ggml's kvalues_mxfp4 as 16 bytes.
func mxfp4Values(c *build.Context) Mem {
	m := c.StaticGlobal("mxfp4Values")
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for i, v := range quant.MXFP4Values {
		c.AddDatum(i, U8(uint8(v)))
	}
	return m
}

// e8m0HalfTable defines ggml_e8m0_to_fp32_half(e) for every byte e.
func e8m0HalfTable(c *build.Context) Mem {
	m := c.StaticGlobal("e8m0Half")
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for e := 0; e < 256; e++ {
		bits := uint32(e-1) << 23
		if e < 2 {
			bits = 0x00200000 << e
		}
		c.AddDatum(4*e, U32(bits))
	}
	return m
}

var q8_0Block = blockKernel{name: "Q8_0", wBytes: 34, load: func(c *build.Context, x Mem) reg.VecVirtual {
	qx := c.YMM()
	c.VMOVDQU(x.Offset(2), qx)
	return qx
}}

var q4_0Block = blockKernel{name: "Q4_0", wBytes: 18, load: func(c *build.Context, x Mem) reg.VecVirtual {
	// bytes_from_nibbles_32: low nibbles are elements 0..15, high 16..31.
	lo, hi := c.XMM(), c.XMM()
	c.VMOVDQU(x.Offset(2), lo)
	c.VPSRLW(Imm(4), lo, hi)
	qx := c.YMM()
	c.VINSERTI128(Imm(1), hi, lo.AsY(), qx)
	c.VPAND(consts["nibbleMask"], qx, qx)
	return qx
}}

// dotRows emits the body of a kernel computing the dots of one weight row
// with rows activation rows (1, or 4 at stride bytes apart).
//
// Order of the float sums: ggml's AVX2 block arithmetic (eight exact int32
// lanes per block, FMA'd with f16(d_w)*f16(d_a)), but in two accumulators,
// even blocks into the first and odd into the second, so that consecutive
// FMAs do not wait on each other; the result is hsum_float_8(acc0 + acc1).
// The one-row and four-row kernels share this order, so a row's dot does not
// depend on how many rows were computed with it.
//
// Q4_1 and Q5_1 (Q8_1 activations) add ggml's summs: per row one float sum,
// in block order and starting from 0, of the rounded products
// f16(m_w)·f16(s_a) (vmulps then vaddps, no FMA; it sits in lane 1 of an
// XMM register: vcvtph2ps of a block's first four halves gives {d, m, ·, ·}
// for the weights and {d, s, ·, ·} for the activations, so one vmulps forms
// d_w·d_a in lane 0 and m_w·s_a in lane 1; the other lanes are unused).
// The result is hsum_float_8(acc0 + acc1) + summs, as ggml's
// "sumf = hsum_float_8(acc) + summs".
func dotRows(c *build.Context, k blockKernel, rows int) {
	aBytes, aQs := k.aBytes(), k.aQs()
	lbl := func(s string) string { return fmt.Sprintf("%s_%d_%s", k.name, rows, s) }
	nb := c.Load(c.Param("nb"), c.GP64())
	x := c.Load(c.Param("w").Base(), c.GP64())
	y := avoutil.RowPointers(c, rows)
	acc := make([][2]reg.VecVirtual, rows)
	for r := range acc {
		for j := range acc[r] {
			acc[r][j] = c.YMM()
			c.VXORPS(acc[r][j], acc[r][j], acc[r][j])
		}
	}
	var summs []reg.VecVirtual
	if k.q8_1 {
		summs = make([]reg.VecVirtual, rows)
		for r := range summs {
			summs[r] = c.XMM()
			c.VXORPS(summs[r], summs[r], summs[r])
		}
	}
	// block adds block i (0 or 1 past the pointers) into accumulator j.
	block := func(i, j int) {
		xm := Mem{Base: x, Disp: i * k.wBytes}
		qx := k.load(c, xm)
		if k.name == "Q4_0" {
			c.VPSUBB(consts["eights"], qx, qx) // qx - 8
		}
		var dw reg.VecVirtual
		if k.scale != nil {
			dw = k.scale(c, xm)
		} else {
			dw = c.XMM()
			c.VCVTPH2PS(xm, dw)
		}
		var ax reg.VecVirtual
		if !k.unsigned {
			ax = c.YMM()
			c.VPSIGNB(qx, qx, ax) // |qx|
		}
		for r := 0; r < rows; r++ {
			ym := Mem{Base: y[r], Disp: i * aBytes}
			da := c.XMM()
			c.VCVTPH2PS(ym, da)
			if k.q8_1 {
				c.VMULPS(da, dw, da)             // {d_w·d_a, m_w·s_a, ·, ·}
				c.VADDPS(da, summs[r], summs[r]) // summs += m_w·s_a (lane 1)
			} else {
				c.VMULSS(da, dw, da) // d_w * f16(d_a)
			}
			d := c.YMM()
			c.VBROADCASTSS(da, d)
			sy := c.YMM()
			if k.unsigned {
				c.VPMADDUBSW(ym.Offset(aQs), qx, sy) // 16 int16: qx·qy pairs
			} else {
				c.VMOVDQU(ym.Offset(aQs), sy)
				c.VPSIGNB(qx, sy, sy)    // qy with qx's sign
				c.VPMADDUBSW(sy, ax, sy) // 16 int16: |qx|·sy pairs
			}
			c.VPMADDWD(consts["ones"], sy, sy) // 8 exact int32 lanes
			c.VCVTDQ2PS(sy, sy.AsY())
			c.VFMADD231PS(sy, d, acc[r][j]) // acc = d*q + acc
		}
	}
	advance := func(blocks int) {
		c.ADDQ(U32(blocks*k.wBytes), x)
		for r := range y {
			c.ADDQ(U32(blocks*aBytes), y[r])
		}
	}
	c.CMPQ(nb, Imm(2))
	c.JL(LabelRef(lbl("tail")))
	c.Label(lbl("pair"))
	block(0, 0)
	block(1, 1)
	advance(2)
	c.SUBQ(Imm(2), nb)
	c.CMPQ(nb, Imm(2))
	c.JGE(LabelRef(lbl("pair")))
	c.Label(lbl("tail"))
	c.TESTQ(nb, nb)
	c.JZ(LabelRef(lbl("done")))
	block(0, 0)
	c.Label(lbl("done"))
	if rows == 1 {
		c.VADDPS(acc[0][1], acc[0][0], acc[0][0])
		r := avoutil.HSumFloat8(c, acc[0][0])
		addSumms(c, k, summs, 0, r)
		c.VZEROUPPER()
		c.Store(r, c.ReturnIndex(0))
		c.RET()
		return
	}
	dst := c.Load(c.Param("dst"), c.GP64())
	for r := 0; r < rows; r++ {
		c.VADDPS(acc[r][1], acc[r][0], acc[r][0])
		s := avoutil.HSumFloat8(c, acc[r][0])
		addSumms(c, k, summs, r, s)
		c.VMOVSS(s, Mem{Base: dst, Disp: 4 * r})
	}
	c.VZEROUPPER()
	c.RET()
}

// addSumms adds lane 1 of row r's summs to the low lane of sum (Q8_1
// kernels only).
func addSumms(c *build.Context, k blockKernel, summs []reg.VecVirtual, r int, sum reg.VecVirtual) {
	if !k.q8_1 {
		return
	}
	m := c.XMM()
	c.VMOVSHDUP(summs[r], m)
	c.VADDSS(m, sum, sum)
}
