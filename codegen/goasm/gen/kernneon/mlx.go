package main

import "fmt"

// MLX affine weights against float32 activations (block {f32 scale; f32
// bias; u8 q[G·bits/8]}, q least significant bits first; see
// codegen/goasm/gen/kerndot/mlx.go): each weight decoded as
// fma(scale, q, bias) and summed in the amd64 MLX kernels' order, four
// accumulators of eight lanes (element i in accumulator (i/8)%4, lane i%8:
// here register V((i/4)%8), lane i%4), acc = fma(w, x, acc), then
// ((acc0+acc1)+(acc2+acc3)) and the lanes as hsum_float_8. FMLA is fused
// as vfmadd is, so the results are those kernels' bit for bit.
//
// mlxRows is the activation rows of the multi-row kernels (…x2NEON): all
// their accumulators in registers, eight per row.
const mlxRows = 2

// Registers: R0 groups left, R1 weights, R2+r row r's activations, R6
// stride, R7 dst. V(8r)..V(8r+7) row r's accumulators, V16 the scale, V17
// the bias (broadcast), V18 the nibble mask, V19, V20 bytes in element
// order, V21..V23 (4 bits) the packed vector and its low and high nibbles,
// V21..V24 quants, V25, V26 halfwords, V27 a weight, V28+r row r's
// activations.
const (
	vMLXScale, vMLXBias, vMLXMask v = 16, 17, 18
	vMLXBytes, vMLXPacked         v = 19, 21
	vMLXQ, vMLXHalf, vMLXW        v = 21, 25, 27
	vMLXAct                       v = 28
)

// mlxTypes lists the MLX affine kernels: bits and group size.
var mlxTypes = []struct{ bits, group int }{{4, 32}, {4, 64}, {4, 128}, {8, 32}, {8, 64}, {8, 128}}

// mlx emits dotMLXQ<bits>G<group>NEON and …x2NEON for every MLX type.
func mlx(f *file, consts map[string]string) {
	for _, t := range mlxTypes {
		name := fmt.Sprintf("dotMLXQ%dG%dNEON", t.bits, t.group)
		doc := []string{
			fmt.Sprintf("%s is the dot of ng blocks of w (MLX affine, %d bits, groups of %d)", name, t.bits, t.group),
			"with float32 activations a, bit for bit as the amd64 MLX kernels",
			"(codegen/goasm/gen/kernneon/mlx.go). It needs AdvSIMD.",
		}
		g := f.function(name, doc, []param{{"ng", "int"}, {"w", "[]byte"}, {"a", "[]byte"}}, []param{{"", "float32"}})
		mlxDot(g, consts, t.bits, t.group, 1)

		multi := fmt.Sprintf("dotMLXQ%dG%dx%dNEON", t.bits, t.group, mlxRows)
		doc = []string{
			fmt.Sprintf("%s sets dst[r] to %s(ng, w, a[r*stride:]) for r < %d,", multi, name, mlxRows),
			"bit for bit, decoding each weight once for the rows.",
		}
		g = f.function(multi, doc, []param{{"ng", "int"}, {"w", "[]byte"}, {"a", "[]byte"}, {"stride", "int"}, {"dst", "[]float32"}}, nil)
		mlxDot(g, consts, t.bits, t.group, mlxRows)
	}
}

func mlxDot(g *fn, consts map[string]string, bits, group, rows int) {
	g.op("MOVD %s, R0", g.arg("ng"))
	g.op("MOVD %s, R1", g.arg("w_base"))
	g.op("MOVD %s, R2", g.arg("a_base"))
	if rows > 1 {
		g.op("MOVD %s, R6", g.arg("stride"))
		for r := 1; r < rows; r++ {
			g.op("ADD R6, R%d, R%d", 1+r, 2+r)
		}
	}
	if bits == 4 {
		g.op("MOVD $%s, R5", consts["nibbleMask"])
		g.op("VLD1 (R5), [%s]", vMLXMask.arr("B16"))
	}
	for k := v(0); k < v(8*rows); k++ {
		g.op("VEOR %s, %s, %s", k.arr("B16"), k.arr("B16"), k.arr("B16"))
	}
	g.op("CBZ R0, %s", g.lbl("done"))
	g.label("group")
	g.op("VLD1R.P 4(R1), [%s]", vMLXScale.arr("S4"))
	g.op("VLD1R.P 4(R1), [%s]", vMLXBias.arr("S4"))
	// sixteen adds elements e…e+15 of the group, whose bytes (one per
	// element) are in register b.
	sixteen := func(b v, e int) {
		g.op("VUXTL %s, %s", b.arr("B8"), vMLXHalf.arr("H8"))
		g.op("VUXTL2 %s, %s", b.arr("B16"), (vMLXHalf + 1).arr("H8"))
		for j := v(0); j < 4; j++ {
			h := vMLXHalf + j/2
			if j%2 == 0 {
				g.op("VUXTL %s, %s", h.arr("H4"), (vMLXQ + j).arr("S4"))
			} else {
				g.op("VUXTL2 %s, %s", h.arr("H8"), (vMLXQ + j).arr("S4"))
			}
		}
		for j := v(0); j < 4; j++ {
			q := vMLXQ + j
			g.scvtf(q, q) // exact: q < 256
			// w = bias + scale·q, rounded once: FMLA into a copy of the
			// bias.
			g.op("VORR %s, %s, %s", vMLXBias.arr("B16"), vMLXBias.arr("B16"), vMLXW.arr("B16"))
			g.op("VFMLA %s, %s, %s", vMLXScale.arr("S4"), q.arr("S4"), vMLXW.arr("S4"))
			for r := range rows {
				x := vMLXAct + v(r)
				g.op("VLD1.P 16(R%d), [%s]", 2+r, x.arr("S4"))
				acc := v(8*r + (e/4+int(j))%8)
				g.op("VFMLA %s, %s, %s", vMLXW.arr("S4"), x.arr("S4"), acc.arr("S4"))
			}
		}
	}
	for e := 0; e < group; e += 32 {
		if bits == 8 {
			g.op("VLD1.P 32(R1), %s", vMLXBytes.list(2, "B16"))
		} else {
			// 16 bytes: elements e+2j in the low nibbles, e+2j+1 in the
			// high ones; zipped back into element order.
			lo, hi := vMLXPacked+1, vMLXPacked+2
			g.op("VLD1.P 16(R1), [%s]", vMLXPacked.arr("B16"))
			g.op("VAND %s, %s, %s", vMLXMask.arr("B16"), vMLXPacked.arr("B16"), lo.arr("B16"))
			g.op("VUSHR $4, %s, %s", vMLXPacked.arr("B16"), hi.arr("B16"))
			g.op("VZIP1 %s, %s, %s", hi.arr("B16"), lo.arr("B16"), vMLXBytes.arr("B16"))
			g.op("VZIP2 %s, %s, %s", hi.arr("B16"), lo.arr("B16"), (vMLXBytes + 1).arr("B16"))
		}
		sixteen(vMLXBytes, e)
		sixteen(vMLXBytes+1, e+16)
	}
	g.op("SUBS $1, R0, R0")
	g.op("BNE %s", g.lbl("group"))
	g.label("done")
	if rows > 1 {
		g.op("MOVD %s, R7", g.arg("dst_base"))
	}
	for r := range rows {
		// Lanes 0–3 of accumulator k are V(8r+2k), lanes 4–7 V(8r+2k+1).
		a := v(8 * r)
		for h := v(0); h < 2; h++ {
			g.fadd(a+h, a+h, a+2+h)     // acc0 + acc1
			g.fadd(a+4+h, a+4+h, a+6+h) // acc2 + acc3
			g.fadd(a+h, a+h, a+4+h)
		}
		g.hsum8(a, a+1)
		if rows == 1 {
			g.op("FMOVS F0, %s", g.arg("ret"))
		} else {
			g.op("FMOVS F%d, %d(R7)", a, 4*r)
		}
	}
	g.end()
}

// hsum8 leaves hsum_float_8 of eight float lanes, lanes 0–3 in lo and 4–7
// in hi, in lane 0 of lo: lanes l+4 onto l, then (r0+r2) + (r1+r3). hi is
// clobbered.
func (g *fn) hsum8(lo, hi v) {
	g.fadd(lo, lo, hi)
	g.hsum4(lo, hi)
}

// hsum4 leaves (r0+r2) + (r1+r3) of r's four float lanes in lane 0 of r;
// tmp is clobbered.
func (g *fn) hsum4(r, tmp v) {
	g.op("VEXT $8, %s, %s, %s", r.arr("B16"), r.arr("B16"), tmp.arr("B16"))
	g.fadd(r, r, tmp) // lanes 0+2, 1+3
	g.op("VMOV %s.S[1], %s.S[0]", r, tmp)
	g.op("FADDS F%d, F%d, F%d", tmp, r, r)
}

func (g *fn) fadd(vd, vn, vm v) {
	g.word(fadd4S(int(vd), int(vn), int(vm)), "fadd v%d.4s, v%d.4s, v%d.4s", vd, vn, vm)
}

// fadd4S encodes FADD Vd.4S, Vn.4S, Vm.4S, each sum rounded once.
// 0 Q=1 0 01110 0 sz=0 1 Rm 11010 1 Rn Rd.
func fadd4S(vd, vn, vm int) uint32 {
	checkReg(vd, vn, vm)
	return 0x4e20d400 | uint32(vm)<<16 | uint32(vn)<<5 | uint32(vd)
}
