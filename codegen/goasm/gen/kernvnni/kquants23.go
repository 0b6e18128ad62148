package main

import (
	"github.com/minerva-llm/minerva/codegen/goasm/gen/internal/avoutil"
	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The Q3_K and Q2_K row kernels for AVX-512 VNNI: kerndot's q3Block and
// q2Block (ggml's AVX2 block arithmetic) with EVEX instructions where they
// save work. Per 32-element chunk the scaled pair sums go into the int32
// lanes by one vpdpwssd (vpmaddwd and vpaddd) and Q3_K's high bit into the
// code by one vpternlogd (a mask and an or), the chunks alternating
// between two sums so that four dependent vpdpwssd, not eight, end the
// block; the integer lanes are the AVX2 kernels' exactly (integer adds in
// another order), and the float steps are theirs, so every result is the
// AVX2 kernel's bit for bit. On Zen 4 that is 28.4 → 25.7 cycles per row
// super-block for Q3_K and 22.2 → 20.9 for Q2_K (BenchmarkRowCycles); one
// sum instead of two gave 28.2 and 23.0, and 512-bit vectors (two chunks
// an instruction, which Zen 4 executes in two halves) 29.1–29.8 and 23.9.

// kq23 holds the kernels' read-only vectors.
var kq23 struct {
	m03, m04, m20 Mem // 0x03, 0x04, 0x20 bytes
	shufQ3        Mem // avoutil.KQScaleShuffle
	highShift     Mem // avoutil.Q3KHighShift
}

func kquants23Consts(c *build.Context) {
	rep := func(b byte) uint64 { return uint64(b) * 0x0101010101010101 }
	kq23.m03 = zConst(c, "kq23M03", func(int) uint64 { return rep(0x03) })
	kq23.m04 = zConst(c, "kq23M04", func(int) uint64 { return rep(0x04) })
	kq23.m20 = zConst(c, "kq23M20", func(int) uint64 { return rep(0x20) })
	kq23.shufQ3 = avoutil.KQScaleShuffle(c, "kq23ShufQ3")
	kq23.highShift = avoutil.Q3KHighShift(c, "kq23HighShift")
}

// kquants23 emits gemvQ3_KVNNI, gemvQ2_KVNNI and their four-row forms
// dotQ3_Kx4VNNI and dotQ2_Kx4VNNI.
func kquants23(c *build.Context) {
	kquants23Consts(c)
	for _, t := range []struct {
		name   string
		wBytes int
		high   bool // Q3_K's third bit (its m4 mask)
		block  func(c *build.Context, x reg.Register, y []reg.Register, acc avoutil.KQAcc, m3, m4 reg.VecVirtual)
	}{{"Q3_K", 110, true, q3Block}, {"Q2_K", 84, false, q2Block}} {
		consts := func() (m3, m4 reg.VecVirtual) {
			m3 = c.YMM()
			c.VMOVDQU64(kq23.m03, m3)
			if t.high {
				m4 = c.YMM()
				c.VMOVDQU64(kq23.m04, m4)
			}
			return m3, m4
		}
		name := "gemv" + t.name + "VNNI"
		avoutil.Function(c, name, avoutil.KQGemvSignature,
			name+" is gemv"+t.name+"AVX2 with VNNI, bit for bit (see",
			"codegen/goasm/gen/kernvnni's kquants23.go). It needs AVX-512 F, BW, VL and VNNI too.")
		avoutil.KQRows(c, t.name, t.wBytes, false, func(c *build.Context, x, y reg.GPVirtual, acc, _ reg.VecVirtual) func() {
			m3, m4 := consts()
			return func() { t.block(c, x, []reg.Register{y}, avoutil.RegAcc(acc), m3, m4) }
		})
		name = "dot" + t.name + "x4VNNI"
		avoutil.Function(c, name, avoutil.KQRows4Signature,
			name+" is dot"+t.name+"x4AVX2 with VNNI, bit for bit (see",
			"codegen/goasm/gen/kernvnni's kquants23.go). It needs AVX-512 F, BW, VL and VNNI too.")
		m3, m4 := consts()
		avoutil.KQRows4(c, name, t.wBytes, func(x reg.GPVirtual, y []reg.Register, acc avoutil.KQAcc) {
			t.block(c, x, y, acc, m3, m4)
		})
	}
}

// q3Block adds a Q3_K super-block at x times the Q8_K blocks at y into
// the rows' accumulators (kerndot's q3Block, m3 and m4 0x03 and 0x04
// bytes).
func q3Block(c *build.Context, x reg.Register, y []reg.Register, acc avoutil.KQAcc, m3, m4 reg.VecVirtual) {
	sc := avoutil.Q3KScales(c, x, kq512.nib, kq23.m03, kq23.m20, kq23.highShift)
	hm := c.YMM()
	c.VMOVDQU64(Mem{Base: x}, hm)
	sumi := chunkSums(c, x, y, 32, sc, m3, func(n, k int, v reg.VecVirtual) {
		// bit 4n+k of hmask to bit 2
		h := avoutil.ShiftBit(c, 4*n+k, 2, hm, c.YMM())
		c.VPTERNLOGD(Imm(0xf8), m4, h, v) // v | h&4
	})
	for r := range y {
		// Each -4 is taken out as 4·(sc[2k]·bs[2k] + sc[2k+1]·bs[2k+1]).
		corr := c.YMM()
		c.VPMADDWD(Mem{Base: y[r], Disp: 260}, sc, corr)
		c.VPSLLD(Imm(2), corr, corr)
		c.VPSUBD(corr, sumi[r], sumi[r])
	}
	avoutil.KQFmaRows(c, avoutil.KQF16(c, x, 108), y, sumi, acc)
}

// q2Block adds a Q2_K super-block at x times the Q8_K blocks at y into
// the rows' accumulators (kerndot's q2Block, m3 0x03 bytes).
func q2Block(c *build.Context, x reg.Register, y []reg.Register, acc avoutil.KQAcc, m3, _ reg.VecVirtual) {
	sc, dw := avoutil.Q2KMinima(c, x, y, acc, kq512.nib)
	sumi := chunkSums(c, x, y, 16, sc, m3, nil)
	avoutil.KQFmaRows(c, dw, y, sumi, acc)
}

// chunkSums returns each activation row's Σ sc·q·y over the block in the
// AVX2 kernels' eight int32 lanes (YMM registers): qs at x+qsOff, the
// scales sc as words (a YMM register), m3 0x03 bytes; high, when set, adds
// the high bit to the codes v of chunk k of half n.
func chunkSums(c *build.Context, x reg.Register, y []reg.Register, qsOff int, sc, m3 reg.VecVirtual, high func(n, k int, v reg.VecVirtual)) []reg.VecVirtual {
	sums := make([][2]reg.VecVirtual, len(y))
	for n := 0; n < 2; n++ {
		half := avoutil.KQHalfScales(c, sc, n)
		qs := c.YMM()
		c.VMOVDQU64(Mem{Base: x, Disp: qsOff + 32*n}, qs)
		for k := 0; k < 4; k++ {
			v := c.YMM()
			c.VPANDD(m3, avoutil.ShiftBit(c, 2*k, 0, qs, v), v)
			if high != nil {
				high(n, k, v)
			}
			s := avoutil.KQChunkScales(c, half, kq23.shufQ3, k)
			for r := range y {
				p := c.YMM()
				c.VPMADDUBSW(Mem{Base: y[r], Disp: 4 + 128*n + 32*k}, v, p)
				if sum := &sums[r][k%2]; *sum == nil {
					*sum = c.YMM()
					c.VPMADDWD(s, p, *sum)
				} else {
					vpdpwssd(c, s, p, *sum)
				}
			}
		}
	}
	out := make([]reg.VecVirtual, len(y))
	for r, s := range sums {
		c.VPADDD(s[1], s[0], s[0])
		out[r] = s[0]
	}
	return out
}
