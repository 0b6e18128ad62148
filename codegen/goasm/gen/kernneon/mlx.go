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
// Registers: R0 groups left, R1 weights, R2 activations. V0..V7 the
// accumulators, V8 the scale, V9 the bias (broadcast), V10 the nibble mask,
// V11 a weight vector, V12, V13 low and high nibbles, V14, V15 bytes in
// element order, V16..V19 halfwords, V20..V23 quants then weights, V24..V27
// activations.
const (
	vMLXScale, vMLXBias, vMLXMask v = 8, 9, 10
	vMLXPacked, vMLXLo, vMLXHi    v = 11, 12, 13
	vMLXBytes, vMLXHalf           v = 14, 16
	vMLXQ, vMLXAct                v = 20, 24
)

// mlxTypes lists the MLX affine kernels: bits and group size.
var mlxTypes = []struct{ bits, group int }{{4, 32}, {4, 64}, {4, 128}, {8, 32}, {8, 64}, {8, 128}}

// mlx emits dotMLXQ<bits>G<group>NEON for every MLX type.
func mlx(f *file, consts map[string]string) {
	for _, t := range mlxTypes {
		name := fmt.Sprintf("dotMLXQ%dG%dNEON", t.bits, t.group)
		doc := []string{
			fmt.Sprintf("%s is the dot of ng blocks of w (MLX affine, %d bits, groups of %d)", name, t.bits, t.group),
			"with float32 activations a, bit for bit as the amd64 MLX kernels",
			"(codegen/goasm/gen/kernneon/mlx.go). It needs AdvSIMD.",
		}
		g := f.function(name, doc, []param{{"ng", "int"}, {"w", "[]byte"}, {"a", "[]byte"}}, []param{{"", "float32"}})
		mlxDot(g, consts, t.bits, t.group)
	}
}

func mlxDot(g *fn, consts map[string]string, bits, group int) {
	g.op("MOVD %s, R0", g.arg("ng"))
	g.op("MOVD %s, R1", g.arg("w_base"))
	g.op("MOVD %s, R2", g.arg("a_base"))
	if bits == 4 {
		g.op("MOVD $%s, R3", consts["nibbleMask"])
		g.op("VLD1 (R3), [%s]", vMLXMask.arr("B16"))
	}
	for k := v(0); k < 8; k++ {
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
		g.op("VLD1.P 64(R2), %s", vMLXAct.list(4, "S4"))
		for j := v(0); j < 4; j++ {
			q := vMLXQ + j
			g.scvtf(q, q) // exact: q < 256
			// w = bias + scale·q, rounded once: FMLA into a copy of the
			// bias.
			w := vMLXHalf + j
			g.op("VORR %s, %s, %s", vMLXBias.arr("B16"), vMLXBias.arr("B16"), w.arr("B16"))
			g.op("VFMLA %s, %s, %s", vMLXScale.arr("S4"), q.arr("S4"), w.arr("S4"))
			acc := v((e/4 + int(j)) % 8)
			g.op("VFMLA %s, %s, %s", w.arr("S4"), (vMLXAct + j).arr("S4"), acc.arr("S4"))
		}
	}
	for e := 0; e < group; e += 32 {
		if bits == 8 {
			g.op("VLD1.P 32(R1), %s", vMLXBytes.list(2, "B16"))
			sixteen(vMLXBytes, e)
			sixteen(vMLXBytes+1, e+16)
			continue
		}
		// 16 bytes: elements e+2j in the low nibbles, e+2j+1 in the high.
		g.op("VLD1.P 16(R1), [%s]", vMLXPacked.arr("B16"))
		g.op("VAND %s, %s, %s", vMLXMask.arr("B16"), vMLXPacked.arr("B16"), vMLXLo.arr("B16"))
		g.op("VUSHR $4, %s, %s", vMLXPacked.arr("B16"), vMLXHi.arr("B16"))
		g.op("VZIP1 %s, %s, %s", vMLXHi.arr("B16"), vMLXLo.arr("B16"), vMLXBytes.arr("B16"))
		g.op("VZIP2 %s, %s, %s", vMLXHi.arr("B16"), vMLXLo.arr("B16"), (vMLXBytes + 1).arr("B16"))
		sixteen(vMLXBytes, e)
		sixteen(vMLXBytes+1, e+16)
	}
	g.op("SUBS $1, R0, R0")
	g.op("BNE %s", g.lbl("group"))
	g.label("done")
	// Lanes 0–3 of accumulator k are V(2k), lanes 4–7 V(2k+1).
	for h := v(0); h < 2; h++ {
		g.fadd(h, h, 2+h)     // acc0 + acc1
		g.fadd(4+h, 4+h, 6+h) // acc2 + acc3
		g.fadd(h, h, 4+h)
	}
	g.fadd(0, 0, 1) // hi + lo
	g.op("VEXT $8, %s, %s, %s", v(0).arr("B16"), v(0).arr("B16"), v(1).arr("B16"))
	g.fadd(0, 0, 1) // r0+r2, r1+r3
	g.op("VMOV %s.S[1], %s.S[0]", v(0), v(1))
	g.op("FADDS F1, F0, F0")
	g.op("FMOVS F0, %s", g.arg("ret"))
	g.end()
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
