package main

import (
	"fmt"

	"github.com/minerva-llm/minerva/codegen/goasm/gen/internal/avoutil"
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// MLX affine weights (ir.MLXQ4G32 … ir.MLXQ8G128) against float32
// activations. A block is one group of G elements,
//
//	{f32 scale; f32 bias; u8 q[G·bits/8]}
//
// with q packed least significant bits first (4 bits: byte j holds element
// 2j in its low nibble, 2j+1 in its high one). The kernels decode each
// weight exactly as quant.Dequantize does, w = fma(scale, q, bias) (q
// widened exactly to float32), and sum w·x as kernvec's dotF32BytesAVX2
// sums F32 weights: four accumulators of eight lanes, element i in
// accumulator (i/8)%4 lane i%8, acc = fma(w, x, acc), then
// ((acc0+acc1)+(acc2+acc3)) and hsum_float_8. So on every SIMD variant an
// MLX row gives bit for bit what the same weights stored as F32 give, and
// the goldens' float-activation reference holds at float tolerance.
//
// The AVX-512 kernels hold accumulators 0,1 and 2,3 side by side in two
// ZMM registers (element i of a 32-element chunk in lane i%16 of the
// (i/16)th): the same lanes, the same fused operations in the same order,
// so their results are the AVX2 kernels' bit for bit. They decode sixteen
// weights per instruction where AVX2 decodes eight.

// mlxTypes lists the MLX affine kernels: bits and group size.
var mlxTypes = []struct{ bits, group int }{{4, 32}, {4, 64}, {4, 128}, {8, 32}, {8, 64}, {8, 128}}

// mlxRowsAVX2 and mlxRowsAVX512 are the activation rows of the multi-row
// kernels: as many as keep every accumulator in a register (four per row
// in YMM, two in ZMM).
const mlxRowsAVX2, mlxRowsAVX512 = 2, 4

// mlx emits dotMLXQ<bits>G<group>AVX2 and …AVX512 for every MLX type, and
// their multi-row forms …x2AVX2 and …x4AVX512.
func mlx(c *build.Context) {
	for _, t := range mlxTypes {
		for _, wide := range []bool{false, true} {
			name, isa := fmt.Sprintf("dotMLXQ%dG%d", t.bits, t.group), "AVX2"
			needs, rows := "AVX2 and FMA", mlxRowsAVX2
			if wide {
				isa, needs, rows = "AVX512", "AVX-512F", mlxRowsAVX512
			}
			c.Function(name + isa)
			c.Attributes(attr.NOSPLIT)
			c.Pragma("noescape")
			c.SignatureExpr("func(ng int, w, a []byte) float32")
			c.Doc(
				fmt.Sprintf("%s%s is the dot of ng blocks of w (MLX affine, %d bits, groups of %d)", name, isa, t.bits, t.group),
				"with float32 activations a, each weight decoded as fma(scale, q, bias) and",
				"summed as dotF32BytesAVX2 sums F32 weights (codegen/goasm/gen/kerndot/mlx.go).",
				"It needs "+needs+".",
			)
			mlxDot(c, name+isa, t.bits, t.group, wide, 1)

			multi := fmt.Sprintf("%sx%d%s", name, rows, isa)
			c.Function(multi)
			c.Attributes(attr.NOSPLIT)
			c.Pragma("noescape")
			c.SignatureExpr("func(ng int, w, a []byte, stride int, dst []float32)")
			c.Doc(
				fmt.Sprintf("%s sets dst[r] to %s%s(ng, w, a[r*stride:]) for r < %d,", multi, name, isa, rows),
				"bit for bit, decoding each weight once for the rows.",
			)
			mlxDot(c, multi, t.bits, t.group, wide, rows)
		}
	}
}

// mlxDot emits the body of one MLX kernel over rows activation rows.
func mlxDot(c *build.Context, name string, bits, group int, wide bool, rows int) {
	ng := c.Load(c.Param("ng"), c.GP64())
	x := c.Load(c.Param("w").Base(), c.GP64())
	y := avoutil.RowPointers(c, rows)
	lanes := 8
	vec := c.YMM
	if wide {
		lanes, vec = 16, c.ZMM
	}
	acc := make([][]reg.VecVirtual, rows)
	for r := range acc {
		acc[r] = make([]reg.VecVirtual, 32/lanes)
		for i := range acc[r] {
			acc[r][i] = vec()
			if wide {
				c.VPXORD(acc[r][i], acc[r][i], acc[r][i]) // VXORPS on ZMM needs AVX512DQ
			} else {
				c.VXORPS(acc[r][i], acc[r][i], acc[r][i])
			}
		}
	}
	blockBytes := 8 + group*bits/8
	lbl := func(s string) string { return name + "_" + s }
	c.TESTQ(ng, ng)
	c.JZ(LabelRef(lbl("done")))
	c.Label(lbl("group"))
	s, b := vec(), vec()
	c.VBROADCASTSS(Mem{Base: x}, s)
	c.VBROADCASTSS(Mem{Base: x, Disp: 4}, b)
	// fmaStep decodes the lanes of q (uint32 quants of elements e…e+lanes-1
	// of the group) and adds their products with each row's activations.
	fmaStep := func(q reg.VecVirtual, e int) {
		c.VCVTDQ2PS(q, q)      // exact: q < 256
		c.VFMADD213PS(b, s, q) // w = scale·q + bias, rounded once
		k := (e % 32) / lanes  // accumulator
		for r := range rows {
			c.VFMADD231PS(Mem{Base: y[r], Disp: 4 * e}, q, acc[r][k]) // acc += w·x, rounded once
		}
	}
	for chunk := 0; chunk < group/32; chunk++ {
		e0 := 32 * chunk
		if bits == 8 {
			for e := e0; e < e0+32; e += lanes {
				q := vec()
				c.VPMOVZXBD(Mem{Base: x, Disp: 8 + e}, q)
				fmaStep(q, e)
			}
			continue
		}
		// 16 bytes hold elements e0…e0+31: the low nibbles the even ones,
		// the high nibbles the odd ones; interleaved back into order.
		lo, hi := c.XMM(), c.XMM()
		c.VMOVDQU(Mem{Base: x, Disp: 8 + e0/2}, lo)
		c.VPSRLW(Imm(4), lo, hi)
		c.VPAND(consts["nibbleMask"], lo, lo)
		c.VPAND(consts["nibbleMask"], hi, hi)
		var half [2]reg.VecVirtual // elements e0…e0+15, e0+16…e0+31 as bytes
		half[0], half[1] = c.XMM(), c.XMM()
		c.VPUNPCKLBW(hi, lo, half[0])
		c.VPUNPCKHBW(hi, lo, half[1])
		for h, v := range half {
			if wide {
				q := vec()
				c.VPMOVZXBD(v, q)
				fmaStep(q, e0+16*h)
				continue
			}
			q := vec()
			c.VPMOVZXBD(v, q)
			fmaStep(q, e0+16*h)
			up := c.XMM()
			c.VPSRLDQ(Imm(8), v, up)
			q = vec()
			c.VPMOVZXBD(up, q)
			fmaStep(q, e0+16*h+8)
		}
	}
	c.ADDQ(U32(blockBytes), x)
	for r := range rows {
		c.ADDQ(U32(4*group), y[r])
	}
	c.DECQ(ng)
	c.JNZ(LabelRef(lbl("group")))
	c.Label(lbl("done"))
	if rows == 1 {
		r := mlxSum(c, acc[0], wide)
		c.VZEROUPPER()
		c.Store(r, c.ReturnIndex(0))
		c.RET()
		return
	}
	dst := c.Load(c.Param("dst").Base(), c.GP64())
	for i := range rows {
		c.VMOVSS(mlxSum(c, acc[i], wide), Mem{Base: dst, Disp: 4 * i})
	}
	c.VZEROUPPER()
	c.RET()
}

// mlxSum reduces one row's accumulators as dotF32BytesAVX2 does, into the
// low lane of an XMM register.
func mlxSum(c *build.Context, acc []reg.VecVirtual, wide bool) reg.VecVirtual {
	var sum reg.VecVirtual
	if wide {
		// acc[0] = (acc0, acc1), acc[1] = (acc2, acc3).
		var pair [2]reg.VecVirtual
		for i, a := range acc {
			pair[i] = c.YMM()
			c.VEXTRACTF64X4(Imm(1), a, pair[i])
			c.VADDPS(pair[i], a.AsY(), pair[i])
		}
		c.VADDPS(pair[1], pair[0], pair[0])
		sum = pair[0]
	} else {
		c.VADDPS(acc[1], acc[0], acc[0])
		c.VADDPS(acc[3], acc[2], acc[2])
		c.VADDPS(acc[2], acc[0], acc[0])
		sum = acc[0]
	}
	return avoutil.HSumFloat8(c, sum)
}
