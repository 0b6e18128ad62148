// Command kernattn generates runtime/cpu/kern/attn_amd64.s and
// attn_amd64_stubs.go: the AVX2+FMA+F16C attention tile kernels over f16
// and q8_0 KV caches (the f32 ones are kernvec's scoresF32 and
// axpyRowsF32). A tile's scores are one call (q against each cache row),
// its weighted values another (the accumulator held in registers while the
// rows stream past), so a row of K or V is read once per query head and
// tile.
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
	return avoutil.Write(c, "codegen/goasm/gen/kernattn", dir, "attn_amd64.s", "attn_amd64_stubs.go")
}

// scoresF16 emits func scoresF16AVX2(q []float32, k []uint16, stride int,
// out []float32): out[j] = q · k[j*stride : j*stride+len(q)], the halves
// widened with F16C, len(q) a multiple of 8.
func scoresF16(c *build.Context) {
	avoutil.TileScores(c, "scoresF16AVX2", "func(q []float32, k []uint16, stride int, out []float32)", "sf16",
		[]string{"scoresF16AVX2 sets out[j] to the dot of q (len a multiple of 8) with row j of the f16",
			"cache k (rows stride halves apart). It needs AVX2, FMA and F16C."}, 1, 3,
		func(acc reg.VecVirtual, qi, ki reg.Register) {
			v := c.YMM()
			c.VCVTPH2PS(Mem{Base: ki}, v)
			c.VFMADD231PS(Mem{Base: qi}, v, acc)
			c.ADDQ(U32(32), qi)
			c.ADDQ(U32(16), ki)
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
			"cache k (rows stride bytes apart). It needs AVX2, FMA and F16C."}, 0, 5,
		func(acc reg.VecVirtual, qi, ki reg.Register) {
			blk := c.YMM()
			c.VXORPS(blk, blk, blk)
			for i := 0; i < 4; i++ {
				t := q8Values(c, Mem{Base: ki, Disp: 2 + 8*i})
				c.VFMADD231PS(Mem{Base: qi, Disp: 32 * i}, t, blk)
			}
			d := q8Scale(c, Mem{Base: ki})
			c.VFMADD231PS(blk, d, acc)
			c.ADDQ(U32(128), qi)
			c.ADDQ(U32(34), ki)
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
