// Command kernattn generates runtime/cpu/kern/attn_amd64.s and
// attn_amd64_stubs.go: the AVX2+FMA+F16C attention tile kernels over f16
// and q8_0 KV caches (the f32 ones are kernvec's scoresF32 and
// axpyRowsF32). A tile's scores are one call (q against each cache row),
// its weighted values another (the accumulator held in registers while the
// rows stream past), so a row of K or V is read once per query head and
// tile — or, with the grouped kernels (scoresF16G<n>AVX2 and the rest, and
// their AVX512 forms), once per tile for up to eight query heads of one KV
// head.
//
// Every kernel's order, which kern's Go loops emulate (attn.go):
//
//   - scores: lane l of an eight-lane accumulator sums, with FMA, q[i]·k[i]
//     for i ≡ l mod 8 in order (q8_0: per block a fresh accumulator, then
//     acc = fma(d, block, acc)); the lanes are then summed as ggml's
//     hsum_float_8 (avoutil.HSumFloat8).
//   - weighted values: acc[i] = fma(v[i], w, acc[i]) row by row (q8_0:
//     v[i] = q, and w·d rounded first).
//
// Usage (from runtime/cpu/kern, see its go:generate line in attn.go):
//
//	go run ../../../codegen/goasm/gen/kernattn -dir .
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/minerva-llm/minerva/codegen/goasm/gen/internal/avoutil"
)

func main() {
	dir := flag.String("dir", ".", "directory that receives attn_amd64.s and attn_amd64_stubs.go")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "kernattn:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	c := build.NewContext()
	c.ConstraintExpr("amd64")
	scoresF16(c)
	axpyRowsF16(c)
	scoresQ8(c)
	axpyRowsQ8(c)
	grouped(c)
	return avoutil.Write(c, "codegen/goasm/gen/kernattn", dir, "attn_amd64.s", "attn_amd64_stubs.go")
}

// scoresF16 emits func scoresF16AVX2(q []float32, k []uint16, stride int,
// out []float32): out[j] = q · k[j*stride : j*stride+len(q)], the halves
// widened with F16C, len(q) a multiple of 8.
func scoresF16(c *build.Context) {
	avoutil.TileScores(c, "scoresF16AVX2", "func(q []float32, k []uint16, stride int, out []float32)", "sf16",
		[]string{"scoresF16AVX2 sets out[j] to the dot of q (len a multiple of 8) with row j of the f16",
			"cache k (rows stride halves apart). It needs AVX2, FMA and F16C."}, 1, 3, 32, 16,
		func(acc []reg.VecVirtual, q Mem, k []Mem) {
			for r := range acc {
				v := c.YMM()
				c.VCVTPH2PS(k[r], v)
				c.VFMADD231PS(q, v, acc[r])
			}
		})
}

// axpyRowsF16 emits func axpyRowsF16AVX2(acc, w []float32, v []uint16,
// stride int): acc += Σ_j w[j]·v[j*stride : j*stride+len(acc)], len(acc) a
// multiple of 8, acc held in registers 64 floats at a time.
func axpyRowsF16(c *build.Context) {
	avoutil.TileAxpyRows(c, "axpyRowsF16AVX2", "func(acc, w []float32, v []uint16, stride int)", "af16",
		[]string{"axpyRowsF16AVX2 adds w[j]·(row j of the f16 cache v, rows stride halves apart) to acc",
			"(len a multiple of 8) for every j, in row order with FMA. It needs AVX2, FMA and F16C."}, 1, 3, 8, 32, 16,
		func(label string, units int, ap, wp0, n0, vp0, st reg.Register) {
			rowPass(c, label, units, ap, wp0, n0, vp0, st, func(wv reg.VecVirtual, vp reg.Register, r []reg.VecVirtual) {
				for i := range r {
					t := c.YMM()
					c.VCVTPH2PS(Mem{Base: vp, Disp: 16 * i}, t)
					c.VFMADD231PS(t, wv, r[i])
				}
			})
		})
}

// rowPass runs every row over nv vectors of acc at ap: the vectors loaded,
// then per row w[j] broadcast and row(wv, vp, vectors) adding the row at
// vp, then stored.
func rowPass(c *build.Context, label string, nv int, ap, wp0, n0, vp0, st reg.Register,
	row func(wv reg.VecVirtual, vp reg.Register, r []reg.VecVirtual)) {
	r := make([]reg.VecVirtual, nv)
	for i := range r {
		r[i] = c.YMM()
		c.VMOVUPS(Mem{Base: ap, Disp: 32 * i}, r[i])
	}
	n, wp, vp := c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(n0, n)
	c.MOVQ(wp0, wp)
	c.MOVQ(vp0, vp)
	c.Label(label)
	wv := c.YMM()
	c.VBROADCASTSS(Mem{Base: wp}, wv)
	row(wv, vp, r)
	c.ADDQ(U32(4), wp)
	c.ADDQ(st, vp)
	c.DECQ(n)
	c.JNZ(LabelRef(label))
	for i := range r {
		c.VMOVUPS(r[i], Mem{Base: ap, Disp: 32 * i})
	}
}

// q8Scale broadcasts the f16 scale d at the start of the q8_0 block at m
// (the first of its 34 bytes) to every lane.
func q8Scale(c *build.Context, m Mem) reg.VecVirtual {
	h := c.XMM()
	c.VCVTPH2PS(m, h) // d and three values of the block: lane 0 is d
	d := c.YMM()
	c.VBROADCASTSS(h, d)
	return d
}

// q8Values widens eight int8 values at m to float32 lanes.
func q8Values(c *build.Context, m Mem) reg.VecVirtual {
	t := c.YMM()
	c.VPMOVSXBD(m, t)
	c.VCVTDQ2PS(t, t)
	return t
}

// scoresQ8 emits func scoresQ8AVX2(q []float32, k []byte, stride int, out
// []float32): out[j] = q · row j of the q8_0 cache k (rows stride bytes
// apart, len(q) a multiple of 32): per block the four vectors of q times
// the widened values into a fresh accumulator, then acc = fma(d, block,
// acc).
func scoresQ8(c *build.Context) {
	avoutil.TileScores(c, "scoresQ8AVX2", "func(q []float32, k []byte, stride int, out []float32)", "sq8",
		[]string{"scoresQ8AVX2 sets out[j] to the dot of q (len a multiple of 32) with row j of the q8_0",
			"cache k (rows stride bytes apart). It needs AVX2, FMA and F16C."}, 0, 5, 128, 34,
		func(acc []reg.VecVirtual, q Mem, k []Mem) {
			for r := range acc {
				blk := c.YMM()
				c.VXORPS(blk, blk, blk)
				for i := 0; i < 4; i++ {
					t := q8Values(c, k[r].Offset(2+8*i))
					c.VFMADD231PS(q.Offset(32*i), t, blk)
				}
				d := q8Scale(c, k[r])
				c.VFMADD231PS(blk, d, acc[r])
			}
		})
}

// axpyRowsQ8 emits func axpyRowsQ8AVX2(acc, w []float32, v []byte, stride
// int): acc += Σ_j w[j]·row j of the q8_0 cache v (rows stride bytes apart,
// len(acc) a multiple of 32), two blocks (64 floats) of acc in registers
// at a time: per row and block wd = w[j]·d, then acc = fma(q, wd, acc).
func axpyRowsQ8(c *build.Context) {
	avoutil.TileAxpyRows(c, "axpyRowsQ8AVX2", "func(acc, w []float32, v []byte, stride int)", "aq8",
		[]string{"axpyRowsQ8AVX2 adds w[j]·(row j of the q8_0 cache v, rows stride bytes apart) to acc",
			"(len a multiple of 32) for every j, in row order with FMA. It needs AVX2, FMA and F16C."}, 0, 5, 2, 128, 34,
		func(label string, blocks int, ap, wp0, n0, vp0, st reg.Register) {
			rowPass(c, label, 4*blocks, ap, wp0, n0, vp0, st, func(wv reg.VecVirtual, vp reg.Register, r []reg.VecVirtual) {
				for b := 0; b < blocks; b++ {
					wd := q8Scale(c, Mem{Base: vp, Disp: 34 * b})
					c.VMULPS(wv, wd, wd)
					for i := 0; i < 4; i++ {
						t := q8Values(c, Mem{Base: vp, Disp: 34*b + 2 + 8*i})
						c.VFMADD231PS(t, wd, r[4*b+i])
					}
				}
			})
		})
}

// The grouped kernels serve up to eight query heads of one KV group (the
// heads of grouped-query attention, rows s floats apart) from one pass over
// a tile's rows, each row read and widened once for all of them. Per head
// they compute exactly what scoresF16AVX2/axpyRowsF16AVX2 (and kernvec's
// f32 ones) compute: the same lanes, the same FMAs in the same order, the
// same lane sum, so a head's bits do not depend on its neighbours.
const maxGroup = 8

// headMem addresses head g's row at b0 + g·s (+ disp): b3 = b0 + 3·s and
// s3 = 3·s make every g < 8 one base plus a scaled index.
func headMem(b0, b3, s, s3 reg.Register, g, disp int) Mem {
	switch g {
	case 0:
		return Mem{Base: b0, Disp: disp}
	case 1, 2, 4:
		return Mem{Base: b0, Index: s, Scale: uint8(g), Disp: disp}
	case 3:
		return Mem{Base: b3, Disp: disp}
	case 5:
		return Mem{Base: b3, Index: s, Scale: 2, Disp: disp}
	case 6:
		return Mem{Base: b0, Index: s3, Scale: 2, Disp: disp}
	default:
		return Mem{Base: b3, Index: s, Scale: 4, Disp: disp}
	}
}

// headBases loads the stride parameter (floats) as bytes s, s3 = 3·s and
// b3 = b0 + 3·s.
func headBases(c *build.Context, param string, b0 reg.Register) (b3, s, s3 reg.Register) {
	s, s3 = strides(c, param, 2)
	b3 = c.GP64()
	c.LEAQ(Mem{Base: b0, Index: s3, Scale: 1}, b3)
	return b3, s, s3
}

// strides loads the stride parameter as s = param << shift (bytes) and s3 =
// 3·s.
func strides(c *build.Context, param string, shift uint64) (s, s3 reg.Register) {
	s = c.Load(c.Param(param), c.GP64())
	c.SHLQ(Imm(shift), s)
	s3 = c.GP64()
	c.LEAQ(Mem{Base: s, Index: s, Scale: 2}, s3)
	return s, s3
}

// groupedFunc begins a grouped kernel: name, its signature sig over the
// cache element type kt (%s in sig), its doc lines.
func groupedFunc(c *build.Context, name, sig, kt string, doc ...string) {
	avoutil.Function(c, name, fmt.Sprintf(sig, kt), doc...)
}

const (
	scoresSig = "func(q []float32, qs, d int, k []%s, stride int, out []float32)"
	axpySig   = "func(acc []float32, as, d int, w []float32, v []%s, stride int)"
)

// prefetchRows is how many cache rows ahead of the row they read the grouped
// kernels prefetch (T0) each row's lines, K in the scores kernels and V in
// the weighted values ones. A decode step reads every cache row once, from
// memory (hundreds of MB of weights pass between two reads of a layer's
// cache), and the scores kernels' loads of K rows stalled on it. Before,
// each tile's V rows were prefetched in one burst ahead of its scores
// (kern.Kernels.Prefetch), and K not at all. TinyLlama Q4_0 at depth 1024,
// attention's time a layer (minervac bench --kernel-times, medians of three
// alternating runs): 102 µs as before; 96 with the scores kernels'
// prefetch; 90.5 with the values kernels' too; 81–84 without the burst
// (8 rows ahead: 87.4; 32: 85.9).
const prefetchRows = 16

// prefetchAhead prefetches every line of the rows rows (1 or 4, st bytes
// apart) that start ahead bytes past p: the rows prefetchRows after the ones
// the kernel reads now, ahead being prefetchRows·st (aheadOf, computed once
// per kernel call).
func prefetchAhead(c *build.Context, name string, p, ahead, st reg.Register, rows uint8) {
	pf, pe := c.GP64(), c.GP64()
	c.LEAQ(Mem{Base: p, Index: ahead, Scale: 1}, pf)
	c.LEAQ(Mem{Base: pf, Index: st, Scale: rows}, pe)
	c.Label(name)
	c.PREFETCHT0(Mem{Base: pf})
	c.ADDQ(U32(64), pf)
	c.CMPQ(pf, pe)
	c.JB(LabelRef(name))
}

// aheadOf returns prefetchRows·st in a register.
func aheadOf(c *build.Context, st reg.Register) reg.GPVirtual {
	a := c.GP64()
	c.IMUL3Q(U32(prefetchRows), st, a)
	return a
}

// cacheStride loads the stride parameter (cache elements) as bytes of f16
// or f32 elements, and gives the bytes of eight elements.
func cacheStride(c *build.Context, f16 bool) (st reg.Register, eight int) {
	st = c.Load(c.Param("stride"), c.GP64())
	if f16 {
		c.SHLQ(Imm(1), st)
		return st, 16
	}
	c.SHLQ(Imm(2), st)
	return st, 32
}

// reduce8 sums the lanes of eight accumulators into one vector, lane g the
// sum of a[g] exactly as avoutil.HSumFloat8 forms it: (l0+l4, l1+l5, l2+l6,
// l3+l7), then (r0+r2) and (r1+r3), then those two — the same additions on
// the same operands, done for all eight at once by a transpose.
func reduce8(c *build.Context, a [maxGroup]reg.VecVirtual) reg.VecVirtual {
	return transposeSum(c, a, c.YMM, func(hi, lo reg.VecVirtual, i int) {
		// s[i]: lanes 0-3 from a[i], 4-7 from a[i+4]
		c.VPERM2F128(Imm(0x20), a[i+4], a[i], lo)
		c.VPERM2F128(Imm(0x31), a[i+4], a[i], hi)
	})
}

// transposeSum is reduce8's body for vectors vec makes: split(hi, lo, i)
// sets lo and hi to the halves of a[i] and a[i+4] that are added first,
// then the lanes are paired as (r0+r2, r1+r3) and summed within each
// 128-bit lane.
func transposeSum(c *build.Context, a [maxGroup]reg.VecVirtual, vec func() reg.VecVirtual, split func(hi, lo reg.VecVirtual, i int)) reg.VecVirtual {
	var s [4]reg.VecVirtual
	for i := range s {
		lo, hi := vec(), vec()
		split(hi, lo, i)
		c.VADDPS(hi, lo, lo)
		s[i] = lo
	}
	pair := func(x, y reg.VecVirtual, even, odd uint64) reg.VecVirtual {
		e, o := vec(), vec()
		c.VSHUFPS(Imm(even), y, x, e)
		c.VSHUFPS(Imm(odd), y, x, o)
		c.VADDPS(o, e, e)
		return e
	}
	x := pair(s[0], s[1], 0x44, 0xEE) // r0+r2, r1+r3 of a0, a1 | a4, a5
	y := pair(s[2], s[3], 0x44, 0xEE)
	return pair(x, y, 0x88, 0xDD)
}

// scoresG emits func name(q []float32, qs, d int, k, stride, out []float32):
// for j < len(out)/8, out[8j+g] = q[g·qs : g·qs+d] · row j of k for g < G
// and 0 for the other lanes; d a positive multiple of 8.
func scoresG(c *build.Context, name, kt string, G int, f16 bool) {
	groupedFunc(c, name, scoresSig, kt,
		fmt.Sprintf("%s sets out[8j+g] to q[g*qs:g*qs+d]·(row j of k) for g < %d (0 beyond),", name, G),
		"j < len(out)/8, one row load for every head; d a positive multiple of 8. It needs AVX2, FMA and F16C.")
	qp := c.Load(c.Param("q").Base(), c.GP64())
	q3, qs, qs3 := headBases(c, "qs", qp)
	nch := c.Load(c.Param("d"), c.GP64())
	c.SHRQ(Imm(3), nch)
	kp := c.Load(c.Param("k").Base(), c.GP64())
	st, unit := cacheStride(c, f16)
	n := c.Load(c.Param("out").Len(), c.GP64())
	c.SHRQ(Imm(3), n)
	op := c.Load(c.Param("out").Base(), c.GP64())
	c.TESTQ(n, n)
	c.JZ(LabelRef(name + "_done"))
	ahead := aheadOf(c, st)
	c.Label(name + "_row")
	prefetchAhead(c, name+"_prefetch", kp, ahead, st, 1)
	var acc [maxGroup]reg.VecVirtual
	for g := range acc {
		acc[g] = c.YMM()
		c.VXORPS(acc[g], acc[g], acc[g])
	}
	i, qi, qi3, ki := c.GP64(), c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(nch, i)
	c.MOVQ(qp, qi)
	c.MOVQ(q3, qi3)
	c.MOVQ(kp, ki)
	c.Label(name + "_col")
	kv := c.YMM()
	if f16 {
		c.VCVTPH2PS(Mem{Base: ki}, kv)
	} else {
		c.VMOVUPS(Mem{Base: ki}, kv)
	}
	for g := 0; g < G; g++ {
		c.VFMADD231PS(headMem(qi, qi3, qs, qs3, g, 0), kv, acc[g])
	}
	c.ADDQ(U32(32), qi)
	c.ADDQ(U32(32), qi3)
	c.ADDQ(U32(uint64(unit)), ki)
	c.DECQ(i)
	c.JNZ(LabelRef(name + "_col"))
	c.VMOVUPS(reduce8(c, acc), Mem{Base: op})
	c.ADDQ(U32(32), op)
	c.ADDQ(st, kp)
	c.DECQ(n)
	c.JNZ(LabelRef(name + "_row"))
	c.Label(name + "_done")
	c.VZEROUPPER()
	c.RET()
}

// grouped emits the grouped kernels for G = 1..8 heads over f16 and f32
// caches: scoresF16G<G>AVX2, axpyRowsF16G<G>AVX2, scoresF32G<G>AVX2,
// axpyRowsF32G<G>AVX2 and their AVX512 forms, and axpyRowsQ8G<G>AVX512
// over q8_0 caches.
func grouped(c *build.Context) {
	for G := 1; G <= maxGroup; G++ {
		scoresG(c, fmt.Sprintf("scoresF16G%dAVX2", G), "uint16", G, true)
		axpyRowsG(c, fmt.Sprintf("axpyRowsF16G%dAVX2", G), "uint16", G, true, false)
		scoresG(c, fmt.Sprintf("scoresF32G%dAVX2", G), "float32", G, false)
		axpyRowsG(c, fmt.Sprintf("axpyRowsF32G%dAVX2", G), "float32", G, false, false)
		scoresGZ(c, fmt.Sprintf("scoresF16G%dAVX512", G), "uint16", G, true)
		axpyRowsG(c, fmt.Sprintf("axpyRowsF16G%dAVX512", G), "uint16", G, true, true)
		scoresGZ(c, fmt.Sprintf("scoresF32G%dAVX512", G), "float32", G, false)
		axpyRowsG(c, fmt.Sprintf("axpyRowsF32G%dAVX512", G), "float32", G, false, true)
		axpyRowsQ8GZ(c, fmt.Sprintf("axpyRowsQ8G%dAVX512", G), G)
	}
}

// The AVX-512 forms of the grouped kernels (the avx512 variant): the same
// lanes and order per head, in ZMM registers. Scores keep eight-lane
// accumulators: a ZMM holds one head's accumulators of two rows (row j in
// the low half, j+1 in the high), four rows per pass, so a query vector
// (broadcast to both halves) serves four rows and a row chunk all heads;
// the lanes are then summed exactly as reduce8, two rows at a time. Weighted values are
// element-wise, so a ZMM holds sixteen consecutive elements of one head
// and each weight is a broadcast memory operand of the FMA.

// scoresGZ emits func name(q []float32, qs, d int, k, stride, out
// []float32) as scoresG, for len(out)/8 rows a multiple of four.
func scoresGZ(c *build.Context, name, kt string, G int, f16 bool) {
	groupedFunc(c, name, scoresSig, kt,
		fmt.Sprintf("%s sets out[8j+g] to q[g*qs:g*qs+d]·(row j of k) for g < %d (0 beyond),", name, G),
		"j < len(out)/8 (a multiple of 4), as the AVX2 kernel does; d a positive multiple of 8.",
		"It needs AVX-512F and AVX-512VL.")
	qp := c.Load(c.Param("q").Base(), c.GP64())
	qs, qs3 := strides(c, "qs", 2)
	nch := c.Load(c.Param("d"), c.GP64())
	c.SHRQ(Imm(3), nch)
	kp := c.Load(c.Param("k").Base(), c.GP64())
	st, unit := cacheStride(c, f16)
	st3 := c.GP64()
	c.LEAQ(Mem{Base: st, Index: st, Scale: 2}, st3)
	n := c.Load(c.Param("out").Len(), c.GP64())
	c.SHRQ(Imm(5), n)
	op := c.Load(c.Param("out").Base(), c.GP64())
	c.TESTQ(n, n)
	c.JZ(LabelRef(name + "_done"))
	ahead := aheadOf(c, st)
	c.Label(name + "_rows")
	prefetchAhead(c, name+"_prefetch", kp, ahead, st, 4)
	var acc [2][]reg.VecVirtual // [row pair][head]: rows 2p (low half), 2p+1 (high)
	for p := range acc {
		acc[p] = make([]reg.VecVirtual, G)
		for g := range acc[p] {
			acc[p][g] = c.ZMM()
			c.VPXORD(acc[p][g], acc[p][g], acc[p][g])
		}
	}
	i, qi, qi3, ki := c.GP64(), c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(nch, i)
	c.MOVQ(qp, qi)
	c.MOVQ(kp, ki)
	c.Label(name + "_col")
	c.LEAQ(Mem{Base: qi, Index: qs3, Scale: 1}, qi3)
	rows := []Mem{{Base: ki}, {Base: ki, Index: st, Scale: 1}, {Base: ki, Index: st, Scale: 2}, {Base: ki, Index: st3, Scale: 1}}
	var kv [2]reg.VecVirtual
	for p := range kv {
		kv[p] = c.ZMM()
		if f16 {
			t := c.YMM()
			c.VMOVDQU32(rows[2*p], t.AsX())
			c.VINSERTI32X4(Imm(1), rows[2*p+1], t, t)
			c.VCVTPH2PS(t, kv[p])
		} else {
			c.VMOVUPS(rows[2*p], kv[p].AsY())
			c.VINSERTF64X4(Imm(1), rows[2*p+1], kv[p], kv[p])
		}
	}
	for g := range G {
		qv := c.ZMM()
		c.VBROADCASTF64X4(headMem(qi, qi3, qs, qs3, g, 0), qv)
		for p := range kv {
			c.VFMADD231PS(qv, kv[p], acc[p][g])
		}
	}
	c.ADDQ(U32(32), qi)
	c.ADDQ(U32(uint64(unit)), ki)
	c.DECQ(i)
	c.JNZ(LabelRef(name + "_col"))
	zero := c.ZMM()
	c.VPXORD(zero, zero, zero)
	for p := range acc {
		var a [maxGroup]reg.VecVirtual
		for g := range a {
			a[g] = zero
			if g < G {
				a[g] = acc[p][g]
			}
		}
		c.VMOVUPS(reduce8x2(c, a), Mem{Base: op, Disp: 64 * p})
	}
	c.ADDQ(U32(128), op)
	c.LEAQ(Mem{Base: kp, Index: st, Scale: 4}, kp)
	c.DECQ(n)
	c.JNZ(LabelRef(name + "_rows"))
	c.Label(name + "_done")
	c.VZEROUPPER()
	c.RET()
}

// reduce8x2 is reduce8 on accumulators of two rows each (row 0 in the low
// 256 bits, row 1 in the high): the same additions on the same operands,
// sixteen lanes at a time, giving row 0's eight sums then row 1's.
func reduce8x2(c *build.Context, a [maxGroup]reg.VecVirtual) reg.VecVirtual {
	f := transposeSum(c, a, c.ZMM, func(hi, lo reg.VecVirtual, i int) {
		// 128-bit lanes: a[i] row 0, row 1, a[i+4] row 0, row 1
		c.VSHUFF64X2(Imm(0x88), a[i+4], a[i], lo) // lanes 0, 2 of each
		c.VSHUFF64X2(Imm(0xDD), a[i+4], a[i], hi) // lanes 1, 3 of each
	})
	// 128-bit lanes: g0-3 row 0, g0-3 row 1, g4-7 row 0, g4-7 row 1
	c.VSHUFF64X2(Imm(0xD8), f, f, f)
	return f
}

// axpyRowsG emits func name(acc []float32, as, d int, w []float32, v,
// stride): acc[g·as : g·as+d] += Σ_j w[8j+g]·row j of v for g < G, rows in
// order with FMA; each row's vectors are loaded (and widened) once for all
// G heads (AVX2 with more than four: once for each four), blk of them per
// pass over the rows. AVX2: eight elements per
// YMM, each weight broadcast to a register, d a positive multiple of 8;
// zmm (AVX-512): sixteen per ZMM, the weight a broadcast operand of the
// FMAs, d a positive multiple of 16.
func axpyRowsG(c *build.Context, name, kt string, G int, f16, zmm bool) {
	lanes, vec, needs := 8, c.YMM, "AVX2, FMA and F16C"
	if zmm {
		lanes, vec, needs = 16, c.ZMM, "AVX-512F"
	}
	blkFor := func(heads int) int {
		if zmm {
			return min(4, 30/(heads+1))
		}
		return max(1, 13/(heads+1))
	}
	// AVX2 with more than four heads: two passes over the tile, four
	// heads at a time, each with two vectors of every row per pass. One
	// pass of all the heads holds a single vector (eight accumulators, a
	// row vector, a weight: all that sixteen YMM registers allow), so each
	// row vector took eight weight broadcasts (a load each) for its eight
	// FMAs; by halves it takes four for eight, and each head's FMAs are
	// the same in the same order.
	sets := [][2]int{{0, G}}
	if !zmm && G > 4 {
		sets = [][2]int{{0, 4}, {4, G}}
	}
	groupedFunc(c, name, axpySig, kt,
		fmt.Sprintf("%s adds w[8j+g]·(row j of v) to acc[g*as:g*as+d] for g < %d and every", name, G),
		fmt.Sprintf("j < len(w)/8, in row order with FMA; d a positive multiple of %d. It needs %s.", lanes, needs))
	shift := uint64(3) // a vector's elements, log2
	if zmm {
		shift = 4
	}
	accBytes := 4 * lanes
	for si, set := range sets {
		g0, heads := set[0], set[1]-set[0]
		blk := blkFor(heads)
		lbl := func(s string) string { return fmt.Sprintf("%s_%s%d", name, s, si) }
		end := name + "_done"
		if si+1 < len(sets) {
			end = fmt.Sprintf("%s_set%d", name, si+1)
		}
		if si > 0 {
			c.Label(lbl("set"))
		}
		ap := c.Load(c.Param("acc").Base(), c.GP64())
		as, as3 := strides(c, "as", 2)
		if g0 > 0 {
			c.LEAQ(Mem{Base: ap, Index: as, Scale: uint8(g0)}, ap) // g0 is 4
		}
		a3 := c.GP64()
		c.LEAQ(Mem{Base: ap, Index: as3, Scale: 1}, a3)
		nch := c.Load(c.Param("d"), c.GP64())
		c.SHRQ(Imm(shift), nch)
		wp0 := c.Load(c.Param("w").Base(), c.GP64())
		if g0 > 0 {
			c.ADDQ(U32(uint64(4*g0)), wp0)
		}
		n0 := c.Load(c.Param("w").Len(), c.GP64())
		c.SHRQ(Imm(3), n0)
		vp0 := c.Load(c.Param("v").Base(), c.GP64())
		st, eight := cacheStride(c, f16)
		unit := eight * lanes / 8 // a row vector's bytes
		c.TESTQ(n0, n0)
		c.JZ(LabelRef(name + "_done"))
		c.Label(lbl("chunk"))
		c.TESTQ(nch, nch)
		c.JZ(LabelRef(end))
		pass := func(label string, nv int) {
			r := make([][]reg.VecVirtual, heads)
			for g := range r {
				r[g] = make([]reg.VecVirtual, nv)
				for k := range r[g] {
					r[g][k] = vec()
					c.VMOVUPS(headMem(ap, a3, as, as3, g, accBytes*k), r[g][k])
				}
			}
			n, wp, vp := c.GP64(), c.GP64(), c.GP64()
			c.MOVQ(n0, n)
			c.MOVQ(wp0, wp)
			c.MOVQ(vp0, vp)
			// The lines of the pass's vectors prefetchRows rows ahead,
			// with each row (a pass over a row's later vectors asks for
			// its own).
			pf := aheadOf(c, st)
			c.ADDQ(vp, pf)
			c.Label(label)
			for l := 0; l < (unit*nv+63)/64; l++ {
				c.PREFETCHT0(Mem{Base: pf, Disp: 64 * l})
			}
			c.ADDQ(st, pf)
			kv := make([]reg.VecVirtual, nv)
			for k := range kv {
				kv[k] = vec()
				if f16 {
					c.VCVTPH2PS(Mem{Base: vp, Disp: unit * k}, kv[k])
				} else {
					c.VMOVUPS(Mem{Base: vp, Disp: unit * k}, kv[k])
				}
			}
			for g := range r {
				wm := Mem{Base: wp, Disp: 4 * g}
				if zmm {
					for k := range kv {
						c.VFMADD231PS_BCST(wm, kv[k], r[g][k])
					}
					continue
				}
				wv := c.YMM()
				c.VBROADCASTSS(wm, wv)
				for k := range kv {
					c.VFMADD231PS(kv[k], wv, r[g][k])
				}
			}
			c.ADDQ(U32(32), wp)
			c.ADDQ(st, vp)
			c.DECQ(n)
			c.JNZ(LabelRef(label))
			for g := range r {
				for k := range r[g] {
					c.VMOVUPS(r[g][k], headMem(ap, a3, as, as3, g, accBytes*k))
				}
			}
			c.ADDQ(U32(uint64(accBytes*nv)), ap)
			c.ADDQ(U32(uint64(accBytes*nv)), a3)
			c.ADDQ(U32(uint64(unit*nv)), vp0)
			c.SUBQ(Imm(uint64(nv)), nch)
			c.JMP(LabelRef(lbl("chunk")))
		}
		if blk > 1 {
			c.CMPQ(nch, Imm(uint64(blk)))
			c.JL(LabelRef(lbl("small")))
			pass(lbl("rows"), blk)
			c.Label(lbl("small"))
		}
		pass(lbl("row1"), 1)
	}
	c.Label(name + "_done")
	c.VZEROUPPER()
	c.RET()
}

// axpyRowsQ8GZ emits func name(acc []float32, as, d int, w []float32, v
// []byte, stride int): acc[g·as : g·as+d] += Σ_j w[8j+g]·row j of the q8_0
// cache v (rows stride bytes apart) for g < G, as axpyRowsQ8AVX2 computes
// each head — per row and block wd = w[j]·d rounded, then acc = fma(q, wd,
// acc) in row order — one block (two ZMM of sixteen) of every head per pass,
// the block's values widened once for all heads; d a positive multiple of
// 32.
func axpyRowsQ8GZ(c *build.Context, name string, G int) {
	groupedFunc(c, name, axpySig, "byte",
		fmt.Sprintf("%s adds w[8j+g]·(row j of the q8_0 cache v) to acc[g*as:g*as+d] for g < %d", name, G),
		"and every j < len(w)/8, in row order with FMA; d a positive multiple of 32. It needs AVX-512F.")
	ap := c.Load(c.Param("acc").Base(), c.GP64())
	a3, as, as3 := headBases(c, "as", ap)
	nb := c.Load(c.Param("d"), c.GP64())
	c.SHRQ(Imm(5), nb)
	wp0 := c.Load(c.Param("w").Base(), c.GP64())
	n0 := c.Load(c.Param("w").Len(), c.GP64())
	c.SHRQ(Imm(3), n0)
	vp0 := c.Load(c.Param("v").Base(), c.GP64())
	st := c.Load(c.Param("stride"), c.GP64())
	c.TESTQ(n0, n0)
	c.JZ(LabelRef(name + "_done"))
	c.Label(name + "_block")
	c.TESTQ(nb, nb)
	c.JZ(LabelRef(name + "_done"))
	r := make([][2]reg.VecVirtual, G)
	for g := range r {
		for k := range r[g] {
			r[g][k] = c.ZMM()
			c.VMOVUPS(headMem(ap, a3, as, as3, g, 64*k), r[g][k])
		}
	}
	n, wp, vp := c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(n0, n)
	c.MOVQ(wp0, wp)
	c.MOVQ(vp0, vp)
	c.Label(name + "_row")
	h := c.XMM()
	c.VCVTPH2PS(Mem{Base: vp}, h) // d and three values: lane 0 is d
	dz := c.ZMM()
	c.VBROADCASTSS(h, dz)
	var kv [2]reg.VecVirtual
	for k := range kv {
		kv[k] = c.ZMM()
		c.VPMOVSXBD(Mem{Base: vp, Disp: 2 + 16*k}, kv[k])
		c.VCVTDQ2PS(kv[k], kv[k])
	}
	for g := range r {
		wd := c.ZMM()
		c.VMULPS_BCST(Mem{Base: wp, Disp: 4 * g}, dz, wd) // w·d, rounded
		for k := range kv {
			c.VFMADD231PS(kv[k], wd, r[g][k])
		}
	}
	c.ADDQ(U32(32), wp)
	c.ADDQ(st, vp)
	c.DECQ(n)
	c.JNZ(LabelRef(name + "_row"))
	for g := range r {
		for k := range r[g] {
			c.VMOVUPS(r[g][k], headMem(ap, a3, as, as3, g, 64*k))
		}
	}
	c.ADDQ(U32(128), ap)
	c.ADDQ(U32(128), a3)
	c.ADDQ(U32(34), vp0)
	c.DECQ(nb)
	c.JMP(LabelRef(name + "_block"))
	c.Label(name + "_done")
	c.VZEROUPPER()
	c.RET()
}
