package avoutil

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// KQGemvSignature is the signature of every k-quant matrix-vector kernel:
// dst[r] = dot of weight row r (rows rows of nb super-blocks, one after
// another in w) with the nb Q8_K blocks of a, for r < rows.
const KQGemvSignature = "func(rows, nb int, w, a []byte, dst []float32)"

// Q8KBytes is the size of a Q8_K block: f32 d; i8 qs[256] at 4; i16
// bsums[16] at 260.
const Q8KBytes = 292

// Q4KGroupBytes is a packed Q4_K group's super-block (eight rows; layout in
// codegen/goasm/gen/kernvnni's kquants.go).
const Q4KGroupBytes = 1184

// Q5KGroupBytes is a packed Q5_K group's super-block: Q4_K's layout, then
// the eight rows' qh bytes, four per row in turn (8 vectors of 32 bytes).
const Q5KGroupBytes = Q4KGroupBytes + 256

// Q6KGroupBytes is a packed Q6_K group's super-block (layout in
// codegen/goasm/gen/kernvnni's kquants.go): as many bytes as the eight rows'.
const Q6KGroupBytes = 8 * 210

// Q3KGroupBytes is a packed Q3_K group's super-block (layout in
// codegen/goasm/gen/kernvnni's kquants.go): the eight rows' bytes, with
// their 6-bit scales decoded to one byte each (128 bytes, not 96).
const Q3KGroupBytes = 8*110 + 32

// Q2KGroupBytes is a packed Q2_K group's super-block (layout in
// codegen/goasm/gen/kernvnni's kquants.go): as many bytes as the eight rows'.
const Q2KGroupBytes = 8 * 84

// KQPrefetchBlocks is how many blocks ahead of the one they multiply the
// one-row k-quant group kernels (avx2 and VNNI) prefetch (StreamPrefetch):
// decode streams the group, and the hardware prefetchers alone left the
// packed Q5_K and Q6_K kernels at 0.60–0.71 of the read bandwidth
// (BenchmarkKQuantStream's packed cases then, BenchmarkStreamVsRead now).
//
// With PREFETCHT0 (into L1), eight blocks ahead was the best distance on a
// Zen 3 VM (AVX2; Q4_K 0.97–1.01 of Q4_0's rate, Q5_K 0.95–0.99, Q6_K
// 1.00–1.04 in BenchmarkPackedStreamPaired) and as good as any on a Zen 4
// VM (AVX-512: four, six, twelve, and PREFETCHT1 at sixteen and
// thirty-two overlapped its ranges; none at all left Q5_K at 0.75–0.78).
// On an Intel Xeon VM (AVX-512, 2 MB L2 a core) it held the VNNI kernels
// under a plain read of the same bytes from memory (BenchmarkStreamVsRead,
// one thread; the read's time over the kernel's in two paired sets):
//
//	               Q4_K       Q6_K
//	T0 at 8     0.90 0.89  0.90 0.77
//	T0 at 12    0.95 0.90  0.80 0.80
//	T1 at 8     0.97 1.01  0.94 0.95
//	T1 at 16    0.99 1.01  0.97 0.94
//	T2 at 16    1.01 1.00  0.93 0.92
//	NTA at 8    0.54 0.54  0.67 0.69
//
// and in three more sets with the avx2 kernels too, T0 at 8 against T1
// at 16: VNNI Q4_K 0.95–0.96 against 1.01–1.03, Q5_K 0.93–1.02 against
// 1.06–1.08, Q6_K 0.84–0.86 against 0.93–0.95; avx2 Q4_K 0.82–0.88
// against 0.90–1.04, Q5_K 0.87–0.88 against 0.99–1.01, Q6_K 0.56–0.59
// against 0.72–0.76 (Q2_K and Q3_K, bound by their arithmetic on that
// machine, moved less). TinyLlama Q4_K decoded 46.5–46.6 tokens/s against
// 42.9–43.4 (minervac bench, alternating). Sixteen blocks into L2: no
// worse on any of the three machines.
const KQPrefetchBlocks = 16

// StreamPrefetch asks for the line at m into L2 (PREFETCHT1), ahead of a
// one-row kernel's stream through packed groups (decode). Into L1
// (PREFETCHT0) the kernels read slower on an Intel Xeon VM
// (KQPrefetchBlocks), probably because each such prefetch holds one of
// the core's few L1 fill buffers until its line comes from memory, which
// the loads of lines already in L2 then wait for.
func StreamPrefetch(c *build.Context, m Mem) {
	c.PREFETCHT1(m)
}

// GroupPrefetchBytes is how far ahead the one-row Q4_0, Q8_0 and MXFP4 group
// kernels prefetch (GroupPrefetch). With PREFETCHT0 at 4 KB, two threads
// decoding a 256 MB matrix in 128-row items (kern's
// BenchmarkPackedStreamThreads, a Zen 3 VM, AVX2) read 0.76–0.94 of the
// streaming bandwidth without it and 0.95–1.19 with it in Q4_0, 0.93–1.03
// and 1.05–1.09 in Q8_0; TinyLlama Q4_0's decode went from 0.76–0.83 of
// the bandwidth read among its steps to 0.89–1.00 (minervac bench, three
// alternating rounds). The VNNI kernels did without one until an Intel
// Xeon VM read Q4_0 at 0.77–0.79 of a plain read without it
// (BenchmarkStreamVsRead, one thread, paired sets). There, into L2
// (StreamPrefetch), the distance mattered:
//
//	              1 KB       2 KB       4 KB       8 KB
//	VNNI Q4_0  0.82–0.87  0.92–0.94  0.83–0.88  0.83–0.86
//	VNNI Q8_0  0.88–0.94  0.95–0.97  0.92–0.97  0.82–0.93
//	avx2 Q4_0  0.82–0.84  0.85–0.91  0.67–0.81  0.76–0.80
//	avx2 Q8_0  0.85–0.86  0.93–0.95  0.81–0.85  0.79–0.84
//
// (six sets at 2 KB, three at the others; into L1 at 4 KB, the earlier
// choice, avx2 Q4_0 read 0.64–0.66 and Q8_0 0.62–0.69).
const GroupPrefetchBytes = 2048

// GroupPrefetch asks for every line of the group block about
// GroupPrefetchBytes (whole blocks of blockBytes) past the one at x
// (StreamPrefetch).
func GroupPrefetch(c *build.Context, x reg.Register, blockBytes int) {
	ahead := (GroupPrefetchBytes + blockBytes - 1) / blockBytes * blockBytes
	for line := 0; line*64 < blockBytes; line++ {
		StreamPrefetch(c, Mem{Base: x, Disp: ahead + 64*line})
	}
}

// PrefetchShare is step i of steps' share of a stream prefetch
// (StreamPrefetch) of the bytes bytes at x+disp: their lines
// [i·L/steps, (i+1)·L/steps) of L, so that a loop of steps steps asks for
// every line once, spread over the steps.
func PrefetchShare(c *build.Context, x reg.Register, disp, bytes, i, steps int) {
	lines := (bytes + 63) / 64
	for l := i * lines / steps; l < (i+1)*lines/steps; l++ {
		StreamPrefetch(c, Mem{Base: x, Disp: disp + 64*l})
	}
}

// Q5FifthBit ORs bit b of a packed Q5_K qh vector h into v's codes as bit 4,
// through the scratch register hb (ShiftBit). m10 is a vector of 0x10
// bytes; and and or are the kernel's forms (VPAND/VPOR, or the EVEX
// VPANDD/VPORD for registers VEX cannot name).
func Q5FifthBit(c *build.Context, b int, h, hb, v reg.VecVirtual, m10 Mem, and, or func(...Op)) {
	and(m10, ShiftBit(c, b, 4, h, hb), hb)
	or(hb, v, v)
}

// ShiftBit returns h with bit from of every byte moved to bit to, and other
// bits around it for the caller to mask: word shifts into hb, as no bit of
// a word's other byte reaches bit to of a byte, or h itself when from is
// to.
func ShiftBit(c *build.Context, from, to int, h, hb reg.VecVirtual) reg.VecVirtual {
	switch {
	case from < to:
		c.VPSLLW(Imm(uint64(to-from)), h, hb)
	case from == to:
		return h
	default:
		c.VPSRLW(Imm(uint64(from-to)), h, hb)
	}
	return hb
}

// KQAcc gives f the eight float lanes of activation row r's accumulator:
// a register for one row (RegAcc), a frame slot (loaded, then stored back)
// for several, where registers would not hold them all (FrameAcc).
type KQAcc func(r int, f func(acc reg.VecVirtual))

// RegAcc is the KQAcc of one row whose lanes are acc.
func RegAcc(acc reg.VecVirtual) KQAcc {
	return func(_ int, f func(reg.VecVirtual)) { f(acc) }
}

// FrameAcc is the KQAcc of rows whose lanes are 32 bytes apart from frame.
func FrameAcc(c *build.Context, frame Mem) KQAcc {
	return func(r int, f func(reg.VecVirtual)) {
		a := c.YMM()
		c.VMOVUPS(frame.Offset(32*r), a)
		f(a)
		c.VMOVUPS(a, frame.Offset(32*r))
	}
}

// KQFmaRows adds float(sumi[r])·(d_w·d_y[r]) into row r's lanes, d_w the
// low lane of dw (KQF16, or Q2KMinima's).
func KQFmaRows(c *build.Context, dw reg.VecVirtual, y []reg.Register, sumi []reg.VecVirtual, acc KQAcc) {
	for r := range y {
		dx := c.XMM()
		c.VMULSS(Mem{Base: y[r]}, dw, dx)
		d := c.YMM()
		c.VBROADCASTSS(dx, d)
		c.VCVTDQ2PS(sumi[r], sumi[r])
		acc(r, func(a reg.VecVirtual) { c.VFMADD231PS(sumi[r], d, a) })
	}
}

// KQRows4Signature is the four-row k-quant kernels' signature (KQRows4).
const KQRows4Signature = "func(nb int, w, a []byte, stride int, dst *[4]float32)"

// KQRows4 emits the body of a kernel of KQRows4Signature named name: one
// weight row (nb super-blocks of wBytes) against four Q8_K activation rows
// (stride bytes apart), each super-block decoded once for the four by
// block, whose accumulators live in the frame; dst[r] is hsum_float_8 of
// row r's.
func KQRows4(c *build.Context, name string, wBytes int, block func(x reg.GPVirtual, y []reg.Register, acc KQAcc)) {
	nb := c.Load(c.Param("nb"), c.GP64())
	x := c.GP64()
	c.Load(c.Param("w").Base(), x)
	y := RowPointers(c, 4)
	frame := c.AllocLocal(32 * 4)
	z := ZeroYMMs(c, 1)[0]
	for r := range 4 {
		c.VMOVUPS(z, frame.Offset(32*r))
	}
	c.TESTQ(nb, nb)
	c.JZ(LabelRef(name + "_done"))
	c.Label(name + "_block")
	block(x, y, FrameAcc(c, frame))
	NextKQBlock(c, x, wBytes, y, nb, name+"_block", name+"_done")
	dst := c.Load(c.Param("dst"), c.GP64())
	for r := range 4 {
		a := c.YMM()
		c.VMOVUPS(frame.Offset(32*r), a)
		c.VMOVSS(HSumFloat8(c, a), Mem{Base: dst, Disp: 4 * r})
	}
	c.VZEROUPPER()
	c.RET()
}

// KQScaleShuffle defines the read-only table name of four 32-byte vpshufb
// controls for KQChunkScales: vector k puts word 2k of its 128-bit lane
// into every word of the low lane and word 2k+1 into every word of the
// high one.
func KQScaleShuffle(c *build.Context, name string) Mem {
	m := c.StaticGlobal(name)
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for k := 0; k < 4; k++ {
		for j := 0; j < 4; j++ {
			w := uint64(2 * (2*k + j/2)) // word 2k+j/2 is bytes w, w+1
			c.AddDatum(32*k+8*j, U64(w*0x0101010101010101+0x0100010001000100))
		}
	}
	return m
}

// KQHalfScales returns sc[8n..8n+7] of the sixteen scale words sc of a
// Q2_K, Q3_K or Q6_K block in both 128-bit lanes of a YMM register: the
// scales of the block's half n (128 elements), for KQChunkScales.
func KQHalfScales(c *build.Context, sc reg.VecVirtual, n int) reg.VecVirtual {
	half := c.YMM()
	c.VPERMQ(Imm([]uint64{0x44, 0xee}[n]), sc, half)
	return half
}

// KQChunkScales returns the scales of chunk k (elements 32k..32k+31) of the
// half whose scales are half (KQHalfScales) as words: sc[8n+2k] in the low
// 128-bit lane, sc[8n+2k+1] in the high one, by shuf (KQScaleShuffle).
func KQChunkScales(c *build.Context, half reg.VecVirtual, shuf Mem, k int) reg.VecVirtual {
	s := c.YMM()
	c.VPSHUFB(shuf.Offset(32*k), half, s)
	return s
}

// Q3KHighShift defines the read-only table name of Q3KScales' highShift:
// the dwords 0, 2, 4, 6.
func Q3KHighShift(c *build.Context, name string) Mem {
	m := c.StaticGlobal(name)
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for j := 0; j < 4; j++ {
		c.AddDatum(4*j, U32(uint32(2*j)))
	}
	return m
}

// Q3KScales returns the sixteen 6-bit scales of the Q3_K block at x (12
// bytes at 96) less 32, -32..31, as words in a YMM register: the low
// nibbles of bytes 0..7 are sc0..7, their high nibbles sc8..15; byte 8+j's
// bit pairs 0, 2, 4, 6 are the top bits of sc j, j+4, j+8, j+12. m0f, m03
// and m20 are vectors of 0x0f, 0x03 and 0x20 bytes, highShift the dwords 0,
// 2, 4, 6.
func Q3KScales(c *build.Context, x reg.Register, m0f, m03, m20, highShift Mem) reg.VecVirtual {
	lo, hi := c.XMM(), c.XMM()
	c.VMOVQ(Mem{Base: x, Disp: 96}, lo)
	c.VPSRLW(Imm(4), lo, hi)
	c.VPUNPCKLQDQ(hi, lo, lo)
	c.VPAND(m0f.Offset(0), lo, lo) // the low four bits of sc0..15
	top := c.XMM()
	c.VPBROADCASTD(Mem{Base: x, Disp: 104}, top)
	c.VPSRLVD(highShift, top, top) // dword j: bytes 8..11 >> 2j
	c.VPAND(m03.Offset(0), top, top)
	c.VPSLLW(Imm(4), top, top)
	c.VPOR(top, lo, lo)
	c.VPSUBB(m20.Offset(0), lo, lo) // less 32: -32..31
	sc := c.YMM()
	c.VPMOVSXBW(lo, sc)
	return sc
}

// Q2KMinima adds the minima term of the Q2_K block at x into each
// activation row's float lanes (ggml's AVX2 order, first in the block):
//
//	acc = fma(-(d_y·dmin_w), float(mn[2k]·bs[2k] + mn[2k+1]·bs[2k+1]), acc)
//
// and returns the block's sixteen scales (0..15) as words in a YMM
// register, and d_w, dmin_w in the low lanes of an XMM register (for
// KQFmaRows). acc gives f row r's accumulator; m0f is a vector of 0x0f
// bytes.
func Q2KMinima(c *build.Context, x reg.Register, y []reg.Register, acc KQAcc, m0f Mem) (sc, dw reg.VecVirtual) {
	// d and dmin read as four bytes: vcvtph2ps from memory would read
	// past the last block.
	dh := c.GP32()
	c.MOVL(Mem{Base: x, Disp: 80}, dh)
	dw = c.XMM()
	c.VMOVD(dh, dw)
	c.VCVTPH2PS(dw, dw) // d_w, dmin_w

	ms, mn := c.XMM(), c.XMM()
	c.VMOVDQU(Mem{Base: x}, ms)
	c.VPSRLW(Imm(4), ms, mn)
	c.VPAND(m0f.Offset(0), mn, mn)
	c.VPAND(m0f.Offset(0), ms, ms)
	mins := c.YMM()
	c.VPMOVZXBW(mn, mins)
	for r := range y {
		prod := c.YMM()
		c.VPMADDWD(Mem{Base: y[r], Disp: 260}, mins, prod) // mn[2k]·bs[2k] + mn[2k+1]·bs[2k+1]
		c.VCVTDQ2PS(prod, prod)
		dd, dm := c.XMM(), c.XMM()
		c.VBROADCASTSS(Mem{Base: y[r]}, dd)
		c.VMULPS(dd, dw, dd)
		c.VMOVSHDUP(dd, dm) // d_y·dmin_w in lane 0
		dmin := c.YMM()
		c.VBROADCASTSS(dm, dmin)
		acc(r, func(a reg.VecVirtual) { c.VFNMADD231PS(prod, dmin, a) }) // a - dmin·prod, ggml's fma with -dmin
	}
	sc = c.YMM()
	c.VPMOVZXBW(ms, sc)
	return sc, dw
}

// KQF16 returns the f16 at x+disp as a float in the low lane of an XMM
// register, read as two bytes: vcvtph2ps from memory would read past the
// last block.
func KQF16(c *build.Context, x reg.Register, disp int) reg.VecVirtual {
	dh := c.GP32()
	c.MOVWLZX(Mem{Base: x, Disp: disp}, dh)
	dw := c.XMM()
	c.VMOVD(dh, dw)
	c.VCVTPH2PS(dw, dw)
	return dw
}

// KQBody emits what a k-quant kernel needs before its loops and returns the
// emitter of one super-block (weight block at x, Q8_K block at y), which
// adds into the eight float lanes acc (YMM) and, for the types with minima,
// the four float lanes accm (XMM).
type KQBody func(c *build.Context, x, y reg.GPVirtual, acc, accm reg.VecVirtual) func()

// KQRows emits the body of a kernel of signature KQGemvSignature: for every
// row, the super-blocks of body (wBytes each) against the same activation
// row, then hsum_float_8(acc), plus ((accm0+accm2) + (accm1+accm3)) when
// mins is set, stored to dst. Looping over the rows here spares a call and
// the bounds checks per row, which at 2048-wide rows (8 super-blocks) cost
// about as much as the arithmetic.
func KQRows(c *build.Context, name string, wBytes int, mins bool, body KQBody) {
	rows := c.Load(c.Param("rows"), c.GP64())
	nb := c.Load(c.Param("nb"), c.GP64())
	x := c.GP64()
	c.Load(c.Param("w").Base(), x)
	a := c.Load(c.Param("a").Base(), c.GP64())
	dst := c.Load(c.Param("dst").Base(), c.GP64())
	acc, accm := c.YMM(), c.XMM()
	y, n := c.GP64(), c.GP64()
	block := body(c, x, y, acc, accm)
	c.TESTQ(rows, rows)
	c.JZ(LabelRef(name + "_done"))
	c.Label(name + "_row")
	c.VXORPS(acc, acc, acc)
	if mins {
		c.VXORPS(accm, accm, accm)
	}
	c.MOVQ(a, y)
	c.MOVQ(nb, n)
	c.TESTQ(n, n)
	c.JZ(LabelRef(name + "_sum"))
	c.Label(name + "_block")
	block()
	NextKQBlock(c, x, wBytes, []reg.Register{y}, n, name+"_block", name+"_sum")
	var r reg.VecVirtual
	if mins {
		r = KQRowSum(c, acc, accm)
	} else {
		r = HSumFloat8(c, acc)
	}
	c.VMOVSS(r, Mem{Base: dst})
	c.ADDQ(Imm(4), dst)
	c.DECQ(rows)
	c.JNZ(LabelRef(name + "_row"))
	c.Label(name + "_done")
	c.VZEROUPPER()
	c.RET()
}

// KQRowSum returns a Q4_K/Q5_K row's dot in the low lane of an XMM
// register: acc's eight lanes summed as HSumFloat8, plus the four minima
// lanes of accm summed as (m0+m2) + (m1+m3).
func KQRowSum(c *build.Context, acc, accm reg.VecVirtual) reg.VecVirtual {
	r := HSumFloat8(c, acc)
	h := c.XMM()
	c.VMOVHLPS(accm, accm, h)
	c.VADDPS(h, accm, accm) // m0+m2, m1+m3
	c.VMOVSHDUP(accm, h)
	c.VADDSS(h, accm, accm) // (m0+m2) + (m1+m3)
	c.VADDSS(accm, r, r)
	return r
}

// KQScalesMinsK4 decodes the scales and minima of the Q4_K/Q5_K block at x
// (get_scale_min_k4) from the 12 bytes at x+4, in general registers: A =
// bytes 0..7 & 63 (sc0..3, mn0..3); D = the high parts (sc4..7 in its low
// dword, mn4..7 in its high one). It returns sc0..7 as words in both halves
// of a YMM register and mn0..7 as words in an XMM register. m3f, m03 and
// m0f hold those bytes in every byte.
func KQScalesMinsK4(c *build.Context, x, m3f, m03, m0f reg.GPVirtual) (scales, mins reg.VecVirtual) {
	q, u2 := c.GP64(), c.GP64()
	c.MOVQ(Mem{Base: x, Disp: 4}, q)
	c.MOVL(Mem{Base: x, Disp: 12}, u2.As32())
	a, b, t := c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(q, a)
	c.ANDQ(m3f, a)
	c.MOVQ(q, b)
	c.SHRQ(Imm(6), b)
	c.ANDQ(m03, b)
	c.SHLQ(Imm(4), b) // each byte's top two bits, at bits 4,5
	c.MOVQ(u2, t)
	c.SHLQ(Imm(28), t)
	c.ORQ(u2, t)
	c.ANDQ(m0f, t) // u2's low nibbles in the low dword, high nibbles in the high one
	c.ORQ(t, b)
	xa, xd := c.XMM(), c.XMM()
	c.VMOVQ(a, xa)
	c.VMOVQ(b, xd)
	c.VPUNPCKLDQ(xd, xa, xa) // sc0..7, mn0..7
	msc := c.YMM()
	c.VPMOVZXBW(xa, msc)
	scales = c.YMM()
	c.VPERMQ(Imm(0x44), msc, scales) // sc0..7 in both halves
	mins = c.XMM()
	c.VEXTRACTI128(Imm(1), msc, mins)
	return scales, mins
}

// KQMinima emits the Q4_K/Q5_K block's minima term (x: weight block, y:
// Q8_K block, mins: mn0..7 as words): with dmin = d_y·dmin_w, accm[j] -=
// dmin·(mn[2j]·(bs[4j]+bs[4j+1]) + mn[2j+1]·(bs[4j+2]+bs[4j+3])). It returns
// d_y·d_w in the low lane of an XMM register.
func KQMinima(c *build.Context, x, y reg.GPVirtual, mins, accm reg.VecVirtual) reg.VecVirtual {
	// d = d_y·d_w, dmin = d_y·dmin_w.
	dd, yd := c.XMM(), c.XMM()
	c.VCVTPH2PS(Mem{Base: x}, dd) // d_w, dmin_w, (scale bytes)
	c.VBROADCASTSS(Mem{Base: y}, yd)
	c.VMULPS(dd, yd, dd)

	// Minima: accm -= dmin·prod.
	q8s := c.XMM()
	c.VMOVDQU(Mem{Base: y, Disp: 260}, q8s)
	c.VPHADDW(Mem{Base: y, Disp: 276}, q8s, q8s)
	c.VPMADDWD(q8s, mins, q8s)
	c.VCVTDQ2PS(q8s, q8s)
	dmin := c.XMM()
	c.VSHUFPS(Imm(0x55), dd, dd, dmin)
	c.VFNMADD231PS(q8s, dmin, accm)
	return dd
}

// KQ4Masks loads the general-register masks KQScalesMinsK4 takes (0x3f,
// 0x03 and 0x0f in every byte).
func KQ4Masks(c *build.Context) (m3f, m03, m0f reg.GPVirtual) {
	m3f, m03, m0f = c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(U64(0x3f3f3f3f3f3f3f3f), m3f)
	c.MOVQ(U64(0x0303030303030303), m03)
	c.MOVQ(U64(0x0f0f0f0f0f0f0f0f), m0f)
	return m3f, m03, m0f
}

// KQ6Prologue emits what a Q6_K super-block needs besides its quants (x:
// weight block, y: Q8_K block): d_y·d_w in the low lane of an XMM register
// (the half read alone: vcvtph2ps from memory would read past the last
// block), the sixteen scales as int16 words (YMM) and the -32 correction
// 32·(sc[2k]·bs[2k] + sc[2k+1]·bs[2k+1]) in eight int32 lanes.
func KQ6Prologue(c *build.Context, x, y reg.GPVirtual) (dx, sc, corr reg.VecVirtual) {
	dh := c.GP32()
	c.MOVWLZX(Mem{Base: x, Disp: 208}, dh)
	dx = c.XMM()
	c.VMOVD(dh, dx)
	c.VCVTPH2PS(dx, dx)
	c.VMULSS(Mem{Base: y}, dx, dx)
	sc = c.YMM()
	c.VPMOVSXBW(Mem{Base: x, Disp: 192}, sc) // 16 int16 scales
	corr = c.YMM()
	c.VPMADDWD(Mem{Base: y, Disp: 260}, sc, corr) // sc[2k]·bs[2k] + sc[2k+1]·bs[2k+1]
	c.VPSLLD(Imm(5), corr, corr)
	return dx, sc, corr
}

// StoreGroupRows stores a group kernel's eight float results per
// activation row: acc[0] to dst (parameter "dst"), acc[r] ld floats
// (parameter "ld", present when len(acc) > 1) after acc[r-1].
func StoreGroupRows(c *build.Context, acc []reg.VecVirtual) {
	dst := c.Load(c.Param("dst").Base(), c.GP64())
	if len(acc) == 1 {
		c.VMOVUPS(acc[0], Mem{Base: dst})
		return
	}
	ld := c.Load(c.Param("ld"), c.GP64())
	c.SHLQ(Imm(2), ld) // bytes
	for r := range acc {
		if r > 0 {
			c.ADDQ(ld, dst)
		}
		c.VMOVUPS(acc[r], Mem{Base: dst})
	}
}

// Q4KGroupFloats emits a packed Q4_K group kernel's float steps for one
// super-block (x: the group's block, y[r]: activation row r's Q8_K block):
// acc[r] = fma(d_y·d_w, float(isum[r]), acc[r]), then acc[r] =
// fma(-(d_y·dmin_w), float(msum[r]), acc[r]), one lane per weight row.
func Q4KGroupFloats(c *build.Context, x reg.Register, y []reg.Register, isum, msum, acc []reg.VecVirtual) {
	dw, dmw := c.YMM(), c.YMM()
	c.VCVTPH2PS(Mem{Base: x}, dw)
	c.VCVTPH2PS(Mem{Base: x, Disp: 16}, dmw)
	for r := range acc {
		dy, d, dm := c.YMM(), c.YMM(), c.YMM()
		c.VBROADCASTSS(Mem{Base: y[r]}, dy)
		c.VMULPS(dw, dy, d)
		c.VMULPS(dmw, dy, dm)
		c.VCVTDQ2PS(isum[r], isum[r])
		c.VFMADD231PS(isum[r], d, acc[r])
		c.VCVTDQ2PS(msum[r], msum[r])
		c.VFNMADD231PS(msum[r], dm, acc[r])
	}
}

// KQTypes are the k-quants with matrix-vector kernels, with their
// super-block bytes.
var KQTypes = []struct {
	Name   string
	WBytes int
}{{"Q4_K", 144}, {"Q5_K", 176}, {"Q6_K", 210}}

// Function starts a NOSPLIT, noescape kernel function with its signature
// and doc lines.
func Function(c *build.Context, name, sig string, doc ...string) {
	c.Function(name)
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr(sig)
	c.Doc(doc...)
}

// Q4KGroupFunction starts the packed Q4_K group kernel against rows
// activation rows: gemvQ4_Kx8<isa> for one, gemmQ4_Kx8x<rows><isa> else;
// needs names the CPU features. It returns the function's name.
func Q4KGroupFunction(c *build.Context, isa string, rows int, generator, needs string) string {
	return KQGroupFunction(c, "Q4_K", isa, rows, generator, needs)
}

// KQGroupFunction is Q4KGroupFunction for the k-quant typ (Q4_K, Q5_K).
func KQGroupFunction(c *build.Context, typ, isa string, rows int, generator, needs string) string {
	name := "gemv" + typ + "x8" + isa
	sig := "func(nb int, w, a []byte, dst []float32)"
	if rows > 1 {
		name = fmt.Sprintf("gemm%sx8x%d%s", typ, rows, isa)
		sig = "func(nb int, w, a []byte, stride int, dst []float32, ld int)"
	}
	Function(c, name, sig,
		fmt.Sprintf("%s multiplies a packed group of eight %s rows by %d Q8_K", name, typ, rows),
		"activation rows (see codegen/goasm/gen/"+generator+"'s kquants.go). It needs",
		needs+".")
	return name
}

// NextKQBlock ends a k-quant block loop: x on by wBytes, every activation
// row on by a Q8_K block, nb down by one and back to label block while
// blocks are left, then label done.
func NextKQBlock(c *build.Context, x reg.Register, wBytes int, y []reg.Register, nb reg.Register, block, done string) {
	c.ADDQ(U32(wBytes), x)
	for r := range y {
		c.ADDQ(U32(Q8KBytes), y[r])
	}
	c.DECQ(nb)
	c.JNZ(LabelRef(block))
	c.Label(done)
}
