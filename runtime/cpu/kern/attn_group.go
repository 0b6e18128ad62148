package kern

import "math"

// The grouped attention tile kernels: up to GroupLanes query heads of one
// KV group (grouped-query attention) served by one pass over a tile's K or
// V rows, each row read (and widened) once for all of them instead of once
// per head. A tile's scores and weights are laid out row by row, head g of
// row j at x[GroupLanes·j+g], so that the softmax bookkeeping of all the
// heads is one vector per row. Every head's results are bit for bit those
// of the one-head kernels (ScoresF16, Scores, AxpyRowsF16, AxpyRows,
// ExpSub) over the same rows: the SIMD kernels (AVX2, and for the avx512
// variant the same lanes in ZMM registers) keep their lanes, FMA order and
// lane sums, and the variants without them (generic; arm64's neon, whose
// one-head f16 kernels are then NEON code), and q8_0 caches (but for the
// avx512 variant's weighted values), call the one-head kernels head by head
// (TestGroupedAttentionKernelsExact).

// GroupLanes is the most heads a grouped kernel serves per call, and the
// row width of its score and weight layout.
const GroupLanes = 8

// ScoresF16G sets out[8j+g] = q[g·qs : g·qs+d] · k[j·stride : j·stride+d]
// for heads g < G (1 ≤ G ≤ 8) and rows j < len(out)/8, k an f16 cache;
// lanes g ≥ G are set to 0.
func (ks Kernels) ScoresF16G(q []float32, qs, d, G int, k []uint16, stride int, out []float32) {
	scoresG(ks, q, qs, d, G, k, stride, out, &scoresF16GAVX512, &scoresF16GAVX2)
}

// ScoresG is ScoresF16G over an f32 cache (Scores per head).
func (ks Kernels) ScoresG(q []float32, qs, d, G int, k []float32, stride int, out []float32) {
	scoresG(ks, q, qs, d, G, k, stride, out, &scoresF32GAVX512, &scoresF32GAVX2)
}

// scoresG is ScoresF16G and ScoresG: the AVX-512 kernels (the avx512
// variant) on whole groups of four rows, the AVX2 ones on the rest, or the
// one-head kernel head by head.
func scoresG[T uint16 | float32](ks Kernels, q []float32, qs, d, G int, k []T, stride int, out []float32,
	z, y *[GroupLanes + 1]func(q []float32, qs, d int, k []T, stride int, out []float32)) {
	n := len(out) / GroupLanes
	if n == 0 {
		return
	}
	_ = q[(G-1)*qs+d-1]
	_ = k[(n-1)*stride+d-1]
	if ks.vec() && d%8 == 0 && d > 0 {
		n4 := 0
		if ks.v.attnZMM {
			n4 = n &^ 3
			z[G](q, qs, d, k, stride, out[:GroupLanes*n4])
		}
		if n4 < n {
			y[G](q, qs, d, k[n4*stride:], stride, out[GroupLanes*n4:GroupLanes*n])
		}
		return
	}
	scoresOneHead(ks, G, n, q, qs, d, k, stride, out)
}

// ScoresQ8G is ScoresF16G over a q8_0 cache (rows stride bytes apart),
// ScoresQ8 head by head.
func (ks Kernels) ScoresQ8G(q []float32, qs, d, G int, k []byte, stride int, out []float32) {
	n := len(out) / GroupLanes
	if n == 0 {
		return
	}
	_ = q[(G-1)*qs+d-1]
	if nb := d / Q8Block; nb > 0 {
		_ = k[(n-1)*stride+nb*Q8BlockBytes-1]
	}
	scoresOneHead(ks, G, n, q, qs, d, k, stride, out)
}

// scoresOneHead is the grouped scores of n rows through the one-head
// kernel, head by head, a block of rows at a time, spread into out's
// lanes (0 in lanes g ≥ G).
func scoresOneHead[T uint16 | float32 | byte](ks Kernels, G, n int, q []float32, qs, d int, k []T, stride int, out []float32) {
	var sc [256]float32
	for j0 := 0; j0 < n; j0 += len(sc) {
		m := min(n-j0, len(sc))
		for g := range GroupLanes {
			if g < G {
				scoresOne(ks, q[g*qs:g*qs+d], k[j0*stride:], stride, sc[:m])
			} else {
				clear(sc[:m])
			}
			for j, s := range sc[:m] {
				out[GroupLanes*(j0+j)+g] = s
			}
		}
	}
}

// AxpyRowsF16G adds w[8j+g]·v[j·stride : j·stride+d] to acc[g·as :
// g·as+d] for heads g < G (1 ≤ G ≤ 8) and every row j < len(w)/8, rows in
// order, v an f16 cache.
func (ks Kernels) AxpyRowsF16G(acc []float32, as, d, G int, w []float32, v []uint16, stride int) {
	axpyRowsG(ks, acc, as, d, G, w, v, stride, &axpyRowsF16GAVX512, &axpyRowsF16GAVX2)
}

// AxpyRowsG is AxpyRowsF16G over an f32 cache (AxpyRows per head).
func (ks Kernels) AxpyRowsG(acc []float32, as, d, G int, w []float32, v []float32, stride int) {
	axpyRowsG(ks, acc, as, d, G, w, v, stride, &axpyRowsF32GAVX512, &axpyRowsF32GAVX2)
}

// axpyRowsG is AxpyRowsF16G and AxpyRowsG: the AVX-512 kernel (the avx512
// variant, d a multiple of 16), the AVX2 one, or the one-head kernel head
// by head.
func axpyRowsG[T uint16 | float32](ks Kernels, acc []float32, as, d, G int, w []float32, v []T, stride int,
	z, y *[GroupLanes + 1]func(acc []float32, as, d int, w []float32, v []T, stride int)) {
	n := len(w) / GroupLanes
	if n == 0 {
		return
	}
	_ = acc[(G-1)*as+d-1]
	_ = v[(n-1)*stride+d-1]
	switch {
	case ks.vec() && d%16 == 0 && d > 0 && ks.v.attnZMM:
		z[G](acc, as, d, w[:GroupLanes*n], v, stride)
		return
	case ks.vec() && d%8 == 0 && d > 0:
		y[G](acc, as, d, w[:GroupLanes*n], v, stride)
		return
	}
	axpyOneHead(ks, G, n, acc, as, d, w, v, stride)
}

// AxpyRowsQ8G is AxpyRowsF16G over a q8_0 cache (rows stride bytes
// apart): the AVX-512 kernel in the avx512 variant, else AxpyRowsQ8 head by
// head.
func (ks Kernels) AxpyRowsQ8G(acc []float32, as, d, G int, w []float32, v []byte, stride int) {
	n := len(w) / GroupLanes
	if n == 0 {
		return
	}
	_ = acc[(G-1)*as+d-1]
	if nb := d / Q8Block; nb > 0 {
		_ = v[(n-1)*stride+nb*Q8BlockBytes-1]
	}
	if ks.vec() && ks.v.attnZMM && d%Q8Block == 0 && d > 0 {
		axpyRowsQ8GAVX512[G](acc, as, d, w[:GroupLanes*n], v, stride)
		return
	}
	axpyOneHead(ks, G, n, acc, as, d, w, v, stride)
}

// axpyOneHead is the grouped weighted values of n rows through the
// one-head kernel, head by head with the head's weights gathered, a block
// of rows at a time in row order.
func axpyOneHead[T uint16 | float32 | byte](ks Kernels, G, n int, acc []float32, as, d int, w []float32, v []T, stride int) {
	var wg [256]float32
	for g := range G {
		for j0 := 0; j0 < n; j0 += len(wg) {
			m := min(n-j0, len(wg))
			for j := range wg[:m] {
				wg[j] = w[GroupLanes*(j0+j)+g]
			}
			axpyOne(ks, acc[g*as:g*as+d], wg[:m], v[j0*stride:], stride)
		}
	}
}

// ScaleMax8 multiplies x (rows of 8 lanes) by scale in place and sets
// mx[g] to the maximum of lane g as Go's max forms it, from −∞: a tile's
// scaled scores and their maximum per head.
func (ks Kernels) ScaleMax8(x []float32, scale float32, mx *[GroupLanes]float32) {
	x = x[:len(x)&^(GroupLanes-1)]
	if ks.vec() {
		scaleMax8AVX2(x, scale, mx[:])
		return
	}
	for g := range mx {
		mx[g] = float32(math.Inf(-1))
	}
	for i := range x {
		x[i] *= scale
		mx[i%GroupLanes] = max(mx[i%GroupLanes], x[i])
	}
}

// ScaleMax multiplies x by scale in place and returns the maximum of the
// products as Go's max forms it, from −∞ (ScaleMax8's kernel on whole rows
// of eight, max being independent of the order).
func (ks Kernels) ScaleMax(x []float32, scale float32) float32 {
	m := float32(math.Inf(-1))
	i := 0
	if ks.vec() && len(x) >= GroupLanes {
		i = len(x) &^ (GroupLanes - 1)
		var mx [GroupLanes]float32
		scaleMax8AVX2(x[:i], scale, mx[:])
		for _, v := range mx {
			m = max(m, v)
		}
	}
	for ; i < len(x); i++ {
		x[i] *= scale
		m = max(m, x[i])
	}
	return m
}

// ExpSubSum8 sets dst[8j+g] = exp(x[8j+g] − m[g]) and adds it to l[g],
// rows j < len(dst)/8 in order: the weights of a tile of n = len(dst)/8
// rows and the running sums, each head's exactly as ExpSub over its n
// scores and a sum in row order give them (the SIMD exp for rows below
// n&^7, float64 beyond).
func (ks Kernels) ExpSubSum8(dst, x []float32, m, l *[GroupLanes]float32) {
	n := len(dst) / GroupLanes
	x = x[:GroupLanes*n]
	i := 0
	if ks.vec() {
		i = GroupLanes * (n &^ 7)
		expSubSum8AVX2(dst[:i], x[:i], m[:], l[:])
	}
	for ; i < len(x); i++ {
		e := float32(math.Exp(float64(x[i] - m[i%GroupLanes])))
		dst[i] = e
		l[i%GroupLanes] += e
	}
}

// scoresOne and axpyOne are the one-head kernels for the cache's element
// type (f16, f32, q8_0 bytes). They are called directly, not passed as
// function values: a method value allocated a closure at every call (28
// MB of garbage in a 2K-token TinyLlama prompt), and a function parameter
// moved the callers' row buffers to the heap.
func scoresOne[T uint16 | float32 | byte](ks Kernels, q []float32, k []T, stride int, out []float32) {
	switch k := any(k).(type) {
	case []uint16:
		ks.ScoresF16(q, k, stride, out)
	case []float32:
		ks.Scores(q, k, stride, out)
	case []byte:
		ks.ScoresQ8(q, k, stride, out)
	}
}

func axpyOne[T uint16 | float32 | byte](ks Kernels, acc, w []float32, v []T, stride int) {
	switch v := any(v).(type) {
	case []uint16:
		ks.AxpyRowsF16(acc, w, v, stride)
	case []float32:
		ks.AxpyRows(acc, w, v, stride)
	case []byte:
		ks.AxpyRowsQ8(acc, w, v, stride)
	}
}
