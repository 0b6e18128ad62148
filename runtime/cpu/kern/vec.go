package kern

//go:generate go run ../../../codegen/goasm/gen/kernvec -dir .

import (
	"encoding/binary"
	"math"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// The float32 vector kernels of the CPU backend's non-matmul work. With a
// SIMD variant active (MINERVA_CPU other than generic) they run the AVX2
// code from vec_amd64.s on whole vectors and finish the tail here; the
// generic variant keeps the plain Go loops, so forcing it reproduces the
// earlier results bit for bit.

// vec reports whether the SIMD vector kernels run.
func (ks Kernels) vec() bool { return vecAsm && ks.v != genericVariant }

// DotF32 returns Σ a[i]·b[i] over len(a) elements (b at least as long).
func (ks Kernels) DotF32(a, b []float32) float32 {
	b = b[:len(a)]
	if ks.vec() && len(a) >= 32 {
		n := len(a) &^ 31
		s := dotF32AVX2(a[:n], b[:n])
		for i := n; i < len(a); i++ {
			s += a[i] * b[i]
		}
		return s
	}
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// Axpy adds alpha·x[i] to dst[i] for i < len(dst).
func (ks Kernels) Axpy(dst []float32, alpha float32, x []float32) {
	x = x[:len(dst)]
	i := 0
	if ks.vec() {
		i = len(dst) &^ 7
		axpyF32AVX2(dst[:i], alpha, x[:i])
	}
	for ; i < len(dst); i++ {
		dst[i] += alpha * x[i]
	}
}

// Prefetch asks the CPU to bring b's cache lines toward it ahead of a
// read, on the SIMD variants; it changes no value. A decode step's
// attention prefetches each tile's V rows before scoring its K rows: the
// weighted values kernels read the rows in strided passes that the
// hardware prefetchers follow late, and TinyLlama's attention at depth 512
// took 5–10% less time.
func (ks Kernels) Prefetch(b []byte) {
	if ks.vec() && len(b) > 0 {
		prefetchAVX2(b)
	}
}

// F32ToF16 sets dst[i] = quant.F32ToF16(x[i]) for i < len(dst): halves
// rounded to nearest even, a NaN the quiet NaN of its sign (0x7e00).
func (ks Kernels) F32ToF16(dst []uint16, x []float32) {
	x = x[:len(dst)]
	i := 0
	if ks.vec() {
		i = len(dst) &^ 7
		f32ToF16AVX2(dst[:i], x[:i])
		for j, h := range dst[:i] {
			if h&0x7fff > 0x7c00 { // a NaN: the vector kept its payload
				dst[j] = h&0x8000 | 0x7e00
			}
		}
	}
	for ; i < len(dst); i++ {
		dst[i] = quant.F32ToF16(x[i])
	}
}

// SiLUMul sets dst[i] = silu(g[i])·u[i] = g/(1+e^-g)·u for i < len(dst).
// The generic variant evaluates silu in float64 and rounds once; the SIMD
// kernel uses a float32 exp within 2 ulp, so it may differ in the last bits.
func (ks Kernels) SiLUMul(dst, g, u []float32) {
	g, u = g[:len(dst)], u[:len(dst)]
	i := 0
	if ks.vec() {
		i = len(dst) &^ 7
		siluMulAVX2(dst[:i], g[:i], u[:i])
	}
	for ; i < len(dst); i++ {
		x := float64(g[i])
		dst[i] = float32(x/(1+math.Exp(-x))) * u[i]
	}
}

// ExpSub sets dst[i] = exp(x[i] − m) for i < len(dst): the weights of an
// attention tile against its running maximum. The generic variant evaluates
// exp in float64 and rounds once; the SIMD kernel is within 2 ulp.
func (ks Kernels) ExpSub(dst, x []float32, m float32) {
	x = x[:len(dst)]
	i := 0
	if ks.vec() {
		i = len(dst) &^ 7
		expSubAVX2(dst[:i], x[:i], m)
	}
	for ; i < len(dst); i++ {
		dst[i] = float32(math.Exp(float64(x[i] - m)))
	}
}

// dotFloatSIMD is Dot for F32, F16 and BF16 weights with the SIMD kernels:
// whole runs of 32 elements in float32 FMA lanes, the tail in float32 here.
func dotFloatSIMD(wt ir.DType, n int, w, a []byte) float32 {
	m := n &^ 31
	var s float32
	switch wt {
	case ir.F32:
		s = dotF32BytesAVX2(m, w, a)
		for i := m; i < n; i++ {
			s += math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:])) * math.Float32frombits(binary.LittleEndian.Uint32(a[4*i:]))
		}
	case ir.F16:
		s = dotF16BytesAVX2(m, w, a)
		for i := m; i < n; i++ {
			s += f16(w[2*i:]) * f16(a[2*i:])
		}
	case ir.BF16:
		s = dotBF16BytesAVX2(m, w, a)
		for i := m; i < n; i++ {
			s += bf16(w[2*i:]) * bf16(a[2*i:])
		}
	}
	return s
}

// Scores sets out[j] = q · k[j*stride : j*stride+len(q)] for j < len(out):
// one attention tile's scores against cache rows stride floats apart.
func (ks Kernels) Scores(q, k []float32, stride int, out []float32) {
	if len(out) == 0 {
		return
	}
	_ = k[(len(out)-1)*stride+len(q)-1]
	if ks.vec() && len(q)%8 == 0 && len(q) > 0 {
		scoresF32AVX2(q, k, stride, out)
		return
	}
	for j := range out {
		out[j] = ks.DotF32(q, k[j*stride:j*stride+len(q)])
	}
}

// AxpyRows adds w[j]·v[j*stride : j*stride+len(acc)] to acc for every
// j < len(w), rows in order: one attention tile's weighted values.
func (ks Kernels) AxpyRows(acc, w, v []float32, stride int) {
	if len(w) == 0 {
		return
	}
	_ = v[(len(w)-1)*stride+len(acc)-1]
	if ks.vec() && len(acc)%8 == 0 && len(acc) > 0 {
		axpyRowsF32AVX2(acc, w, v, stride)
		return
	}
	for j, wj := range w {
		ks.Axpy(acc, wj, v[j*stride:j*stride+len(acc)])
	}
}

// SumSquares returns Σ x[i]² in float64, in eight lanes: lane l sums
// x[i]² for the i ≡ l (mod 8) below len(x)&^7 in order, the lanes are
// added as ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)), then the tail's squares
// in order. Each square of a float32 is exact in float64, so every
// variant gives the same bits; the eight chains instead of one let an
// RMSNorm's sum run at the loads' pace (a 2048-wide row's sum had 2048
// dependent additions).
func (ks Kernels) SumSquares(x []float32) float64 {
	n := len(x) &^ 7
	var sum float64
	if ks.vec() {
		sum = sumSquaresAVX2(x[:n])
	} else {
		var l [8]float64
		for i := 0; i < n; i += 8 {
			c := x[i : i+8 : i+8]
			for j, e := range c {
				l[j] += float64(e) * float64(e)
			}
		}
		sum = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
	}
	for _, e := range x[n:] {
		sum += float64(e) * float64(e)
	}
	return sum
}

// ScaleRow sets o[i] = float32(float64(x[i])·scale), times gain[i] when
// gain is not nil, for i < len(o): an RMSNorm's output, every step
// rounded as this Go loop rounds it on every variant.
func (ks Kernels) ScaleRow(o, x []float32, scale float64, gain []float32) {
	x = x[:len(o)]
	i := 0
	if ks.vec() {
		i = len(o) &^ 7
		if gain != nil {
			scaleGainRowAVX2(o[:i], x[:i], scale, gain[:i])
		} else {
			scaleRowAVX2(o[:i], x[:i], scale)
		}
	}
	if gain != nil {
		gain = gain[:len(o)]
		for ; i < len(o); i++ {
			o[i] = float32(float64(x[i])*scale) * gain[i]
		}
		return
	}
	for ; i < len(o); i++ {
		o[i] = float32(float64(x[i]) * scale)
	}
}
