package main

import (
	"fmt"
	"slices"

	"github.com/minerva-llm/minerva/codegen/goasm/gen/internal/avoutil"
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The Q4_K and Q6_K matrix-vector kernels with 512-bit vectors: the AVX2
// kernels' work (codegen/goasm/gen/kerndot's kquants.go) on twice the bytes
// per instruction, with vpdpwssd (vpmaddwd and vpaddd in one) for the scale
// step. A super-block's integer sums end in sixteen int32 lanes whose two
// 256-bit halves cover the same elements mod 32, so adding the halves gives
// exactly the AVX2 kernels' eight lanes, and the float arithmetic after
// that is theirs: every result is the AVX2 kernel's bit for bit.

// kq512 holds the kernels' read-only vectors.
var kq512 struct {
	nib, m30 Mem
	hin      Mem // 0xf0 bytes: a Q4_K byte's high nibble in place (see q4KGroup)
	shufK4   Mem // 4 vectors: scale word 2g in 128-bit lanes 0,1, word 2g+1 in 2,3
	shlQ6    Mem // words: 4 in the low half, 2 in the high half
	shrQ6    Mem // words: 0 in the low half, 2 in the high half
	m10      Mem // 0x10 bytes
	m32w     Mem // 16 words of -32 (the Q6_K correction's factor)
	shiftQ5  Mem // 4 vectors of word shifts (see dotQK512)
	permQ6   Mem // 4 vectors of 32 word indices (see dotQ6K512)
	shufSc   Mem // 32 bytes: byte r of each 128-bit lane into dword r, zero-extended
	shufMn   Mem // 32 bytes: byte r into both words of dword r
	zero     Mem // 32 zero bytes
	ones16   Mem // 32 bytes: the word 1 sixteen times
	// For the 16-row group kernel: 64 zero bytes, and shufSc and shufMn
	// twice (one copy per 256-bit half).
	zero64, shufSc64, shufMn64 Mem
	// pairQ6: 16 bytes interleaving two runs of eight (0, 8, 1, 9, …);
	// pairQ6x2 the same twice (one per 128-bit lane).
	pairQ6, pairQ6x2 Mem
}

// quadwords defines a read-only table of n quadwords q(i).
func quadwords(c *build.Context, name string, n int, q func(i int) uint64) Mem {
	m := c.StaticGlobal(name)
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for i := 0; i < n; i++ {
		c.AddDatum(8*i, U64(q(i)))
	}
	return m
}

// zConsts defines a read-only table of n 64-byte vectors, vector v's
// quadword i being q(v, i).
func zConsts(c *build.Context, name string, n int, q func(v, i int) uint64) Mem {
	return quadwords(c, name, 8*n, func(i int) uint64 { return q(i/8, i%8) })
}

// zConst defines a 64-byte read-only vector from its eight quadwords.
func zConst(c *build.Context, name string, q func(i int) uint64) Mem {
	return quadwords(c, name, 8, q)
}

// ymmConst defines a 32-byte read-only vector of eight dwords q(r).
func ymmConst(c *build.Context, name string, q func(r int) uint32) Mem {
	return quadwords(c, name, 4, func(i int) uint64 { return uint64(q(2*i)) | uint64(q(2*i+1))<<32 })
}

func kquantConsts(c *build.Context) {
	rep := func(b byte) uint64 { return uint64(b) * 0x0101010101010101 }
	words := func(w uint64) uint64 { return w * 0x0001000100010001 }
	kq512.nib = zConst(c, "kq512Nib", func(int) uint64 { return rep(0x0f) })
	kq512.m30 = zConst(c, "kq512M30", func(int) uint64 { return rep(0x30) })
	kq512.hin = zConst(c, "kq512Hin", func(int) uint64 { return rep(0xf0) })
	// vpshufb picks bytes within each 128-bit lane: word w is bytes 2w, 2w+1.
	kq512.shufK4 = zConsts(c, "kq512ShufK4", 4, func(g, i int) uint64 {
		w := uint64(2*g + i/4) // quadwords 0..3: lanes 0,1
		return rep(byte(2*w)) + 0x0100010001000100
	})
	kq512.shlQ6 = zConst(c, "kq512ShlQ6", func(i int) uint64 { return words([]uint64{4, 2}[i/4]) })
	kq512.shrQ6 = zConst(c, "kq512ShrQ6", func(i int) uint64 { return words([]uint64{0, 2}[i/4]) })
	kq512.m10 = zConst(c, "kq512M10", func(int) uint64 { return rep(0x10) })
	kq512.m32w = ymmConst(c, "kq512M32w", func(int) uint32 { return 0xffe0ffe0 })
	// Q5_K: chunk h's low nibbles take qh bits 4h (low half) and 4h+2
	// (high half), its high nibbles 4h+1 and 4h+3, each moved to bit 4:
	// left by 4-b for h = 0 (vectors 0, 1), right by b-4 for h = 1 (2, 3).
	kq512.shiftQ5 = zConsts(c, "kq512ShiftQ5", 4, func(v, i int) uint64 {
		h, part := v/2, v%2
		b := uint64(4*h + part + 2*(i/4))
		if h == 0 {
			return words(4 - b)
		}
		return words(b - 4)
	})
	// Word j of the products of half p (0: low nibbles, 1: high) of ql
	// chunk n has the scale of group 8n + 4p + j/8.
	kq512.permQ6 = zConsts(c, "kq512PermQ6", 4, func(v, i int) uint64 {
		n, p := v/2, v%2
		return words(uint64(8*n + 4*p + i/2)) // quadword i: words 4i..4i+3
	})
	// Dword r (r < 4 in the low 128-bit lane, r-4.. in the high one, whose
	// byte r is the same byte after vpbroadcastq).
	kq512.shufSc = ymmConst(c, "kq512ShufSc", func(r int) uint32 { return uint32(r) | 0x80808000 })
	kq512.zero = ymmConst(c, "kq512Zero", func(int) uint32 { return 0 })
	kq512.ones16 = ymmConst(c, "kq512Ones16", func(int) uint32 { return 0x00010001 })
	kq512.shufMn = ymmConst(c, "kq512ShufMn", func(r int) uint32 { return uint32(r) | 0x80<<8 | uint32(r)<<16 | 0x80<<24 })
	kq512.zero64 = zConst(c, "kq512Zero64", func(int) uint64 { return 0 })
	kq512.pairQ6 = quadwords(c, "kq512PairQ6", 2, func(i int) uint64 {
		var q uint64
		for b := 0; b < 8; b++ {
			q |= uint64(4*i+b/2+8*(b%2)) << (8 * b)
		}
		return q
	})
	kq512.pairQ6x2 = quadwords(c, "kq512PairQ6x2", 4, func(i int) uint64 {
		var q uint64
		for b := 0; b < 8; b++ {
			q |= uint64(4*(i%2)+b/2+8*(b%2)) << (8 * b)
		}
		return q
	})
	kq512.shufSc64 = zConst(c, "kq512ShufSc64", func(i int) uint64 { r := uint64(2 * (i % 4)); return r | 0x80808000 | (r+1)<<32 | 0x80808000<<32 })
	kq512.shufMn64 = zConst(c, "kq512ShufMn64", func(i int) uint64 {
		r := uint64(2 * (i % 4))
		w := func(r uint64) uint64 { return r | 0x80<<8 | r<<16 | 0x80<<24 }
		return w(r) | w(r+1)<<32
	})
}

// vpdpwssd emits VPDPWSSD s, p, acc: acc[i] += p[2i]·s[2i] + p[2i+1]·s[2i+1]
// (int16 pairs into int32 lanes); avo has no VNNI instructions.
func vpdpwssd(c *build.Context, s, p, acc reg.VecVirtual) {
	c.Instruction(&ir.Instruction{
		Opcode:   "VPDPWSSD",
		Operands: []Op{s, p, acc},
		Inputs:   []Op{s, p, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512VNNI"},
	})
}

// kquants emits gemvQ4_KVNNI, gemvQ5_KVNNI and gemvQ6_KVNNI.
func kquants(c *build.Context) {
	kquantConsts(c)
	for _, t := range avoutil.KQTypes {
		avoutil.Function(c, "gemv"+t.Name+"VNNI", avoutil.KQGemvSignature,
			"gemv"+t.Name+"VNNI is gemv"+t.Name+"AVX2 with 512-bit vectors, bit for bit (see",
			"codegen/goasm/gen/kernvnni's kquants.go). It needs AVX-512 F, BW and VNNI too.",
		)
		switch t.Name {
		case "Q6_K":
			avoutil.KQRows(c, "Q6_K", 210, false, dotQ6K512)
		case "Q5_K":
			avoutil.KQRows(c, "Q5_K", 176, true, func(c *build.Context, x, y reg.GPVirtual, acc, accm reg.VecVirtual) func() {
				return dotQK512(c, true, x, y, acc, accm)
			})
		default:
			avoutil.KQRows(c, "Q4_K", 144, true, dotQ4K512)
		}
	}
	q6KRows4(c)
	q5KRows4(c)
}

// scaled adds the int16 pairs of p times the scales s into the int32
// lanes of sum (a new register when sum is nil) and returns sum.
func scaled(c *build.Context, sum, s, p reg.VecVirtual) reg.VecVirtual {
	if sum == nil {
		sum = c.ZMM()
		c.VPMADDWD(s, p, sum)
		return sum
	}
	vpdpwssd(c, s, p, sum)
	return sum
}

// sumHalves adds the two 256-bit halves of the int32 lanes of z and returns
// the eight sums as floats in a YMM register.
func sumHalves(c *build.Context, z reg.VecVirtual) reg.VecVirtual {
	hi, s := c.YMM(), c.YMM()
	c.VEXTRACTI64X4(Imm(1), z, hi)
	c.VPADDD(hi, z.AsY(), s)
	return s
}

// dotQ4K512 is the Q4_K super-block body. The 128 quant bytes load as two
// 64-byte chunks h; chunk h's low nibbles are sub-blocks 4h and 4h+2 (one
// per 256-bit half), its high nibbles 4h+1 and 4h+3, so a 128-bit lane
// shuffle pairs them as [4h, 4h+1] and [4h+2, 4h+3], the order of the
// activations.
func dotQ4K512(c *build.Context, x, y reg.GPVirtual, acc, accm reg.VecVirtual) func() {
	return dotQK512(c, false, x, y, acc, accm)
}

// dotQK512 is the Q4_K super-block body (dotQ4K512), or with q5 the Q5_K
// one: the weights unpacked (qk512Weights), then the activation row's
// products (qk512Row).
func dotQK512(c *build.Context, q5 bool, x, y reg.GPVirtual, acc, accm reg.VecVirtual) func() {
	k := newQK512(c, q5)
	return func() {
		w := k.weights(x)
		k.row(w, x, y, acc, accm)
	}
}

// qk512 holds the Q4_K/Q5_K kernels' constants: masks in general
// registers, the nibble mask and (Q5_K) the 0x10 mask and qh shifts.
type qk512 struct {
	c             *build.Context
	q5            bool
	m3f, m03, m0f reg.GPVirtual
	nib, m10      reg.VecVirtual
	shift         []reg.VecVirtual
	qsOff         int
}

func newQK512(c *build.Context, q5 bool) *qk512 {
	k := &qk512{c: c, q5: q5, qsOff: 16}
	k.m3f, k.m03, k.m0f = avoutil.KQ4Masks(c)
	k.nib = c.ZMM()
	c.VMOVDQU64(kq512.nib, k.nib)
	if q5 {
		k.qsOff = 48
		k.m10 = c.ZMM()
		c.VMOVDQU64(kq512.m10, k.m10)
		k.shift = make([]reg.VecVirtual, 4)
		for v := range k.shift {
			k.shift[v] = c.ZMM()
			c.VMOVDQU64(kq512.shiftQ5.Offset(64*v), k.shift[v])
		}
	}
	return k
}

// qk512Block is a super-block's unpacked weights: quant vector i holds
// sub-blocks 2i and 2i+1 (the activations' order at 4+64i of a Q8_K
// block), s[i] their scales as words, mins the minima.
type qk512Block struct {
	q, s [4]reg.VecVirtual
	mins reg.VecVirtual
}

// weights unpacks the super-block at x. The 128 quant bytes load as two
// 64-byte chunks h; chunk h's low nibbles are sub-blocks 4h and 4h+2 (one
// per 256-bit half), its high nibbles 4h+1 and 4h+3, so a 128-bit lane
// shuffle pairs them as [4h, 4h+1] and [4h+2, 4h+3]. For Q5_K, qh (32
// bytes at 16, bit s of byte l the high bit of element 32s+l) is copied
// into both 256-bit halves, shifted per half (vpsllvw for chunk 0's
// sub-blocks 0..3, vpsrlvw for chunk 1's 4..7) and or'ed in at bit 4.
func (k *qk512) weights(x reg.GPVirtual) qk512Block {
	c := k.c
	var b qk512Block
	var scales reg.VecVirtual
	scales, b.mins = avoutil.KQScalesMinsK4(c, x, k.m3f, k.m03, k.m0f)
	all := c.ZMM()
	c.VSHUFI32X4(Imm(0), scales.AsZ(), scales.AsZ(), all) // sc0..7 in every 128-bit lane
	var qh reg.VecVirtual
	if k.q5 {
		qh = c.ZMM()
		c.VBROADCASTI64X4(Mem{Base: x, Disp: 16}, qh)
	}
	for h := 0; h < 2; h++ {
		bits, lo, hi := c.ZMM(), c.ZMM(), c.ZMM()
		c.VMOVDQU64(Mem{Base: x, Disp: k.qsOff + 64*h}, bits)
		c.VPANDD(k.nib, bits, lo)
		c.VPSRLW(Imm(4), bits, hi)
		c.VPANDD(k.nib, hi, hi)
		if k.q5 {
			for part, v := range []reg.VecVirtual{lo, hi} {
				t := c.ZMM()
				if h == 0 {
					c.VPSLLVW(k.shift[2*h+part], qh, t)
				} else {
					c.VPSRLVW(k.shift[2*h+part], qh, t)
				}
				c.VPTERNLOGD(Imm(0xf8), k.m10, t, v) // v | t&0x10
			}
		}
		for j, imm := range []uint64{0x44, 0xee} {
			i := 2*h + j
			b.q[i], b.s[i] = c.ZMM(), c.ZMM()
			c.VSHUFI64X2(Imm(imm), hi, lo, b.q[i]) // sub-blocks 4h+2j, 4h+2j+1
			c.VPSHUFB(kq512.shufK4.Offset(64*i), all, b.s[i])
		}
	}
	return b
}

// row adds the super-block's products with the Q8_K block at y: the minima
// term into accm (avoutil.KQMinima), d_y·d_w·Σ into acc.
func (k *qk512) row(b qk512Block, x, y reg.GPVirtual, acc, accm reg.VecVirtual) {
	c := k.c
	dd := minima512(c, x, y, b.mins, accm)
	var sumi reg.VecVirtual
	for i := range b.q {
		p := c.ZMM()
		c.VPMADDUBSW(Mem{Base: y, Disp: 4 + 64*i}, b.q[i], p)
		sumi = scaled(c, sumi, b.s[i], p)
	}
	f := sumHalves(c, sumi)
	c.VCVTDQ2PS(f, f)
	d := c.YMM()
	c.VBROADCASTSS(dd, d)
	c.VFMADD231PS(f, d, acc)
}

// minima512 is avoutil.KQMinima in EVEX encodings, so that its registers
// may be any of the 32 (the four-row kernel holds more than 16 live): the
// activation block sums' adjacent pairs (≤ 2·2032 in magnitude, so no
// word wraps) come from vpmaddwd with ones and vpmovdw, not vphaddw, which
// has no EVEX form; the integers and the float steps are KQMinima's.
func minima512(c *build.Context, x, y reg.GPVirtual, mins, accm reg.VecVirtual) reg.VecVirtual {
	dd, yd := c.XMM(), c.XMM()
	c.VCVTPH2PS(Mem{Base: x}, dd) // d_w, dmin_w, (scale bytes)
	c.VBROADCASTSS(Mem{Base: y}, yd)
	c.VMULPS(dd, yd, dd)
	bs, pairs := c.YMM(), c.XMM()
	c.VMOVDQU16(Mem{Base: y, Disp: 260}, bs)
	c.VPMADDWD(kq512.ones16, bs, bs)
	c.VPMOVDW(bs, pairs)
	c.VPMADDWD(pairs, mins, pairs)
	c.VCVTDQ2PS(pairs, pairs)
	dmin := c.XMM()
	c.VSHUFPS(Imm(0x55), dd, dd, dmin)
	c.VFNMADD231PS(pairs, dmin, accm)
	return dd
}

// q5KRows4 emits dotQ5_Kx4VNNI: one Q5_K row against four activation rows,
// each super-block unpacked once (prefill); per row the float steps of
// gemvQ5_KVNNI, so its results bit for bit.
func q5KRows4(c *build.Context) {
	c.Function("dotQ5_Kx4VNNI")
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr("func(nb int, w, a []byte, stride int, dst *[4]float32)")
	c.Doc("dotQ5_Kx4VNNI sets dst[r] to the Q5_K row w times activation row r (a[r*stride:],",
		"Q8_K) for r < 4, bit for bit gemvQ5_KVNNI's, unpacking each weight super-block once.",
		"It needs AVX-512 F, BW and VNNI.")
	nb := c.Load(c.Param("nb"), c.GP64())
	x := c.Load(c.Param("w").Base(), c.GP64()).(reg.GPVirtual)
	y := avoutil.RowPointers(c, 4)
	k := newQK512(c, true)
	acc := zeroYMMs(c, 4)
	accm := make([]reg.VecVirtual, 4)
	for r := range accm {
		accm[r] = c.XMM()
		c.VMOVDQU32(kq512.zero.Offset(0), accm[r])
	}
	c.TESTQ(nb, nb)
	c.JZ(LabelRef("Q5_Kx4_done"))
	c.Label("Q5_Kx4_block")
	b := k.weights(x)
	for r := range acc {
		k.row(b, x, y[r].(reg.GPVirtual), acc[r], accm[r])
	}
	avoutil.NextKQBlock(c, x, 176, y, nb, "Q5_Kx4_block", "Q5_Kx4_done")
	dst := c.Load(c.Param("dst"), c.GP64())
	for r := range acc {
		sum := avoutil.KQRowSum(c, acc[r], accm[r])
		c.VMOVSS(sum, Mem{Base: dst, Disp: 4 * r})
	}
	c.VZEROUPPER()
	c.RET()
}

// dotQ6K512 is the Q6_K super-block body. Block (210 bytes): ql[128] at 0,
// qh[64] at 128, i8 scales[16] at 192, f16 d at 208. ql chunk n (64 bytes)
// holds in its low nibbles elements 128n+0..63 and in its high nibbles
// 128n+64..127; qh's 32 bytes for n, copied into both 256-bit halves and
// shifted per half, give the two high bits of each.
func dotQ6K512(c *build.Context, x, y reg.GPVirtual, acc, _ reg.VecVirtual) func() {
	k := q6K512Consts(c)
	return func() { q6K512Block(c, k, x, []reg.Register{y}, []reg.VecVirtual{acc}) }
}

// q6K512Consts loads the Q6_K kernels' constant vectors: the nibble and
// 0x30 masks, the per-half shifts of qh and the four scale permutations.
func q6K512Consts(c *build.Context) []reg.VecVirtual {
	k := make([]reg.VecVirtual, 8)
	for i, m := range []Mem{kq512.nib, kq512.m30, kq512.shlQ6, kq512.shrQ6,
		kq512.permQ6, kq512.permQ6.Offset(64), kq512.permQ6.Offset(128), kq512.permQ6.Offset(192)} {
		k[i] = c.ZMM()
		c.VMOVDQU64(m, k[i])
	}
	return k
}

// q6K512Block emits one Q6_K super-block (x) against the Q8_K blocks y[r]
// of len(y) activation rows, into their eight float lanes acc[r]: the
// weights are unpacked once for all rows, and each row's steps are the
// one-row kernel's.
func q6K512Block(c *build.Context, k []reg.VecVirtual, x reg.Register, y []reg.Register, acc []reg.VecVirtual) {
	nib, m30, shl, shr, perm := k[0], k[1], k[2], k[3], k[4:]
	dh := c.GP32()
	c.MOVWLZX(Mem{Base: x, Disp: 208}, dh) // the half alone: vcvtph2ps from memory would read past the last block
	dw := c.XMM()
	c.VMOVD(dh, dw)
	c.VCVTPH2PS(dw, dw)
	sc := c.YMM()
	c.VPMOVSXBW(Mem{Base: x, Disp: 192}, sc) // 16 int16 scales
	scm := c.YMM()
	c.VPMULLW(kq512.m32w, sc, scm) // -32·sc: the correction's factors
	sumi := make([]reg.VecVirtual, len(y))
	for n := 0; n < 2; n++ {
		ql, qh := c.ZMM(), c.ZMM()
		c.VMOVDQU64(Mem{Base: x, Disp: 64 * n}, ql)
		c.VBROADCASTI64X4(Mem{Base: x, Disp: 128 + 32*n}, qh)
		lo, hi, hl, hh := c.ZMM(), c.ZMM(), c.ZMM(), c.ZMM()
		c.VPANDD(nib, ql, lo)
		c.VPSRLW(Imm(4), ql, hi)
		c.VPANDD(nib, hi, hi)
		c.VPSLLVW(shl, qh, hl)               // bits 0,1 | 2,3 at 4,5
		c.VPSRLVW(shr, qh, hh)               // bits 4,5 | 6,7 at 4,5
		c.VPTERNLOGD(Imm(0xf8), m30, hl, lo) // lo | hl&0x30
		c.VPTERNLOGD(Imm(0xf8), m30, hh, hi)
		for p, v := range []reg.VecVirtual{lo, hi} {
			s := c.ZMM()
			c.VPERMW(sc.AsZ(), perm[2*n+p], s)
			for r := range y {
				prod := c.ZMM()
				c.VPMADDUBSW(Mem{Base: y[r], Disp: 4 + 128*n + 64*p}, v, prod)
				sumi[r] = scaled(c, sumi[r], s, prod)
			}
		}
	}
	for r := range y {
		f := sumHalves(c, sumi[r])
		// f += -32·(sc[2k]·bs[2k] + sc[2k+1]·bs[2k+1]), the quants' offset:
		// one vpdpwssd, the same integers as a multiply, shift and subtract.
		vnniMem(c, "VPDPWSSD", Mem{Base: y[r], Disp: 260}, scm, f)
		c.VCVTDQ2PS(f, f)
		dx, d := c.XMM(), c.YMM()
		c.VMULSS(Mem{Base: y[r]}, dw, dx) // d_w·d_y
		c.VBROADCASTSS(dx, d)
		c.VFMADD231PS(f, d, acc[r])
	}
}

// q6KRows4 emits dotQ6_Kx4VNNI: one Q6_K weight row against four Q8_K
// activation rows (stride bytes apart), each result gemvQ6_KVNNI's bit for
// bit, the weights unpacked once per super-block for the four.
func q6KRows4(c *build.Context) {
	c.Function("dotQ6_Kx4VNNI")
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr("func(nb int, w, a []byte, stride int, dst *[4]float32)")
	c.Doc("dotQ6_Kx4VNNI sets dst[r] to the Q6_K row w times activation row r (a[r*stride:],",
		"Q8_K) for r < 4, bit for bit gemvQ6_KVNNI's, unpacking each weight super-block once.",
		"It needs AVX-512 F, BW and VNNI.")
	nb := c.Load(c.Param("nb"), c.GP64())
	x := c.Load(c.Param("w").Base(), c.GP64())
	y := avoutil.RowPointers(c, 4)
	k := q6K512Consts(c)
	acc := zeroYMMs(c, 4)
	c.TESTQ(nb, nb)
	c.JZ(LabelRef("Q6_Kx4_done"))
	c.Label("Q6_Kx4_block")
	q6K512Block(c, k, x, y, acc)
	avoutil.NextKQBlock(c, x, 210, y, nb, "Q6_Kx4_block", "Q6_Kx4_done")
	dst := c.Load(c.Param("dst"), c.GP64())
	for r := range acc {
		sum := avoutil.HSumFloat8(c, acc[r])
		c.VMOVSS(sum, Mem{Base: dst, Disp: 4 * r})
	}
	c.VZEROUPPER()
	c.RET()
}

// Q4_K group kernels (kern's Packed, eight Q4_K rows interleaved at load).
// A group's super-block (1184 bytes) is
//
//	f16 d[8] at 0, f16 dmin[8] at 16 (row r at 2r),
//	u8 sc[8][8] at 32, u8 mn[8][8] at 96 (sub-block s, row r at 8s+r),
//	qs at 160: the rows' quant bytes 4t..4t+3 of 32-byte group g (low
//	nibbles: sub-block 2g, high: 2g+1) at 160+256g+32t+4r.
//
// One int32 lane per row: vpdpbusd multiplies four of a row's quants by
// the four activation bytes broadcast to every lane, so each sub-block's
// sum is formed for eight rows at once, times the rows' scales (vpmulld);
// the minima's Σ mn[s]·(bs[2s]+bs[2s+1]) is one vpdpwssd per sub-block
// with the pair of activation block sums broadcast. Per row and super-block
// the float steps are
//
//	acc = fma(d_y·d_w, float(isum), acc); acc = fma(-(d_y·dmin_w), float(msum), acc)
//
// in one chain per row (kern's emulation: emulateQ4KGroup). The group's
// super-block is avoutil.Q4KGroupBytes.

// vnniMem emits the VNNI instruction op with a full-width memory operand:
// op m, q, acc (acc += the products of m and q).
func vnniMem(c *build.Context, op string, m Mem, q, acc reg.VecVirtual) {
	c.Instruction(&ir.Instruction{
		Opcode:   op,
		Operands: []Op{m, q, acc},
		Inputs:   []Op{m, q, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512VNNI", "AVX512VL"},
	})
}

// vpdpwssdBcst emits VPDPWSSD.BCST m, q, acc: acc[i] += q[2i]·m[0] +
// q[2i+1]·m[1] (int16 words, the two at m broadcast to every lane).
func vpdpwssdBcst(c *build.Context, m Mem, q, acc reg.VecVirtual) {
	vnniBcst(c, "VPDPWSSD", m, q, acc)
}

// q4KGroup emits gemvQ4_Kx8VNNI (rows 1) or gemmQ4_Kx8x<rows>VNNI: the
// group's eight weight rows against rows activation rows (Q8_K, stride
// bytes apart), dst[r*ld + j] for weight row j.
//
// With q5, gemvQ5_Kx8VNNI or gemmQ5_Kx8x<rows>VNNI: the same over a packed
// Q5_K group (avoutil.Q5KGroupBytes), whose quants take their fifth bit
// from the qh vectors after the Q4_K layout: vector t (at 1184+32t) holds
// row r's qh[4t..4t+3] at bytes 4r.., and the low (high) nibbles of group
// g take its bit 2g (2g+1) as bit 4, ggml's order. The integer and float
// steps are the Q4_K kernel's (kern's emulateQ4KGroup with Q5_K codes).
func q4KGroup(c *build.Context, rows int, mask Mem, q5 bool) {
	typ, blockBytes := "Q4_K", avoutil.Q4KGroupBytes
	if q5 {
		typ, blockBytes = "Q5_K", avoutil.Q5KGroupBytes
	}
	name := avoutil.KQGroupFunction(c, typ, "VNNI", rows, "kernvnni", "AVX-512 VNNI and VL, FMA and F16C")
	lbl := func(s string) string { return name + "_" + s }
	// The one-row loop goes at the rate of its loads (every vpdpbusd
	// broadcasts one; on Zen 4 thirty-two loads more or fewer per
	// super-block cost or saved about ten cycles), so its constants live in
	// registers and its sums start from the zero idiom, not from memory:
	// with that and the two changes below, Q4_K 97 → 80 and Q5_K 151 → 117
	// cycles per super-block (BenchmarkGroupCycles, Zen 4).
	shufSc, shufMn := c.YMM(), c.YMM()
	c.VMOVDQU32(kq512.shufSc, shufSc)
	c.VMOVDQU32(kq512.shufMn, shufMn)
	// Q4_K's high nibbles are taken in place (hin: q & 0xf0, sixteen times
	// the code) and the sub-block sums shifted back, exactly: one
	// instruction per vector instead of a shift and a mask (86 → 84
	// cycles). Q5_K's fifth bit would land on bit 8, so it shifts and
	// needs m10 instead.
	var hin, m10 reg.VecVirtual
	if q5 {
		m10 = c.YMM()
		c.VMOVDQU32(kq512.m10, m10)
	} else {
		hin = c.YMM()
		c.VMOVDQU32(kq512.hin, hin)
	}

	nb := c.Load(c.Param("nb"), c.GP64())
	x := c.Load(c.Param("w").Base(), c.GP64())
	y := avoutil.RowPointers(c, rows)
	acc := zeroYMMs(c, rows)
	nib := c.YMM()
	c.VMOVDQU32(mask, nib)
	c.TESTQ(nb, nb)
	c.JZ(LabelRef(lbl("done")))
	c.Label(lbl("block"))
	// The minima first: their eight dependent vpdpwssd then overlap the
	// sub-block sums rather than end the block (84 → 81 cycles).
	msum := make([]reg.VecVirtual, rows)
	for r := range msum {
		msum[r] = c.YMM()
		zeroReg(c, msum[r])
	}
	for s := 0; s < 8; s++ {
		m := c.YMM()
		c.VPBROADCASTQ(Mem{Base: x, Disp: 96 + 8*s}, m)
		c.VPSHUFB(shufMn, m, m) // mn[s][r] in both words of lane r
		for r := range rows {
			vpdpwssdBcst(c, Mem{Base: y[r], Disp: 260 + 4*s}, m, msum[r])
		}
	}
	// One row of Q5_K keeps the block's eight qh vectors in registers for
	// its four sub-block pairs instead of loading each four times.
	var qh []reg.VecVirtual
	if q5 && rows == 1 {
		qh = make([]reg.VecVirtual, 8)
		for t := range qh {
			qh[t] = c.YMM()
			c.VMOVDQU32(Mem{Base: x, Disp: avoutil.Q4KGroupBytes + 32*t}, qh[t])
		}
	}
	isum := make([]reg.VecVirtual, rows)
	for g := 0; g < 4; g++ {
		// Each sub-block sum is split over parts chains (integer adds are
		// exact): eight dependent vpdpbusd would otherwise bound the loop.
		parts := 1
		if rows == 1 {
			parts = 2
		}
		sl, sh := make([][]reg.VecVirtual, rows), make([][]reg.VecVirtual, rows)
		for r := range rows {
			sl[r], sh[r] = make([]reg.VecVirtual, parts), make([]reg.VecVirtual, parts)
			for i := range parts {
				sl[r][i], sh[r][i] = c.YMM(), c.YMM()
				zeroReg(c, sl[r][i])
				zeroReg(c, sh[r][i])
			}
		}
		for t := 0; t < 8; t++ {
			if rows == 1 && 8*g+t < (blockBytes+63)/64 {
				// Decode streams the group: one line of the block
				// avoutil.KQPrefetchBlocks ahead per step, as in offsetGroup.
				avoutil.StreamPrefetch(c, Mem{Base: x, Disp: avoutil.KQPrefetchBlocks*blockBytes + 64*(8*g+t)})
			}
			q, lo, hi := c.YMM(), c.YMM(), c.YMM()
			c.VMOVDQU32(Mem{Base: x, Disp: 160 + 256*g + 32*t}, q)
			c.VPANDD(nib, q, lo)
			if q5 {
				c.VPSRLW(Imm(4), q, hi)
				c.VPANDD(nib, hi, hi)
				var h reg.VecVirtual
				if qh != nil {
					h = qh[t]
				} else {
					h = c.YMM()
					c.VMOVDQU32(Mem{Base: x, Disp: avoutil.Q4KGroupBytes + 32*t}, h)
				}
				fifthBits(c, g, h, lo, hi, m10, c.YMM)
			} else {
				c.VPANDD(hin, q, hi)
			}
			for r := range rows {
				vpdpbusdBcst(c, Mem{Base: y[r], Disp: 4 + 64*g + 4*t}, lo, sl[r][t%parts])
				vpdpbusdBcst(c, Mem{Base: y[r], Disp: 36 + 64*g + 4*t}, hi, sh[r][t%parts])
			}
		}
		for r := range rows {
			for _, p := range sl[r][1:] {
				c.VPADDD(p, sl[r][0], sl[r][0])
			}
			for _, p := range sh[r][1:] {
				c.VPADDD(p, sh[r][0], sh[r][0])
			}
			if !q5 {
				c.VPSRAD(Imm(4), sh[r][0], sh[r][0]) // 16·Σ, exact
			}
		}
		scl, sch := c.YMM(), c.YMM()
		c.VPBROADCASTQ(Mem{Base: x, Disp: 32 + 16*g}, scl)
		c.VPSHUFB(shufSc, scl, scl)
		c.VPBROADCASTQ(Mem{Base: x, Disp: 40 + 16*g}, sch)
		c.VPSHUFB(shufSc, sch, sch)
		for r := range rows {
			l, h := sl[r][0], sh[r][0]
			c.VPMULLD(scl, l, l)
			c.VPMULLD(sch, h, h)
			if g == 0 {
				isum[r] = c.YMM()
				c.VPADDD(h, l, isum[r])
			} else {
				c.VPADDD(l, isum[r], isum[r])
				c.VPADDD(h, isum[r], isum[r])
			}
		}
	}
	avoutil.Q4KGroupFloats(c, x, y, isum, msum, acc)
	avoutil.NextKQBlock(c, x, blockBytes, y, nb, lbl("block"), lbl("done"))
	avoutil.StoreGroupRows(c, acc)
	c.VZEROUPPER()
	c.RET()
}

// zeroYMMs returns n zeroed YMM registers, loaded from memory: the kernel
// above uses Y16..Y31, which VEX cannot name, and avo does not see EVEX's
// vpxord of a register with itself as a fresh definition.
func zeroYMMs(c *build.Context, n int) []reg.VecVirtual {
	z := make([]reg.VecVirtual, n)
	for i := range z {
		z[i] = c.YMM()
		c.VMOVDQU32(kq512.zero, z[i])
	}
	return z
}

// q4KGroupWide emits gemmQ4_Kx8x8VNNI (groups 1, YMM) or
// gemmQ4_Kx16x8VNNI (groups 2, ZMM): eight activation rows against one
// packed Q4_K group, or against two adjacent ones (the second gstride bytes
// after the first) in the two 256-bit halves of each ZMM register, weight
// row j of the pair in lane j. The steps per lane are q4KGroup's: the
// sub-block sums (16 vpdpbusd chains, one per activation row and nibble
// half), times the scales, the minima's vpdpwssd, then the same two fmas
// per row and super-block in block order, so every result is the other
// group kernels' bit for bit. The sixteen sums and eight isum take most of
// the 32 vector registers, so the float accumulators live in the frame.
// With q5, the same for packed Q5_K groups (q4KGroup's q5 form).
func q4KGroupWide(c *build.Context, groups int, q5 bool) {
	const rows = 8
	width := 32 * groups // bytes per vector
	typ, blockBytes := "Q4_K", avoutil.Q4KGroupBytes
	if q5 {
		typ, blockBytes = "Q5_K", avoutil.Q5KGroupBytes
	}
	name := "gemm" + typ + "x8x8VNNI"
	sig := "func(nb int, w, a []byte, stride int, dst []float32, ld int)"
	doc := []string{name + " multiplies a packed group of eight " + typ + " rows by 8 Q8_K",
		"activation rows (dst[r*ld:r*ld+8] for row a[r*stride:]), bit for bit gemv" + typ + "x8VNNI's",
		"(see codegen/goasm/gen/kernvnni's kquants.go). It needs AVX-512 F, BW, VL and VNNI."}
	if groups == 2 {
		name = "gemm" + typ + "x16x8VNNI"
		sig = "func(nb int, w []byte, gstride int, a []byte, stride int, dst []float32, ld int)"
		doc = []string{name + " multiplies two packed groups of eight " + typ + " rows (w and",
			"w[gstride:]) by 8 Q8_K activation rows (dst[r*ld:r*ld+16] for row a[r*stride:]), bit",
			"for bit gemv" + typ + "x8VNNI's per group (see codegen/goasm/gen/kernvnni's kquants.go).",
			"It needs AVX-512 F, BW, VL and VNNI."}
	}
	avoutil.Function(c, name, sig, doc...)
	lbl := func(s string) string { return name + "_" + s }
	vec := func() reg.VecVirtual {
		if groups == 2 {
			return c.ZMM()
		}
		return c.YMM()
	}
	acc := c.AllocLocal(width * rows)
	nb := c.Load(c.Param("nb"), c.GP64())
	gp := newGroups(c, groups)
	x, second, load := gp.x, gp.second, gp.load
	y := avoutil.RowPointers(c, rows)
	// bytes8 fills v with the 8 bytes at x+disp in every quadword (of each
	// group's half), for vpshufb with the doubled tables.
	bytes8 := func(disp int, v reg.VecVirtual) {
		c.VPBROADCASTQ(Mem{Base: x, Disp: disp}, v)
		if groups == 2 {
			t := c.YMM()
			c.VPBROADCASTQ(second(disp), t)
			c.VINSERTI64X4(Imm(1), t, v, v)
		}
	}
	zero := kq512.zero64
	nib := vec()
	c.VMOVDQU32(kq512.nib, nib)
	z := vec()
	c.VMOVDQU32(zero, z)
	zeroStackRows(c, acc, width, rows, z)
	c.TESTQ(nb, nb)
	c.JZ(LabelRef(lbl("done")))
	c.Label(lbl("block"))
	isum := make([]reg.VecVirtual, rows)
	for g := 0; g < 4; g++ {
		sl, sh := make([]reg.VecVirtual, rows), make([]reg.VecVirtual, rows)
		for r := range rows {
			sl[r], sh[r] = vec(), vec()
			zeroReg(c, sl[r])
			zeroReg(c, sh[r])
		}
		for t := 0; t < 8; t++ {
			q, lo, hi := vec(), vec(), vec()
			load(160+256*g+32*t, q)
			c.VPANDD(nib, q, lo)
			c.VPSRLW(Imm(4), q, hi)
			c.VPANDD(nib, hi, hi)
			if q5 {
				h := vec()
				load(avoutil.Q4KGroupBytes+32*t, h)
				fifthBits(c, g, h, lo, hi, kq512.m10, vec)
			}
			for r := range rows {
				vpdpbusdBcst(c, Mem{Base: y[r], Disp: 4 + 64*g + 4*t}, lo, sl[r])
				vpdpbusdBcst(c, Mem{Base: y[r], Disp: 36 + 64*g + 4*t}, hi, sh[r])
			}
		}
		scl, sch := vec(), vec()
		bytes8(32+16*g, scl)
		c.VPSHUFB(kq512.shufSc64, scl, scl)
		bytes8(40+16*g, sch)
		c.VPSHUFB(kq512.shufSc64, sch, sch)
		for r := range rows {
			l, h := sl[r], sh[r]
			c.VPMULLD(scl, l, l)
			c.VPMULLD(sch, h, h)
			if g == 0 {
				isum[r] = vec()
				c.VPADDD(h, l, isum[r])
			} else {
				c.VPADDD(l, isum[r], isum[r])
				c.VPADDD(h, isum[r], isum[r])
			}
		}
	}
	msum := make([]reg.VecVirtual, rows)
	for r := range msum {
		msum[r] = vec()
		zeroReg(c, msum[r])
	}
	for s := 0; s < 8; s++ {
		m := vec()
		bytes8(96+8*s, m)
		c.VPSHUFB(kq512.shufMn64, m, m) // mn[s][j] in both words of lane j
		for r := range rows {
			vpdpwssdBcst(c, Mem{Base: y[r], Disp: 260 + 4*s}, m, msum[r])
		}
	}
	// The float steps (avoutil.Q4KGroupFloats with the accumulators in
	// the frame): d and dmin of the group(s) as 8 or 16 floats.
	dw, dmw := vec(), vec()
	for i, v := range []reg.VecVirtual{dw, dmw} {
		if groups == 1 {
			c.VCVTPH2PS(Mem{Base: x, Disp: 16 * i}, v)
			continue
		}
		h := c.YMM()
		c.VBROADCASTI32X4(Mem{Base: x, Disp: 16 * i}, h)
		c.VINSERTI32X4(Imm(1), second(16*i), h, h)
		c.VCVTPH2PS(h, v)
	}
	for r := range rows {
		dy, d, dm, a := vec(), vec(), vec(), vec()
		c.VBROADCASTSS(Mem{Base: y[r]}, dy)
		c.VMULPS(dw, dy, d)
		c.VMULPS(dmw, dy, dm)
		c.VMOVUPS(acc.Offset(width*r), a)
		c.VCVTDQ2PS(isum[r], isum[r])
		c.VFMADD231PS(isum[r], d, a)
		c.VCVTDQ2PS(msum[r], msum[r])
		c.VFNMADD231PS(msum[r], dm, a)
		c.VMOVUPS(a, acc.Offset(width*r))
	}
	avoutil.NextKQBlock(c, x, blockBytes, y, nb, lbl("block"), lbl("done"))
	storeStackRows(c, acc, width, rows, vec)
	c.VZEROUPPER()
	c.RET()
}

// zeroReg emits VPXORD v, v, v declared as writing v only: the zero idiom
// (no load, no dependency), which avo would otherwise take as reading v.
func zeroReg(c *build.Context, v reg.VecVirtual) {
	c.Instruction(&ir.Instruction{
		Opcode:   "VPXORD",
		Operands: []Op{v, v, v},
		Outputs:  []Op{v},
		ISA:      []string{"AVX512F"},
	})
}

// Q6_K group kernels (kern's Packed, eight Q6_K rows interleaved at load).
// A group's super-block (1680 bytes) is
//
//	f16 d[8] at 0, int8 sc[16][8] at 16 (sub-block s, row r at 8s+r),
//	per half n at 144+768n three runs of eight 32-byte vectors t whose
//	bytes 4r..4r+3 are row r's ql[64n+4t…] (A, at +32t), ql[64n+32+4t…]
//	(B, at +256+32t) and qh[32n+4t…] (H, at +512+32t).
//
// Vector t of each run holds element positions l = 4t..4t+3 of the half's
// four 32-element chunks: chunk 0 is A's low nibbles with H's bits 0-1 as
// bits 4-5, chunk 1 B's low nibbles with bits 2-3, chunk 2 A's high
// nibbles with bits 4-5, chunk 3 B's high nibbles with bits 6-7 (ggml's
// order). The codes are unsigned (0..63), so vpdpbusd takes them against
// the activation bytes broadcast to every row's lane; the −32 of the
// weights is −32·Σ_s sc[s]·bs[s], one vpdpwssd per pair of sub-blocks with
// the rows' two scales as the words of each lane. Per row and super-block
//
//	isum = Σ sc[s]·Σ code·y − 32·Σ sc[s]·bs[s]   (exact int32)
//	acc = fma(d_y·d_w, float(isum), acc)
//
// in one chain per row (kern's emulateQ6KGroup).

// An offsetCodes is a k-quant whose packed group kernels are offsetGroup's:
// unsigned codes (the weight is code − 2^offShift, or with mins Q2_K's
// d·sc·code − dmin·m) in sixteen 16-element sub-blocks with int8 scales
// [sub-block][row] at 16 (mins: the scale bytes at 32), one f16 d per row
// at 0, and per half n and position vector t (element positions 4t..4t+3 of
// the half's four 32-element chunks, four bytes per row in turn) four code
// vectors, one per chunk.
type offsetCodes struct {
	typ        string
	blockBytes int
	offShift   uint64 // 5: Q6_K's 32; 2: Q3_K's 4
	// mins: Q2_K's form instead of the offset: f16 dmin[8] at 16 and the
	// scale bytes at 32, each a 4-bit scale (low nibble) and a 4-bit
	// minimum m (high); the weight is d·sc·code − dmin·m.
	mins bool
	// consts gives the constant vectors codes uses (kq512's, kq23's, set
	// when the kernels are generated), loaded into registers before the
	// loop.
	consts func() []Mem
	// codes emits the code vectors of position vector t of half n of the
	// chunks want names (all four, or two where eight activation rows'
	// sums would not fit the registers with all four), passing each to use
	// with its chunk.
	codes func(c *build.Context, g groupsOperand, k []reg.VecVirtual, vec func() reg.VecVirtual, n, t int, want []int, use func(ch int, code reg.VecVirtual))
}

// q6Codes is Q6_K's offsetCodes (layout above).
var q6Codes = offsetCodes{
	typ: "Q6_K", blockBytes: avoutil.Q6KGroupBytes, offShift: 5,
	consts: func() []Mem { return []Mem{kq512.nib, kq512.m30} },
	codes: func(c *build.Context, g groupsOperand, k []reg.VecVirtual, vec func() reg.VecVirtual, n, t int, want []int, use func(ch int, code reg.VecVirtual)) {
		nib, m30 := k[0], k[1]
		base := 144 + 768*n
		h := vec()
		g.load(base+512+32*t, h)
		for run, chunks := range [2][2]int{{0, 2}, {1, 3}} {
			if !slices.Contains(want, chunks[0]) && !slices.Contains(want, chunks[1]) {
				continue
			}
			q := vec()
			g.load(base+256*run+32*t, q)
			for _, ch := range chunks {
				if !slices.Contains(want, ch) {
					continue
				}
				code, hb := vec(), h
				if ch < 2 {
					c.VPANDD(nib, q, code)
				} else {
					c.VPSRLW(Imm(4), q, code)
					c.VPANDD(nib, code, code)
				}
				switch ch { // qh bits 2ch, 2ch+1 to bits 4, 5
				case 0:
					hb = vec()
					c.VPSLLW(Imm(4), h, hb)
				case 1:
					hb = vec()
					c.VPSLLW(Imm(2), h, hb)
				case 3:
					hb = vec()
					c.VPSRLW(Imm(2), h, hb)
				}
				// code | hb&0x30 in one instruction, not a mask and
				// an or (137 → 123 cycles per super-block,
				// BenchmarkGroupCycles, Zen 4)
				c.VPTERNLOGD(Imm(0xf8), m30, hb, code)
				use(ch, code)
			}
		}
	},
}

// Q3_K group kernels (kern's Packed, eight Q3_K rows interleaved at load).
// A group's super-block (avoutil.Q3KGroupBytes, 912) is
//
//	f16 d[8] at 0, int8 sc[16][8] at 16 (the 6-bit scales minus 32,
//	sub-block s, row r at 16+8s+r), eight 32-byte vectors t at 144+32t
//	whose bytes 4r..4r+3 are row r's hmask[4t…], and per half n eight at
//	400+256n+32t holding row r's qs[32n+4t…].
//
// Chunk j of half n (elements 128n+32j+l) has code (qs[32n+l]>>2j)&3 |
// (hmask[l]>>(4n+j)&1)<<2, 0..7 (ggml's q − 4 when the high bit is clear
// is code − 4), so vector t of each gives positions l = 4t..4t+3 of the
// half's four chunks, as Q6_K's layout does.
var q3Codes = offsetCodes{
	typ: "Q3_K", blockBytes: avoutil.Q3KGroupBytes, offShift: 2,
	consts: func() []Mem { return []Mem{kq23.m03, kq23.m04} },
	codes: func(c *build.Context, g groupsOperand, k []reg.VecVirtual, vec func() reg.VecVirtual, n, t int, want []int, use func(ch int, code reg.VecVirtual)) {
		m3, m4 := k[0], k[1]
		q, h := vec(), vec()
		g.load(400+256*n+32*t, q)
		g.load(144+32*t, h)
		for _, j := range want {
			code := twoBits(c, q, j, m3, vec)
			hb := avoutil.ShiftBit(c, 4*n+j, 2, h, vec())
			c.VPTERNLOGD(Imm(0xf8), m4, hb, code) // code | hb&4
			use(j, code)
		}
	},
}

// Q2_K group kernels (kern's Packed, eight Q2_K rows interleaved at load).
// A group's super-block (8·84 = 672 bytes, as many as the rows') is
//
//	f16 d[8] at 0, f16 dmin[8] at 16, the scale bytes [16][8] at 32
//	(sub-block s, row r at 32+8s+r: scale | m<<4), and per half n eight
//	32-byte vectors at 160+256n+32t holding row r's qs[32n+4t…].
//
// Chunk j of half n has code (qs[32n+l]>>2j)&3; per row and super-block
//
//	isum = Σ sc[s]·Σ code·y, msum = Σ m[s]·bs[s]   (exact int32)
//	acc = fma(d_y·d_w, float(isum), acc)
//	acc = fma(−(d_y·dmin_w), float(msum), acc)
//
// in one chain per row (kern's emulateQ2KGroup), the Q4_K kernels' float
// steps.
var q2Codes = offsetCodes{
	typ: "Q2_K", blockBytes: avoutil.Q2KGroupBytes, mins: true,
	consts: func() []Mem { return []Mem{kq23.m03} },
	codes: func(c *build.Context, g groupsOperand, k []reg.VecVirtual, vec func() reg.VecVirtual, n, t int, want []int, use func(ch int, code reg.VecVirtual)) {
		q := vec()
		g.load(160+256*n+32*t, q)
		for _, j := range want {
			use(j, twoBits(c, q, j, k[0], vec))
		}
	},
}

// twoBits returns bits 2j, 2j+1 of each byte of q as a new vector's bytes
// (m3: 0x03 bytes), the 2-bit codes of chunk j of Q2_K and Q3_K.
func twoBits(c *build.Context, q reg.VecVirtual, j int, m3 reg.VecVirtual, vec func() reg.VecVirtual) reg.VecVirtual {
	code := vec()
	if j == 0 {
		c.VPANDD(m3, q, code)
	} else {
		c.VPSRLW(Imm(uint64(2*j)), q, code)
		c.VPANDD(m3, code, code)
	}
	return code
}

// offsetGroup emits k's gemv<typ>x8VNNI (rows 1) or gemm<typ>x8x<rows>VNNI:
// the group's eight weight rows against rows activation rows (Q8_K, stride
// bytes apart), dst[r*ld + j] for weight row j; with groups 2,
// gemm<typ>x16x<rows>VNNI: two adjacent groups (the second gstride bytes
// after the first) in the two 256-bit halves of ZMM registers, weight row j
// of the pair in lane j, dst[r*ld + j] for j < 16. Every lane's steps are
// the same, so the pair kernel gives the group kernels' bits.
func offsetGroup(c *build.Context, k offsetCodes, rows, groups int) {
	name := "gemv" + k.typ + "x8VNNI"
	sig := "func(nb int, w, a []byte, dst []float32)"
	what := "a packed group of eight " + k.typ + " rows"
	switch {
	case groups == 2:
		name = fmt.Sprintf("gemm%sx16x%dVNNI", k.typ, rows)
		sig = "func(nb int, w []byte, gstride int, a []byte, stride int, dst []float32, ld int)"
		what = "two packed groups of eight " + k.typ + " rows (w and w[gstride:])"
	case rows > 1:
		name = fmt.Sprintf("gemm%sx8x%dVNNI", k.typ, rows)
		sig = "func(nb int, w, a []byte, stride int, dst []float32, ld int)"
	}
	avoutil.Function(c, name, sig,
		fmt.Sprintf("%s multiplies %s by %d Q8_K", name, what, rows),
		"activation rows (see codegen/goasm/gen/kernvnni's kquants.go). It needs",
		"AVX-512 F, BW, DQ, VL and VNNI.")
	lbl := func(s string) string { return name + "_" + s }
	vec := func() reg.VecVirtual {
		if groups == 2 {
			return c.ZMM()
		}
		return c.YMM()
	}
	zeros := func(n int) []reg.VecVirtual {
		z := make([]reg.VecVirtual, n)
		for i := range z {
			z[i] = vec()
			zeroReg(c, z[i])
		}
		return z
	}
	nb := c.Load(c.Param("nb"), c.GP64())
	gp := newGroups(c, groups)
	x, second := gp.x, gp.second
	y := avoutil.RowPointers(c, rows)
	// Eight rows' float sums live in the frame (as q4KGroupWide's), and
	// their chunk sums are taken two chunks at a time: all in registers,
	// 4·8 chunk sums and the rest would be more than the 32 there are.
	inFrame := rows > 4
	var acc []reg.VecVirtual
	var accMem Mem
	width := 32 * groups
	if inFrame {
		accMem = c.AllocLocal(width * rows)
		zeroStackRows(c, accMem, width, rows, zeros(1)[0])
	} else {
		acc = zeros(rows)
	}
	passes := [][]int{{0, 1, 2, 3}}
	if inFrame {
		passes = [][]int{{0, 2}, {1, 3}}
	}
	// A chunk's scales widen to dwords: signed offsets, or (mins) the
	// unsigned byte whose low nibble is the scale.
	extend := c.VPMOVSXBD
	if k.mins {
		extend = c.VPMOVZXBD
	}
	var consts []reg.VecVirtual
	for _, m := range k.consts() {
		consts = append(consts, vec())
		c.VMOVDQU32(m, consts[len(consts)-1])
	}
	c.TESTQ(nb, nb)
	c.JZ(LabelRef(lbl("done")))
	c.Label(lbl("block"))
	// isum = −offset·Σ_j (sc[2j]·bs[2j] + sc[2j+1]·bs[2j+1]); with mins,
	// isum = 0 and msum = Σ_j (m[2j]·bs[2j] + m[2j+1]·bs[2j+1]).
	isum := zeros(rows)
	corr, scOff := isum, 16
	if k.mins {
		corr, scOff = zeros(rows), 32
	}
	for j := 0; j < 8; j++ {
		w := vec()
		var p reg.VecVirtual
		if groups == 2 {
			p = c.YMM()
			c.VBROADCASTI32X4(Mem{Base: x, Disp: scOff + 16*j}, p)
			c.VINSERTI32X4(Imm(1), second(scOff+16*j), p, p)
			c.VPSHUFB(kq512.pairQ6x2, p, p)
		} else {
			p = c.XMM()
			c.VMOVDQU32(Mem{Base: x, Disp: scOff + 16*j}, p)
			c.VPSHUFB(kq512.pairQ6, p, p)
		}
		if k.mins {
			c.VPMOVZXBW(p, w) // lane r: the scale bytes of 2j and 2j+1
			c.VPSRLW(Imm(4), w, w)
		} else {
			c.VPMOVSXBW(p, w) // lane r: the words sc[2j][r], sc[2j+1][r]
		}
		for r := range rows {
			vpdpwssdBcst(c, Mem{Base: y[r], Disp: 260 + 4*j}, w, corr[r])
		}
	}
	if !k.mins {
		z := zeros(1)[0]
		for r := range rows {
			c.VPSLLD(Imm(k.offShift), isum[r], isum[r])
			c.VPSUBD(isum[r], z, isum[r])
		}
	}
	for n := 0; n < 2; n++ {
		for tr := 0; tr < 2; tr++ { // element positions 0..15, then 16..31
			for _, want := range passes {
				sums := make([][4]reg.VecVirtual, rows)
				for r := range rows {
					for _, ch := range want {
						sums[r][ch] = zeros(1)[0]
					}
				}
				for t := 4 * tr; t < 4*tr+4; t++ {
					if rows == 1 {
						// Decode streams the group: the next blocks'
						// lines are asked for ahead, each once, spread
						// over the 16 steps, or the row kernel it
						// replaces streams faster (Q6_K: 0.88 against
						// 0.60 of the read bandwidth, BenchmarkKQuantStream
						// then). Every instruction counts here: decode
						// streams faster with fewer (see gemvQ4_0Lean),
						// and two prefetches a step asked for Q6_K's 27
						// lines 32 times.
						avoutil.PrefetchShare(c, x, avoutil.KQPrefetchBlocks*k.blockBytes, k.blockBytes, 4*(2*n+tr)+t%4, 16)
					}
					k.codes(c, gp, consts, vec, n, t, want, func(ch int, code reg.VecVirtual) {
						for r := range rows {
							vpdpbusdBcst(c, Mem{Base: y[r], Disp: 4 + 128*n + 32*ch + 4*t}, code, sums[r][ch])
						}
					})
				}
				for _, ch := range want {
					sc := vec()
					disp := scOff + 8*(8*n+2*ch+tr)
					if groups == 1 {
						extend(Mem{Base: x, Disp: disp}, sc)
					} else {
						b := c.XMM()
						c.VMOVQ(Mem{Base: x, Disp: disp}, b)
						c.VPINSRQ(Imm(1), second(disp), b, b)
						extend(b, sc)
					}
					if k.mins {
						c.VPANDD(kq512.nib, sc, sc) // the scale nibble
					}
					for r := range rows {
						c.VPMULLD(sc, sums[r][ch], sums[r][ch])
						c.VPADDD(sums[r][ch], isum[r], isum[r])
					}
				}
			}
		}
	}
	// d (and dmin) of the group(s) as 8 or 16 floats.
	f16s := func(disp int) reg.VecVirtual {
		v := vec()
		if groups == 1 {
			c.VCVTPH2PS(Mem{Base: x, Disp: disp}, v)
		} else {
			h := c.YMM()
			c.VBROADCASTI32X4(Mem{Base: x, Disp: disp}, h)
			c.VINSERTI32X4(Imm(1), second(disp), h, h)
			c.VCVTPH2PS(h, v)
		}
		return v
	}
	dw := f16s(0)
	var dmw reg.VecVirtual
	if k.mins {
		dmw = f16s(16)
	}
	for r := range rows {
		dy, d := vec(), vec()
		c.VBROADCASTSS(Mem{Base: y[r]}, dy)
		c.VMULPS(dw, dy, d)
		c.VCVTDQ2PS(isum[r], isum[r])
		a := vec()
		if inFrame {
			c.VMOVUPS(accMem.Offset(width*r), a)
		} else {
			a = acc[r]
		}
		c.VFMADD231PS(isum[r], d, a)
		if k.mins {
			dm := vec()
			c.VMULPS(dmw, dy, dm)
			c.VCVTDQ2PS(corr[r], corr[r])
			c.VFNMADD231PS(corr[r], dm, a)
		}
		if inFrame {
			c.VMOVUPS(a, accMem.Offset(width*r))
		}
	}
	avoutil.NextKQBlock(c, x, k.blockBytes, y, nb, lbl("block"), lbl("done"))
	if inFrame {
		storeStackRows(c, accMem, width, rows, vec)
	} else {
		avoutil.StoreGroupRows(c, acc)
	}
	c.VZEROUPPER()
	c.RET()
}

// fifthBits ORs the Q5_K fifth bits of group g's codes into lo (qh bit 2g)
// and hi (bit 2g+1) as bit 4, from the qh vector h: avoutil.ShiftBit's
// shift, then one vpternlogd for Q5FifthBit's mask and or (v | hb&m10; m10
// is 0x10 bytes, a register or memory). vec makes a scratch register of the
// kernel's width.
func fifthBits(c *build.Context, g int, h, lo, hi reg.VecVirtual, m10 Op, vec func() reg.VecVirtual) {
	for i, v := range []reg.VecVirtual{lo, hi} {
		hb := avoutil.ShiftBit(c, 2*g+i, 4, h, vec())
		c.VPTERNLOGD(Imm(0xf8), m10, hb, v)
	}
}

// groupsOperand is a group kernel's weights: one packed group at x, or two
// (the second gs bytes after the first, gstride) side by side in the
// halves of ZMM registers.
type groupsOperand struct {
	c      *build.Context
	x, gs  reg.Register
	groups int
}

// newGroups loads the kernel's w (and, for two groups, gstride).
func newGroups(c *build.Context, groups int) groupsOperand {
	g := groupsOperand{c: c, groups: groups, x: c.Load(c.Param("w").Base(), c.GP64())}
	if groups == 2 {
		g.gs = c.Load(c.Param("gstride"), c.GP64())
	}
	return g
}

// second is the second group's bytes at disp.
func (g groupsOperand) second(disp int) Mem { return Mem{Base: g.x, Index: g.gs, Scale: 1, Disp: disp} }

// load fills v with the 32 bytes of the group at x+disp, and with two
// groups the second one's in the high half.
func (g groupsOperand) load(disp int, v reg.VecVirtual) {
	if g.groups == 1 {
		g.c.VMOVDQU32(Mem{Base: g.x, Disp: disp}, v)
		return
	}
	// (broadcast, not a YMM load: avo would take the upper half as read
	// before written)
	g.c.VBROADCASTI64X4(Mem{Base: g.x, Disp: disp}, v)
	g.c.VINSERTI64X4(Imm(1), g.second(disp), v, v)
}
