// Command kernvec generates runtime/cpu/kern/vec_amd64.s and
// vec_amd64_stubs.go: AVX2+FMA kernels over float32 vectors for the CPU
// backend's non-matmul work — the attention dot and axpy, the SwiGLU
// epilogue silu(g)·u with a vectorized exp, and RMSNorm's float64 sum of
// squares and scaling.
//
// The kernels handle whole vectors of 8 (32 for the dot); kern's Go
// wrappers finish the tail.
//
// Usage (from runtime/cpu/kern, see its go:generate line in vec.go):
//
//	go run ../../../codegen/goasm/gen/kernvec -dir .
package main

import (
	"flag"
	"fmt"
	"github.com/minerva-llm/minerva/codegen/goasm/gen/internal/avoutil"
	"math"
	"os"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func main() {
	dir := flag.String("dir", ".", "directory that receives vec_amd64.s and vec_amd64_stubs.go")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "kernvec:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	c := build.NewContext()
	c.ConstraintExpr("amd64")
	dotF32(c)
	axpyF32(c)
	f32ToF16(c)
	siluMul(c)
	expSub(c, false)
	scaleMax8(c)
	expSub(c, true)
	quantQ8_0(c)
	quantQ8_K(c)
	for _, t := range []string{"F32", "F16", "BF16"} {
		dotWeights(c, t)
	}
	scoresF32(c)
	axpyRowsF32(c)
	prefetch(c)
	sumSquares(c)
	scaleRow(c, false)
	scaleRow(c, true)

	return avoutil.Write(c, "codegen/goasm/gen/kernvec", dir, "vec_amd64.s", "vec_amd64_stubs.go")
}

// f32Const defines a 32-byte read-only vector of eight copies of v.
func f32Const(c *build.Context, name string, v float32) Mem {
	return u32Const(c, name, math.Float32bits(v))
}

func u32Const(c *build.Context, name string, v uint32) Mem {
	m := c.StaticGlobal(name)
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for i := 0; i < 8; i++ {
		c.AddDatum(4*i, U32(v))
	}
	return m
}

// dotF32 emits func dotF32AVX2(a, b []float32) float32 over the first
// len(a)&^31 elements: four accumulators of eight lanes, element i in
// accumulator (i/8)%4 lane i%8, summed as ((acc0+acc1)+(acc2+acc3)) and then
// lanes (hi+lo), pairs, singles.
func dotF32(c *build.Context) {
	avoutil.Function(c, "dotF32AVX2", "func(a, b []float32) float32",
		"dotF32AVX2 is the dot product of a[:len(a)&^31] and b. It needs AVX2 and FMA.")
	n := c.Load(c.Param("a").Len(), c.GP64())
	x := c.Load(c.Param("a").Base(), c.GP64())
	y := c.Load(c.Param("b").Base(), c.GP64())
	c.SHRQ(Imm(5), n)
	var acc [4]reg.VecVirtual
	for i := range acc {
		acc[i] = c.YMM()
		c.VXORPS(acc[i], acc[i], acc[i])
	}
	c.TESTQ(n, n)
	c.JZ(LabelRef("dot_done"))
	c.Label("dot_loop")
	for i := range acc {
		v := c.YMM()
		c.VMOVUPS(Mem{Base: x, Disp: 32 * i}, v)
		c.VFMADD231PS(Mem{Base: y, Disp: 32 * i}, v, acc[i])
	}
	c.ADDQ(U32(128), x)
	c.ADDQ(U32(128), y)
	c.DECQ(n)
	c.JNZ(LabelRef("dot_loop"))
	c.Label("dot_done")
	c.VADDPS(acc[1], acc[0], acc[0])
	c.VADDPS(acc[3], acc[2], acc[2])
	c.VADDPS(acc[2], acc[0], acc[0])
	r := avoutil.HSumFloat8(c, acc[0])
	c.VZEROUPPER()
	c.Store(r, c.ReturnIndex(0))
	c.RET()
}

// axpyF32 emits func axpyF32AVX2(dst []float32, alpha float32, x []float32):
// dst[i] = fma(alpha, x[i], dst[i]) for i < len(dst)&^7.
func axpyF32(c *build.Context) {
	avoutil.Function(c, "axpyF32AVX2", "func(dst []float32, alpha float32, x []float32)",
		"axpyF32AVX2 adds alpha·x to dst[:len(dst)&^7] (fused). It needs AVX2 and FMA.")
	n := c.Load(c.Param("dst").Len(), c.GP64())
	d := c.Load(c.Param("dst").Base(), c.GP64())
	x := c.Load(c.Param("x").Base(), c.GP64())
	a := c.Load(c.Param("alpha"), c.XMM())
	al := c.YMM()
	c.VBROADCASTSS(a, al)
	eighths(c, "axpy", n, func() {
		v := c.YMM()
		c.VMOVUPS(Mem{Base: d}, v)
		c.VFMADD231PS(Mem{Base: x}, al, v)
		c.VMOVUPS(v, Mem{Base: d})
		c.ADDQ(U32(32), d)
		c.ADDQ(U32(32), x)
	})
	c.VZEROUPPER()
	c.RET()
}

// f32ToF16 emits func f32ToF16AVX2(dst []uint16, x []float32): dst[i] =
// x[i] as a half, rounded to nearest even (VCVTPS2PH, imm 0), for i <
// len(dst)&^7: the KV cache's f16 rows. Every finite value and infinity
// converts as quant.F32ToF16 converts it; a NaN keeps its payload's top
// bits, which the caller mends (kern.Kernels.F32ToF16).
func f32ToF16(c *build.Context) {
	avoutil.Function(c, "f32ToF16AVX2", "func(dst []uint16, x []float32)",
		"f32ToF16AVX2 sets dst[:len(dst)&^7] to x's halves, rounded to nearest even. It needs AVX2 and F16C.")
	n := c.Load(c.Param("dst").Len(), c.GP64())
	d := c.Load(c.Param("dst").Base(), c.GP64())
	x := c.Load(c.Param("x").Base(), c.GP64())
	eighths(c, "f32tof16", n, func() {
		v, h := c.YMM(), c.XMM()
		c.VMOVUPS(Mem{Base: x}, v)
		c.VCVTPS2PH(Imm(0), v, h)
		c.VMOVDQU(h, Mem{Base: d})
		c.ADDQ(U32(32), x)
		c.ADDQ(U32(16), d)
	})
	c.VZEROUPPER()
	c.RET()
}

// siluMul emits func siluMulAVX2(dst, g, u []float32): dst[i] =
// g/(1+exp(-g))·u for i < len(dst)&^7, with Cephes' expf (range reduction
// by ln 2 in two parts, a degree-5 polynomial, 2^n built in the exponent
// bits): within 2 ulp of exp over the clamped range ±88.376.
func siluMul(c *build.Context) {
	avoutil.Function(c, "siluMulAVX2", "func(dst, g, u []float32)",
		"siluMulAVX2 sets dst[i] = silu(g[i])·u[i] for i < len(dst)&^7. It needs AVX2 and FMA.")
	k := expConsts(c)
	n := c.Load(c.Param("dst").Len(), c.GP64())
	d := c.Load(c.Param("dst").Base(), c.GP64())
	gp := c.Load(c.Param("g").Base(), c.GP64())
	up := c.Load(c.Param("u").Base(), c.GP64())
	eighths(c, "silu", n, func() {
		g := c.YMM()
		c.VMOVUPS(Mem{Base: gp}, g)
		x := c.YMM()
		c.VXORPS(k["sign"], g, x) // x = -g
		y := expInto(c, k, x)     // exp(-g)
		c.VADDPS(k["one"], y, y)
		c.VDIVPS(y, g, g) // g / (1 + exp(-g))
		c.VMULPS(Mem{Base: up}, g, g)
		c.VMOVUPS(g, Mem{Base: d})
		c.ADDQ(U32(32), d)
		c.ADDQ(U32(32), gp)
		c.ADDQ(U32(32), up)
	})
	c.VZEROUPPER()
	c.RET()
}

// expConsts defines the constants of expInto (once per generated file).
func expConsts(c *build.Context) map[string]Mem {
	if expK != nil {
		return expK
	}
	expK = map[string]Mem{
		"hi":    f32Const(c, "expHi", 88.3762626647949),
		"lo":    f32Const(c, "expLo", -88.3762626647949),
		"log2e": f32Const(c, "expLog2e", 1.44269504088896341),
		"half":  f32Const(c, "expHalf", 0.5),
		"one":   f32Const(c, "expOne", 1),
		"c1":    f32Const(c, "expC1", 0.693359375),
		"c2":    f32Const(c, "expC2", -2.12194440e-4),
		"p0":    f32Const(c, "expP0", 1.9875691500e-4),
		"p1":    f32Const(c, "expP1", 1.3981999507e-3),
		"p2":    f32Const(c, "expP2", 8.3334519073e-3),
		"p3":    f32Const(c, "expP3", 4.1665795894e-2),
		"p4":    f32Const(c, "expP4", 1.6666665459e-1),
		"p5":    f32Const(c, "expP5", 5.0000001201e-1),
		"bias":  u32Const(c, "expBias", 127),
		"sign":  u32Const(c, "expSign", 0x80000000),
	}
	return expK
}

var expK map[string]Mem

// expInto returns a register holding exp(x) for the eight lanes of x (x is
// overwritten): Cephes' expf — x clamped to ±88.376, n = floor(x·log2e+½),
// r = x − n·ln2 in two parts, a degree-5 polynomial in r, times 2^n built
// in the exponent bits.
func expInto(c *build.Context, k map[string]Mem, x reg.VecVirtual) reg.VecVirtual {
	c.VMINPS(k["hi"], x, x)
	c.VMAXPS(k["lo"], x, x)
	fx := c.YMM()
	c.VMOVAPS(k["half"], fx)
	c.VFMADD231PS(k["log2e"], x, fx) // fx = x·log2e + 0.5
	c.VROUNDPS(Imm(1), fx, fx)       // floor
	c.VFNMADD231PS(k["c1"], fx, x)   // x -= fx·c1
	c.VFNMADD231PS(k["c2"], fx, x)   // x -= fx·c2
	z := c.YMM()
	c.VMULPS(x, x, z)
	y := c.YMM()
	c.VMOVAPS(k["p0"], y)
	for _, p := range []string{"p1", "p2", "p3", "p4", "p5"} {
		c.VFMADD213PS(k[p], x, y) // y = y·x + p
	}
	c.VFMADD213PS(x, z, y) // y = y·z + x
	c.VADDPS(k["one"], y, y)
	e := c.YMM()
	c.VCVTTPS2DQ(fx, e)
	c.VPADDD(k["bias"], e, e)
	c.VPSLLD(Imm(23), e, e) // 2^n
	c.VMULPS(e, y, y)
	return y
}

// expSub emits func expSubAVX2(dst, x []float32, m float32): dst[i] =
// exp(x[i] − m) for i < len(dst)&^7 (the softmax weights of an attention
// tile); with sum, func expSubSum8AVX2(dst, x, m, l []float32): dst[8j+g]
// = exp(x[8j+g] − m[g]), the same exp, added to l[g] row by row (the
// running softmax sums of eight heads).
func expSub(c *build.Context, sum bool) {
	name, pre := "expSubAVX2", "expsub"
	if sum {
		name, pre = "expSubSum8AVX2", "expsum"
	}
	if sum {
		avoutil.Function(c, name, "func(dst, x, m, l []float32)",
			"expSubSum8AVX2 sets dst[8j+g] = exp(x[8j+g]-m[g]) and adds it to l[g], rows j in order,",
			"for j < len(dst)/8. It needs AVX2 and FMA.")
	} else {
		avoutil.Function(c, name, "func(dst, x []float32, m float32)",
			"expSubAVX2 sets dst[i] = exp(x[i]-m) for i < len(dst)&^7. It needs AVX2 and FMA.")
	}
	k := expConsts(c)
	n := c.Load(c.Param("dst").Len(), c.GP64())
	d := c.Load(c.Param("dst").Base(), c.GP64())
	xp := c.Load(c.Param("x").Base(), c.GP64())
	mv, lv := c.YMM(), c.YMM()
	var lp reg.Register
	if sum {
		mp := c.Load(c.Param("m").Base(), c.GP64())
		lp = c.Load(c.Param("l").Base(), c.GP64())
		c.VMOVUPS(Mem{Base: mp}, mv)
		c.VMOVUPS(Mem{Base: lp}, lv)
	} else {
		ms := c.Load(c.Param("m"), c.XMM())
		c.VBROADCASTSS(ms, mv)
	}
	eighths(c, pre, n, func() {
		x := c.YMM()
		c.VMOVUPS(Mem{Base: xp}, x)
		c.VSUBPS(mv, x, x)
		y := expInto(c, k, x)
		c.VMOVUPS(y, Mem{Base: d})
		if sum {
			c.VADDPS(y, lv, lv)
		}
		c.ADDQ(U32(32), d)
		c.ADDQ(U32(32), xp)
	})
	if sum {
		c.VMOVUPS(lv, Mem{Base: lp})
	}
	c.VZEROUPPER()
	c.RET()
}

// quantQ8_0 emits func quantQ8_0AVX2(x []float32, dst, side []byte):
// ggml's quantize_row_q8_0_ref on len(x)/32 blocks, byte for byte — amax,
// d = amax/127 stored as f16 (round to nearest even), id = 1/d (0 for d =
// 0), q = roundf(x·id) rounded half away from zero — and, when side is not
// empty, kern's packed-activation side data {int32 8Σq, float32 f16(d)} per
// block.
func quantQ8_0(c *build.Context) {
	avoutil.Function(c, "quantQ8_0AVX2", "func(x []float32, dst, side []byte)",
		"quantQ8_0AVX2 is quantize_row_q8_0_ref on x (len a multiple of 32) into dst,",
		"plus {8Σq, f16(d)} per block into side unless side is empty. It needs AVX2, FMA, F16C.")
	absMask := u32Const(c, "q8AbsMask", 0x7fffffff)
	signMask := u32Const(c, "q8SignMask", 0x80000000)
	half := f32Const(c, "q8Half", 0.5)
	one := f32Const(c, "q8One", 1)
	perm := packPerm(c)
	n := c.Load(c.Param("x").Len(), c.GP64())
	xp := c.Load(c.Param("x").Base(), c.GP64())
	dp := c.Load(c.Param("dst").Base(), c.GP64())
	sp := c.Load(c.Param("side").Base(), c.GP64())
	sl := c.Load(c.Param("side").Len(), c.GP64())
	c.SHRQ(Imm(5), n)
	c.TESTQ(n, n)
	c.JZ(LabelRef("q8_done"))
	c127 := c.XMM()
	t := c.GP32()
	c.MOVL(U32(0x42fe0000), t) // 127.0
	c.VMOVD(t, c127)
	c.Label("q8_block")
	var xs [4]reg.VecVirtual
	for i := range xs {
		xs[i] = c.YMM()
		c.VMOVUPS(Mem{Base: xp, Disp: 32 * i}, xs[i])
	}
	// amax, exact: max of |x| across the 32 values.
	m0, m1 := c.YMM(), c.YMM()
	c.VANDPS(absMask, xs[0], m0)
	c.VANDPS(absMask, xs[1], m1)
	c.VMAXPS(m1, m0, m0)
	c.VANDPS(absMask, xs[2], m1)
	c.VMAXPS(m1, m0, m0)
	c.VANDPS(absMask, xs[3], m1)
	c.VMAXPS(m1, m0, m0)
	h := c.XMM()
	c.VEXTRACTF128(Imm(1), m0, h)
	c.VMAXPS(h, m0.AsX(), h)
	h2 := c.XMM()
	c.VMOVHLPS(h, h, h2)
	c.VMAXPS(h2, h, h)
	c.VMOVSHDUP(h, h2)
	c.VMAXSS(h2, h, h) // amax in lane 0
	d := c.XMM()
	c.VDIVSS(c127, h, d) // d = amax/127
	dh := c.XMM()
	c.VCVTPS2PH(Imm(0), d, dh) // f16(d), nearest even
	w := c.GP32()
	c.VMOVD(dh, w)
	c.MOVW(w.As16(), Mem{Base: dp})
	// id = 1/d, or 0 when d = 0.
	id := c.XMM()
	c.VMOVSS(one.Offset(0), id)
	c.VDIVSS(d, id, id)
	z := c.XMM()
	c.VXORPS(z, z, z)
	nz := c.XMM()
	c.VCMPSS(Imm(4), z, d, nz) // d != 0
	c.VANDPS(nz, id, id)
	idv := c.YMM()
	c.VBROADCASTSS(id, idv)
	var qs [4]reg.VecVirtual
	for i := range qs {
		y := c.YMM()
		c.VMULPS(idv, xs[i], y)
		tr := c.YMM()
		c.VROUNDPS(Imm(3), y, tr) // trunc
		f := c.YMM()
		c.VSUBPS(tr, y, f) // exact fraction
		c.VANDPS(absMask, f, f)
		c.VCMPPS(Imm(13), half, f, f) // |frac| >= 0.5
		sg := c.YMM()
		c.VANDPS(signMask, y, sg)
		c.VORPS(one, sg, sg) // ±1
		c.VANDPS(f, sg, sg)
		c.VADDPS(sg, tr, tr) // roundf: half away from zero
		qs[i] = c.YMM()
		c.VCVTTPS2DQ(tr, qs[i])
		// Keep the low byte, sign-extended: Go's (and C's usual)
		// int8(int32(v)). Only blocks whose d underflows to a subnormal
		// (id = +Inf) have values outside int8.
		c.VPSLLD(Imm(24), qs[i], qs[i])
		c.VPSRAD(Imm(24), qs[i], qs[i])
	}
	a, b := c.YMM(), c.YMM()
	c.VPACKSSDW(qs[1], qs[0], a)
	c.VPACKSSDW(qs[3], qs[2], b)
	c.VPACKSSWB(b, a, a)
	pm := c.YMM()
	c.VMOVDQU(perm, pm)
	c.VPERMD(a, pm, a) // undo the packs' lane interleave
	c.VMOVDQU(a, Mem{Base: dp, Disp: 2})
	c.TESTQ(sl, sl)
	c.JZ(LabelRef("q8_next"))
	// side: 8Σq and f16(d) as float32.
	c.VPADDD(qs[1], qs[0], qs[0])
	c.VPADDD(qs[3], qs[2], qs[2])
	c.VPADDD(qs[2], qs[0], qs[0])
	hs := c.XMM()
	c.VEXTRACTI128(Imm(1), qs[0], hs)
	c.VPADDD(qs[0].AsX(), hs, hs)
	hs2 := c.XMM()
	c.VPSHUFD(Imm(0x4e), hs, hs2)
	c.VPADDD(hs2, hs, hs)
	c.VPSHUFD(Imm(0xb1), hs, hs2)
	c.VPADDD(hs2, hs, hs)
	c.VPSLLD(Imm(3), hs, hs)
	c.VMOVD(hs, Mem{Base: sp})
	df := c.XMM()
	c.VCVTPH2PS(dh, df)
	c.VMOVSS(df, Mem{Base: sp, Disp: 4})
	c.ADDQ(Imm(8), sp)
	c.Label("q8_next")
	c.ADDQ(U32(128), xp)
	c.ADDQ(U32(34), dp)
	c.DECQ(n)
	c.JNZ(LabelRef("q8_block"))
	c.Label("q8_done")
	c.VZEROUPPER()
	c.RET()
}

// dotWeights emits func dot<T>BytesAVX2(n int, w, a []byte) float32: the dot
// of n (a multiple of 32) float weights of type T (F32, F16 or BF16, little
// endian, any alignment) with activations of the same type, widened to
// float32 and summed with FMA in four accumulators of eight lanes (element i
// in accumulator (i/8)%4), then ((acc0+acc1)+(acc2+acc3)) and the lanes as
// dotF32AVX2 does. ggml's SIMD float dots work the same way; its generic ones
// sum in double, so results differ from the generic variant in the last bits.
func dotWeights(c *build.Context, t string) {
	name := "dot" + t + "BytesAVX2"
	avoutil.Function(c, name, "func(n int, w, a []byte) float32",
		name+" is the dot of n (a multiple of 32) "+t+" weights and "+t+" activations in float32",
		"with FMA. It needs AVX2, FMA and F16C.")
	size := map[string]int{"F32": 4, "F16": 2, "BF16": 2}[t]
	n := c.Load(c.Param("n"), c.GP64())
	x := c.Load(c.Param("w").Base(), c.GP64())
	y := c.Load(c.Param("a").Base(), c.GP64())
	c.SHRQ(Imm(5), n)
	var acc [4]reg.VecVirtual
	for i := range acc {
		acc[i] = c.YMM()
		c.VXORPS(acc[i], acc[i], acc[i])
	}
	load := func(m Mem) reg.VecVirtual {
		v := c.YMM()
		switch t {
		case "F32":
			c.VMOVUPS(m, v)
		case "F16":
			c.VCVTPH2PS(m, v)
		case "BF16":
			c.VPMOVZXWD(m, v)
			c.VPSLLD(Imm(16), v, v)
		}
		return v
	}
	lbl := func(s string) string { return "dot" + t + "_" + s }
	c.TESTQ(n, n)
	c.JZ(LabelRef(lbl("done")))
	c.Label(lbl("loop"))
	for i := range acc {
		wv := load(Mem{Base: x, Disp: 8 * size * i})
		av := load(Mem{Base: y, Disp: 8 * size * i})
		c.VFMADD231PS(av, wv, acc[i])
	}
	c.ADDQ(U32(32*size), x)
	c.ADDQ(U32(32*size), y)
	c.DECQ(n)
	c.JNZ(LabelRef(lbl("loop")))
	c.Label(lbl("done"))
	c.VADDPS(acc[1], acc[0], acc[0])
	c.VADDPS(acc[3], acc[2], acc[2])
	c.VADDPS(acc[2], acc[0], acc[0])
	r := avoutil.HSumFloat8(c, acc[0])
	c.VZEROUPPER()
	c.Store(r, c.ReturnIndex(0))
	c.RET()
}

// scoresF32 emits func scoresF32AVX2(q, k []float32, stride int, out
// []float32): out[j] = q · k[j*stride : j*stride+len(q)] for j < len(out),
// len(q) a multiple of 8 — one attention tile's scores against f32 cache
// rows stride floats apart, in one call. Each dot runs in one accumulator of
// eight lanes (element i in lane i%8), then the lanes as dotF32AVX2 does.
func scoresF32(c *build.Context) {
	avoutil.TileScores(c, "scoresF32AVX2", "func(q, k []float32, stride int, out []float32)", "scores",
		[]string{"scoresF32AVX2 sets out[j] to the dot of q (len a multiple of 8) with row j of k",
			"(rows stride floats apart). It needs AVX2 and FMA."}, 2, 3, 32, 32,
		func(acc []reg.VecVirtual, q Mem, k []Mem) {
			v := c.YMM()
			c.VMOVUPS(q, v)
			for r := range acc {
				c.VFMADD231PS(k[r], v, acc[r])
			}
		})
}

// axpyRowsF32 emits func axpyRowsF32AVX2(acc, w, v []float32, stride int):
// acc += Σ_j w[j]·v[j*stride : j*stride+len(acc)] for j < len(w), len(acc) a
// multiple of 8 — one attention tile's weighted values. acc is held in
// registers 64 floats at a time while the tile's rows stream past; each
// element is a chain of fused multiply-adds in row order.
func axpyRowsF32(c *build.Context) {
	avoutil.Function(c, "axpyRowsF32AVX2", "func(acc, w, v []float32, stride int)",
		"axpyRowsF32AVX2 adds w[j]·(row j of v, rows stride floats apart) to acc (len a",
		"multiple of 8) for every j, in row order with FMA. It needs AVX2 and FMA.")
	d := c.Load(c.Param("acc").Len(), c.GP64())
	ap := c.Load(c.Param("acc").Base(), c.GP64())
	wp0 := c.Load(c.Param("w").Base(), c.GP64())
	n0 := c.Load(c.Param("w").Len(), c.GP64())
	vp0 := c.Load(c.Param("v").Base(), c.GP64())
	st := c.Load(c.Param("stride"), c.GP64())
	c.SHLQ(Imm(2), st)
	c.SHRQ(Imm(3), d) // vectors of 8
	c.TESTQ(n0, n0)
	c.JZ(LabelRef("axr_done"))
	// One pass per chunk of up to 8 vectors (64 floats) of acc.
	c.Label("axr_chunk")
	c.TESTQ(d, d)
	c.JZ(LabelRef("axr_done"))
	c.CMPQ(d, Imm(8))
	c.JL(LabelRef("axr_small"))
	var r [8]reg.VecVirtual
	for i := range r {
		r[i] = c.YMM()
		c.VMOVUPS(Mem{Base: ap, Disp: 32 * i}, r[i])
	}
	n, wp, vp := c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(n0, n)
	c.MOVQ(wp0, wp)
	c.MOVQ(vp0, vp)
	c.Label("axr_row")
	wv := c.YMM()
	c.VBROADCASTSS(Mem{Base: wp}, wv)
	for i := range r {
		c.VFMADD231PS(Mem{Base: vp, Disp: 32 * i}, wv, r[i])
	}
	c.ADDQ(U32(4), wp)
	c.ADDQ(st, vp)
	c.DECQ(n)
	c.JNZ(LabelRef("axr_row"))
	for i := range r {
		c.VMOVUPS(r[i], Mem{Base: ap, Disp: 32 * i})
	}
	c.ADDQ(U32(256), ap)
	c.ADDQ(U32(256), vp0)
	c.SUBQ(Imm(8), d)
	c.JMP(LabelRef("axr_chunk"))
	// Fewer than 8 vectors left: one vector at a time.
	c.Label("axr_small")
	one := c.YMM()
	c.VMOVUPS(Mem{Base: ap}, one)
	n2, wp2, vp2 := c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(n0, n2)
	c.MOVQ(wp0, wp2)
	c.MOVQ(vp0, vp2)
	c.Label("axr_row1")
	w1 := c.YMM()
	c.VBROADCASTSS(Mem{Base: wp2}, w1)
	c.VFMADD231PS(Mem{Base: vp2}, w1, one)
	c.ADDQ(U32(4), wp2)
	c.ADDQ(st, vp2)
	c.DECQ(n2)
	c.JNZ(LabelRef("axr_row1"))
	c.VMOVUPS(one, Mem{Base: ap})
	c.ADDQ(U32(32), ap)
	c.ADDQ(U32(32), vp0)
	c.DECQ(d)
	c.JMP(LabelRef("axr_chunk"))
	c.Label("axr_done")
	c.VZEROUPPER()
	c.RET()
}

// packPerm returns the dword permutation {0, 4, 1, 5, 2, 6, 3, 7} that puts
// the bytes vpackssdw/vpacksswb left in 128-bit-lane order back in element
// order, defined once for the quantizers that need it.
func packPerm(c *build.Context) Mem {
	if packPermTable == nil {
		m := c.StaticGlobal("q8Perm")
		c.DataAttributes(attr.RODATA | attr.NOPTR)
		for i, v := range []uint32{0, 4, 1, 5, 2, 6, 3, 7} {
			c.AddDatum(4*i, U32(v))
		}
		packPermTable = &m
	}
	return *packPermTable
}

var packPermTable *Mem

// quantQ8_K emits func quantQ8_KAVX2(x []float32, dst []byte): kern's
// quantQ8_K (quantize_row_q8_K_ref) on len(x)/256 blocks, byte for byte:
// amax over |x| (NaNs skipped, as the scalar loop's a > amax skips them),
// max the first value with |x| = amax, iscale = -127/max, q =
// int8(min(127, nearestInt(iscale·x))) with nearestInt's magic-number add
// and mantissa bits done as the scalar code does them, the sixteen
// 16-value sums, d = 1/iscale; an all-zero block is all zero bytes.
func quantQ8_K(c *build.Context) {
	avoutil.Function(c, "quantQ8_KAVX2", "func(x []float32, dst []byte)",
		"quantQ8_KAVX2 is kern's quantQ8_K on x (len a multiple of 256) into dst, byte",
		"for byte. It needs AVX2.")
	absMask := u32Const(c, "q8kAbsMask", 0x7fffffff)
	magic := f32Const(c, "q8kMagic", 12582912)
	mant := u32Const(c, "q8kMant", 0x007fffff)
	off := u32Const(c, "q8kOff", 0x00400000)
	c127 := u32Const(c, "q8k127", 127)
	perm := packPerm(c)
	n := c.Load(c.Param("x").Len(), c.GP64())
	xp := c.Load(c.Param("x").Base(), c.GP64())
	dp := c.Load(c.Param("dst").Base(), c.GP64())
	c.SHRQ(Imm(8), n)
	c.TESTQ(n, n)
	c.JZ(LabelRef("q8k_done"))
	c.Label("q8k_block")
	am := c.YMM()
	c.VMOVDQU(absMask, am)
	var m [4]reg.VecVirtual
	for i := range m {
		m[i] = c.YMM()
		c.VXORPS(m[i], m[i], m[i])
	}
	for i := 0; i < 32; i++ {
		t := c.YMM()
		c.VANDPS(Mem{Base: xp, Disp: 32 * i}, am, t)
		c.VMAXPS(m[i%4], t, m[i%4]) // t > m ? t : m (m when t is NaN)
	}
	c.VMAXPS(m[1], m[0], m[0])
	c.VMAXPS(m[3], m[2], m[2])
	c.VMAXPS(m[2], m[0], m[0])
	h := c.XMM()
	c.VEXTRACTF128(Imm(1), m[0], h)
	c.VMAXPS(h, m[0].AsX(), h)
	h2 := c.XMM()
	c.VMOVHLPS(h, h, h2)
	c.VMAXPS(h2, h, h)
	c.VMOVSHDUP(h, h2)
	c.VMAXSS(h2, h, h) // amax in lane 0
	bits := c.GP32()
	c.VMOVD(h, bits)
	c.TESTL(bits, bits)
	c.JZ(LabelRef("q8k_zero"))
	// max: the first value whose |x| is amax (the scalar loop's strict >
	// keeps the first).
	amv := c.YMM()
	c.VBROADCASTSS(h, amv)
	at := c.GP64()
	c.XORQ(at, at)
	c.Label("q8k_find")
	t := c.YMM()
	c.VANDPS(Mem{Base: xp, Index: at, Scale: 1}, am, t)
	c.VCMPPS(Imm(0), amv, t, t) // equal, ordered
	k := c.GP32()
	c.VMOVMSKPS(t, k)
	c.TESTL(k, k)
	c.JNZ(LabelRef("q8k_found"))
	c.ADDQ(Imm(32), at)
	c.JMP(LabelRef("q8k_find"))
	c.Label("q8k_found")
	c.BSFL(k, k)
	c.LEAQ(Mem{Base: at, Index: k.As64(), Scale: 4}, at)
	mx := c.XMM()
	c.VMOVSS(Mem{Base: xp, Index: at, Scale: 1}, mx)
	is := c.XMM()
	c.MOVL(U32(math.Float32bits(-127)), bits)
	c.VMOVD(bits, is)
	c.VDIVSS(mx, is, is) // iscale = -127/max
	dv := c.XMM()
	c.MOVL(U32(math.Float32bits(1)), bits)
	c.VMOVD(bits, dv)
	c.VDIVSS(is, dv, dv) // d = 1/iscale
	c.VMOVSS(dv, Mem{Base: dp})
	isv := c.YMM()
	c.VBROADCASTSS(is, isv)
	pm := c.YMM()
	c.VMOVDQU(perm, pm)
	for g := 0; g < 4; g++ { // 64 values: four 16-value sums
		var s [4]reg.VecVirtual
		for half := 0; half < 2; half++ {
			var q [4]reg.VecVirtual
			for i := range q {
				q[i] = c.YMM()
				c.VMULPS(Mem{Base: xp, Disp: 256*g + 128*half + 32*i}, isv, q[i])
				c.VADDPS(magic, q[i], q[i])
				c.VPAND(mant, q[i], q[i])
				c.VPSUBD(off, q[i], q[i])
				c.VPMINSD(c127, q[i], q[i])
				c.VPSLLD(Imm(24), q[i], q[i]) // int8(v): the low byte, sign-extended
				c.VPSRAD(Imm(24), q[i], q[i])
			}
			s[2*half], s[2*half+1] = c.YMM(), c.YMM()
			c.VPADDD(q[1], q[0], s[2*half])
			c.VPADDD(q[3], q[2], s[2*half+1])
			a, b := c.YMM(), c.YMM()
			c.VPACKSSDW(q[1], q[0], a)
			c.VPACKSSDW(q[3], q[2], b)
			c.VPACKSSWB(b, a, a)
			c.VPERMD(a, pm, a) // undo the packs' lane interleave
			c.VMOVDQU(a, Mem{Base: dp, Disp: 4 + 64*g + 32*half})
		}
		h1, h2 := c.YMM(), c.YMM()
		c.VPHADDD(s[1], s[0], h1)
		c.VPHADDD(s[3], s[2], h2)
		c.VPHADDD(h2, h1, h1) // per 128-bit lane: the four sums' partials
		hi := c.XMM()
		c.VEXTRACTI128(Imm(1), h1, hi)
		c.VPADDD(h1.AsX(), hi, hi)
		c.VPACKSSDW(hi, hi, hi)
		c.VMOVQ(hi, Mem{Base: dp, Disp: 260 + 8*g})
	}
	c.JMP(LabelRef("q8k_next"))
	c.Label("q8k_zero")
	z := c.YMM()
	c.VPXOR(z, z, z)
	for i := 0; i < 9; i++ {
		c.VMOVDQU(z, Mem{Base: dp, Disp: 32 * i})
	}
	c.MOVL(U32(0), Mem{Base: dp, Disp: 288})
	c.Label("q8k_next")
	c.ADDQ(U32(1024), xp)
	c.ADDQ(U32(292), dp)
	c.DECQ(n)
	c.JNZ(LabelRef("q8k_block"))
	c.Label("q8k_done")
	c.VZEROUPPER()
	c.RET()
}

// scaleMax8 emits func scaleMax8AVX2(x []float32, scale float32, mx
// []float32): for the tile of eight heads laid out row by row (x[8j+g]),
// x *= scale and mx[g] = the largest x[8j+g] as Go's max forms it (+0 over
// −0; NaN if any is NaN), starting from −∞.
func scaleMax8(c *build.Context) {
	avoutil.Function(c, "scaleMax8AVX2", "func(x []float32, scale float32, mx []float32)",
		"scaleMax8AVX2 scales x (len a multiple of 8) by scale in place and sets mx[g] to the",
		"maximum of lane g (Go's max: +0 over -0, NaN if any lane value is NaN). It needs AVX2.")
	n := c.Load(c.Param("x").Len(), c.GP64())
	xp := c.Load(c.Param("x").Base(), c.GP64())
	mp := c.Load(c.Param("mx").Base(), c.GP64())
	ss := c.Load(c.Param("scale"), c.XMM())
	sv := c.YMM()
	c.VBROADCASTSS(ss, sv)
	m, nan := c.YMM(), c.YMM()
	c.VMOVUPS(f32Const(c, "negInf", float32(math.Inf(-1))), m)
	c.VXORPS(nan, nan, nan)
	eighths(c, "smax", n, func() {
		x := c.YMM()
		c.VMULPS(Mem{Base: xp}, sv, x)
		c.VMOVUPS(x, Mem{Base: xp})
		a, b, u := c.YMM(), c.YMM(), c.YMM()
		c.VMAXPS(m, x, a) // x > m ? x : m
		c.VMAXPS(x, m, b) // m > x ? m : x
		c.VANDPS(b, a, m) // equal zeros: +0 wins
		c.VCMPPS(Imm(3), x, x, u)
		c.VORPS(u, nan, nan)
		c.ADDQ(U32(32), xp)
	})
	c.VORPS(nan, m, m) // a NaN lane: all ones, a NaN
	c.VMOVUPS(m, Mem{Base: mp})
	c.VZEROUPPER()
	c.RET()
}

// prefetch emits func prefetchAVX2(b []byte): a PREFETCHT0 of every
// 64-byte cache line that holds a byte of b, so that rows which would miss
// the caches one after another (attention's V rows, read in strided passes
// by the weighted values kernels) arrive while other work runs.
func prefetch(c *build.Context) {
	avoutil.Function(c, "prefetchAVX2", "func(b []byte)",
		"prefetchAVX2 prefetches (T0) every 64-byte line that holds a byte of b.")
	p := c.Load(c.Param("b").Base(), c.GP64())
	end := c.Load(c.Param("b").Len(), c.GP64())
	c.TESTQ(end, end)
	c.JZ(LabelRef("prefetch_done"))
	c.ADDQ(p, end)
	c.ANDQ(I32(-64), p) // the line b starts in
	c.Label("prefetch_loop")
	c.PREFETCHT0(Mem{Base: p})
	c.ADDQ(U32(64), p)
	c.CMPQ(p, end)
	c.JB(LabelRef("prefetch_loop"))
	c.Label("prefetch_done")
	c.RET()
}

// sumSquares emits func sumSquaresAVX2(x []float32) float64: Σ x[i]² in
// float64 over x[:len(x)&^7] in eight lanes, lane l summing the elements
// i ≡ l (mod 8) in order (two vectors of four doubles, lanes 0–3 and
// 4–7), then ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)). A float32's square is
// exact in float64, so the fused multiply-add rounds once, as the product
// and the sum of kern's Go loop do.
func sumSquares(c *build.Context) {
	avoutil.Function(c, "sumSquaresAVX2", "func(x []float32) float64",
		"sumSquaresAVX2 is the float64 sum of squares of x[:len(x)&^7] in eight lanes, as kern.Kernels.SumSquares. It needs AVX2 and FMA.")
	n := c.Load(c.Param("x").Len(), c.GP64())
	xp := c.Load(c.Param("x").Base(), c.GP64())
	lo, hi := c.YMM(), c.YMM()
	c.VXORPD(lo, lo, lo)
	c.VXORPD(hi, hi, hi)
	eighths(c, "sumsq", n, func() {
		a, b := c.YMM(), c.YMM()
		c.VCVTPS2PD(Mem{Base: xp}, a)
		c.VCVTPS2PD(Mem{Base: xp, Disp: 16}, b)
		c.VFMADD231PD(a, a, lo)
		c.VFMADD231PD(b, b, hi)
		c.ADDQ(U32(32), xp)
	})
	c.VADDPD(hi, lo, lo) // l0+l4, l1+l5, l2+l6, l3+l7
	h := c.XMM()
	c.VEXTRACTF128(Imm(1), lo, h)
	l := lo.AsX()
	c.VADDPD(h, l, l) // (l0+l4)+(l2+l6), (l1+l5)+(l3+l7)
	c.VPERMILPD(Imm(1), l, h)
	c.VADDSD(h, l, l)
	c.VZEROUPPER()
	c.Store(l, c.ReturnIndex(0))
	c.RET()
}

// scaleRow emits func scaleRowAVX2(o, x []float32, scale float64) and,
// with gain, scaleGainRowAVX2(o, x []float32, scale float64, gain
// []float32): o[i] = float32(float64(x[i])·scale) (·gain[i]) for i <
// len(o)&^7, each step rounded as Go rounds it: a float64 product, to
// float32 to nearest even, a float32 product.
func scaleRow(c *build.Context, gain bool) {
	name, sig := "scaleRowAVX2", "func(o, x []float32, scale float64)"
	if gain {
		name, sig = "scaleGainRowAVX2", "func(o, x []float32, scale float64, gain []float32)"
	}
	avoutil.Function(c, name, sig,
		name+" sets o[i] = float32(float64(x[i])*scale) (times gain[i]) for i < len(o)&^7, as kern.Kernels.ScaleRow. It needs AVX2.")
	n := c.Load(c.Param("o").Len(), c.GP64())
	op := c.Load(c.Param("o").Base(), c.GP64())
	xp := c.Load(c.Param("x").Base(), c.GP64())
	var gp reg.Register
	if gain {
		gp = c.Load(c.Param("gain").Base(), c.GP64())
	}
	sc := c.Load(c.Param("scale"), c.XMM())
	sv := c.YMM()
	c.VBROADCASTSD(sc, sv)
	eighths(c, name, n, func() {
		a, b := c.YMM(), c.YMM()
		c.VCVTPS2PD(Mem{Base: xp}, a)
		c.VCVTPS2PD(Mem{Base: xp, Disp: 16}, b)
		c.VMULPD(sv, a, a)
		c.VMULPD(sv, b, b)
		fa, fb := c.XMM(), c.XMM()
		c.VCVTPD2PSY(a, fa)
		c.VCVTPD2PSY(b, fb)
		v := c.YMM()
		c.VINSERTF128(Imm(1), fb, fa.AsY(), v)
		if gain {
			c.VMULPS(Mem{Base: gp}, v, v)
			c.ADDQ(U32(32), gp)
		}
		c.VMOVUPS(v, Mem{Base: op})
		c.ADDQ(U32(32), op)
		c.ADDQ(U32(32), xp)
	})
	c.VZEROUPPER()
	c.RET()
}

// eighths emits a loop of n>>3 steps (n shifted in place), each one body,
// under the labels name_loop and name_done: the kernels' loop over whole
// vectors of eight.
func eighths(c *build.Context, name string, n reg.Register, body func()) {
	c.SHRQ(Imm(3), n)
	c.TESTQ(n, n)
	c.JZ(LabelRef(name + "_done"))
	c.Label(name + "_loop")
	body()
	c.DECQ(n)
	c.JNZ(LabelRef(name + "_loop"))
	c.Label(name + "_done")
}
