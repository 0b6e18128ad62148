package kern

//go:generate go run ../../../codegen/goasm/gen/kernattn -dir .

import "math"

// The attention tile kernels over f16 and q8_0 KV caches (the f32 ones are
// Scores and AxpyRows in vec.go). With a SIMD variant active they run the
// AVX2+FMA+F16C code of attn_amd64.s (codegen/goasm/gen/kernattn), and with
// arm64's neon variant the f16 ones run neon_arm64.s (codegen/goasm/gen/
// kernneon's attn.go, the same arithmetic): the variant's scoresF16 and
// axpyRowsF16. The generic variant runs the Go loops below, which compute
// in the kernels' order (eight lanes, fused multiply-adds, ggml's lane
// sum), so all give the same bits (TestAttentionCacheKernelsExact).

// Q8Block and Q8BlockBytes are a q8_0 cache row's block: an f16 scale d,
// then Q8Block int8 values q (value = q·d).
const (
	Q8Block      = 32
	Q8BlockBytes = 34
)

// ScoresF16 sets out[j] = q · k[j*stride : j*stride+len(q)] for j <
// len(out), k an f16 cache (rows stride halves apart).
func (ks Kernels) ScoresF16(q []float32, k []uint16, stride int, out []float32) {
	if len(out) == 0 {
		return
	}
	_ = k[(len(out)-1)*stride+len(q)-1]
	if f := ks.v.scoresF16; f != nil && len(q)%8 == 0 && len(q) > 0 {
		f(q, k, stride, out)
		return
	}
	for j := range out {
		row := k[j*stride : j*stride+len(q)]
		var lanes [8]float32
		for i, x := range q {
			lanes[i%8] = fmaF32(x, f16Table[row[i]], lanes[i%8])
		}
		out[j] = laneSum8(&lanes)
	}
}

// AxpyRowsF16 adds w[j]·v[j*stride : j*stride+len(acc)] to acc for every j
// < len(w), rows in order, v an f16 cache.
func (ks Kernels) AxpyRowsF16(acc, w []float32, v []uint16, stride int) {
	if len(w) == 0 {
		return
	}
	_ = v[(len(w)-1)*stride+len(acc)-1]
	if f := ks.v.axpyRowsF16; f != nil && len(acc)%8 == 0 && len(acc) > 0 {
		f(acc, w, v, stride)
		return
	}
	for j, wj := range w {
		row := v[j*stride : j*stride+len(acc)]
		for i := range acc {
			acc[i] = fmaF32(f16Table[row[i]], wj, acc[i])
		}
	}
}

// ScoresQ8 sets out[j] to q · row j of the q8_0 cache k (rows stride bytes
// apart; len(q) a multiple of Q8Block).
func (ks Kernels) ScoresQ8(q []float32, k []byte, stride int, out []float32) {
	nb := len(q) / Q8Block
	if len(out) == 0 || nb == 0 {
		return
	}
	_ = k[(len(out)-1)*stride+nb*Q8BlockBytes-1]
	if ks.vec() {
		scoresQ8AVX2(q[:nb*Q8Block], k, stride, out)
		return
	}
	for j := range out {
		row := k[j*stride:]
		var acc [8]float32
		for b := 0; b < nb; b++ {
			blk := row[b*Q8BlockBytes : (b+1)*Q8BlockBytes]
			d := f16(blk)
			var bl [8]float32
			for i, x := range q[b*Q8Block : (b+1)*Q8Block] {
				bl[i%8] = fmaF32(float32(int8(blk[2+i])), x, bl[i%8])
			}
			for l := range acc {
				acc[l] = fmaF32(d, bl[l], acc[l])
			}
		}
		out[j] = laneSum8(&acc)
	}
}

// AxpyRowsQ8 adds w[j]·(row j of the q8_0 cache v, rows stride bytes
// apart) to acc for every j < len(w), rows in order (len(acc) a multiple of
// Q8Block): per block w[j]·d rounded, then a fused multiply-add per value.
func (ks Kernels) AxpyRowsQ8(acc, w []float32, v []byte, stride int) {
	nb := len(acc) / Q8Block
	if len(w) == 0 || nb == 0 {
		return
	}
	_ = v[(len(w)-1)*stride+nb*Q8BlockBytes-1]
	if ks.vec() {
		axpyRowsQ8AVX2(acc[:nb*Q8Block], w, v, stride)
		return
	}
	for j, wj := range w {
		row := v[j*stride:]
		for b := 0; b < nb; b++ {
			blk := row[b*Q8BlockBytes : (b+1)*Q8BlockBytes]
			wd := wj * f16(blk)
			a := acc[b*Q8Block : (b+1)*Q8Block]
			for i := range a {
				a[i] = fmaF32(float32(int8(blk[2+i])), wd, a[i])
			}
		}
	}
}

// fmaF32 is a·b+c as VFMADD231PS computes it, rounded once to float32, but
// through float64 (the product is exact there): the double rounding can
// differ from the single one only when the float64 sum lands exactly on a
// float32 halfway point. TestAttentionCacheKernelsExact holds it, and the
// kernels, to the correctly rounded fma32 of the tests.
func fmaF32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}

// laneSum8 is ggml's hsum_float_8 (avoutil.HSumFloat8): the upper four lanes
// added to the lower, then lanes 0+2 and 1+3, then the two.
func laneSum8(l *[8]float32) float32 {
	r0, r1, r2, r3 := l[0]+l[4], l[1]+l[5], l[2]+l[6], l[3]+l[7]
	return (r0 + r2) + (r1 + r3)
}
