package main

import "fmt"

// Encodings of the AdvSIMD instructions Go's arm64 assembler lacks; the
// kernels emit them as WORD. Each helper takes register numbers 0..31 (V0..V31)
// and panics on operands the instruction cannot encode. Field layouts are the
// ARM ARM's (A64 "Advanced SIMD vector x indexed element", "two-register
// miscellaneous" and "three same" classes); enc_test.go checks them against
// an assembler's output.

func checkReg(regs ...int) {
	for _, r := range regs {
		if r < 0 || r > 31 {
			panic(fmt.Sprintf("kernneon: vector register V%d out of range", r))
		}
	}
}

func checkLane(lane int) {
	if lane < 0 || lane > 3 {
		panic(fmt.Sprintf("kernneon: lane %d of a 4-lane element index out of range", lane))
	}
}

// indexed32 fills the operands of a by-element instruction with 32-bit
// elements (size or sz selects S; index = H:L; Rm = M:Rm, all 32 registers).
func indexed32(base uint32, vd, vn, vm, lane int) uint32 {
	checkReg(vd, vn, vm)
	checkLane(lane)
	l, h := uint32(lane&1), uint32(lane>>1)
	return base | l<<21 | uint32(vm)<<16 | h<<11 | uint32(vn)<<5 | uint32(vd)
}

// sdotElem encodes SDOT Vd.4S, Vn.16B, Vm.4B[lane] (ARMv8.2 dotprod): lane i
// of Vd += Σ_j Vn.b[4i+j]·Vm.b[4·lane+j], signed bytes.
// 0 Q=1 U=0 01111 size=10 L M Rm 1110 H 0 Rn Rd.
func sdotElem(vd, vn, vm, lane int) uint32 {
	return indexed32(0x4f80e000, vd, vn, vm, lane)
}

// fmulElem encodes FMUL Vd.4S, Vn.4S, Vm.S[lane]: Vd = Vn·Vm[lane], each
// product rounded once.
// 0 Q=1 0 01111 1 sz=0 L M Rm 1001 H 0 Rn Rd.
func fmulElem(vd, vn, vm, lane int) uint32 {
	return indexed32(0x4f809000, vd, vn, vm, lane)
}

// twoReg fills a two-register-miscellaneous instruction.
func twoReg(base uint32, vd, vn int) uint32 {
	checkReg(vd, vn)
	return base | uint32(vn)<<5 | uint32(vd)
}

// scvtf4S encodes SCVTF Vd.4S, Vn.4S: int32 to float32, rounded to nearest
// (FPCR.RMode, which Go leaves at round to nearest even).
// 0 Q=1 U=0 01110 0 sz=0 10000 11101 10 Rn Rd.
func scvtf4S(vd, vn int) uint32 { return twoReg(0x4e21d800, vd, vn) }

// fcvtl encodes FCVTL Vd.4S, Vn.4H: the low four halves of Vn to float32
// (exact).
// 0 Q=0 0 01110 0 sz=0 10000 10111 10 Rn Rd.
func fcvtl(vd, vn int) uint32 { return twoReg(0x0e217800, vd, vn) }

// fcvtl2 encodes FCVTL2 Vd.4S, Vn.8H: the high four halves of Vn to float32.
func fcvtl2(vd, vn int) uint32 { return twoReg(0x4e217800, vd, vn) }

// threeSame fills a three-same instruction (Rm, Rn, Rd).
func threeSame(base uint32, vd, vn, vm int) uint32 {
	checkReg(vd, vn, vm)
	return base | uint32(vm)<<16 | uint32(vn)<<5 | uint32(vd)
}

// mla4S encodes MLA Vd.4S, Vn.4S, Vm.4S: Vd += Vn·Vm, int32 lanes (the low
// 32 bits of each product).
// 0 Q=1 0 01110 size=10 1 Rm 10010 1 Rn Rd.
func mla4S(vd, vn, vm int) uint32 { return threeSame(0x4ea09400, vd, vn, vm) }

// mlaElem4S encodes MLA Vd.4S, Vn.4S, Vm.S[lane]: Vd += Vn·Vm[lane].
// 0 Q=1 1 01111 size=10 L M Rm 0000 H 0 Rn Rd.
func mlaElem4S(vd, vn, vm, lane int) uint32 { return indexed32(0x6f800000, vd, vn, vm, lane) }

// saddlp4S encodes SADDLP Vd.4S, Vn.8H: lane i of Vd = Vn.h[2i] + Vn.h[2i+1],
// signed halves widened to int32.
// 0 Q=1 U=0 01110 size=01 10000 00010 10 Rn Rd.
func saddlp4S(vd, vn int) uint32 { return twoReg(0x4e602800, vd, vn) }

// sdot4S encodes SDOT Vd.4S, Vn.16B, Vm.16B: lane i of Vd += Σ_j
// Vn.b[4i+j]·Vm.b[4i+j], signed bytes.
// 0 Q=1 U=0 01110 size=10 0 Rm 1001 01 Rn Rd.
func sdot4S(vd, vn, vm int) uint32 { return threeSame(0x4e809400, vd, vn, vm) }

// sxtl encodes SXTL (SSHLL #0) Vd.8H, Vn.8B (hi: SXTL2 Vd.8H, Vn.16B), or
// with word Vd.4S, Vn.4H (SXTL2: Vn.8H): sign-extend the low (high) half.
// 0 Q 0 011110 immh:immb=0001000 (0010000 for halves) 10100 1 Rn Rd.
func sxtl(vd, vn int, word, hi bool) uint32 {
	base := uint32(0x0f08a400)
	if word {
		base = 0x0f10a400
	}
	if hi {
		base |= 1 << 30
	}
	return twoReg(base, vd, vn)
}

// sshr4S encodes SSHR Vd.4S, Vn.4S, #shift (1..32): arithmetic right
// shift of int32 lanes.
// 0 Q=1 0 011110 immh:immb=64−shift 00000 1 Rn Rd.
func sshr4S(vd, vn, shift int) uint32 {
	if shift < 1 || shift > 32 {
		panic(fmt.Sprintf("kernneon: sshr shift %d out of range", shift))
	}
	return twoReg(0x4f000400|uint32(64-shift)<<16, vd, vn)
}

// neg4S encodes NEG Vd.4S, Vn.4S: int32 lanes negated (modulo 2^32).
// 0 Q=1 U=1 01110 size=10 10000 01011 10 Rn Rd.
func neg4S(vd, vn int) uint32 { return twoReg(0x6ea0b800, vd, vn) }
