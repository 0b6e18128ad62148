package quant

import "math"

// Reference K-quant quantizers: ggml's quantize_row_{q2,q3,q4,q5,q6}_K_ref and
// the search helpers they use (make_qkx2_quants, make_qx_quants,
// make_q3_quants). These are what llama-quantize runs when no importance
// matrix is given, and ports of them reproduce its bytes exactly, so the float
// arithmetic below mirrors the C expression by expression: same operand order,
// each product that meets an addition rounded on its own (float32(...)), int
// quants converted to float32 where C's usual conversions would.

// groupMaxEps is GROUP_MAX_EPS: a group whose largest magnitude is below it is
// treated as all zeros.
const groupMaxEps = float32(1e-15)

// nearestInt is ggml's nearest_int: adding 1.5*2^23 puts the rounded integer in
// the low mantissa bits (round half to even, through the FPU's own rounding).
// Only meaningful for |f| < 2^22, as in C; larger or NaN inputs give a wrong
// integer, never a panic, and every caller clamps the result.
func nearestInt(f float32) int {
	v := f + 12582912
	return int(math.Float32bits(v)&0x007fffff) - 0x00400000
}

func clampInt(v, lo, hi int) int { return max(lo, min(hi, v)) }

// makeQKX2Quants is make_qkx2_quants: fit x ≈ scale*L - theMin with L in
// [0, nmax] and theMin ≥ 0, minimizing the weighted error; it tries nstep+1
// candidate inverse scales around nmax/(max-min) and solves the least-squares
// scale and min for each. L and laux must hold len(x) entries.
func makeQKX2Quants(nmax int, x, weights []float32, L, laux []uint8, rmin, rdelta float32, nstep int, useMAD bool) (scale, theMin float32) {
	n := len(x)
	mn, mx := x[0], x[0]
	sumW := weights[0]
	sumX := sumW * x[0]
	for i := 1; i < n; i++ {
		if x[i] < mn {
			mn = x[i]
		}
		if x[i] > mx {
			mx = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if mn > 0 {
		mn = 0
	}
	if mx == mn {
		for i := range n {
			L[i] = 0
		}
		return 0, -mn
	}
	iscale := float32(nmax) / (mx - mn)
	scale = 1 / iscale
	var bestError float32
	for i := 0; i < n; i++ {
		l := nearestInt(float32(iscale * (x[i] - mn)))
		L[i] = uint8(clampInt(l, 0, nmax))
		diff := float32(float32(scale*float32(L[i]))+mn) - x[i]
		if useMAD {
			diff = abs32(diff)
		} else {
			diff = float32(diff * diff)
		}
		bestError += float32(weights[i] * diff)
	}
	if nstep < 1 {
		return scale, -mn
	}
	for is := 0; is <= nstep; is++ {
		iscale = (float32(rmin+float32(rdelta*float32(is))) + float32(nmax)) / (mx - mn)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := clampInt(nearestInt(float32(iscale*(x[i]-mn))), 0, nmax)
			laux[i] = uint8(l)
			w := weights[i]
			fl := float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curError float32
			for i := 0; i < n; i++ {
				diff := float32(float32(thisScale*float32(laux[i]))+thisMin) - x[i]
				if useMAD {
					diff = abs32(diff)
				} else {
					diff = float32(diff * diff)
				}
				curError += float32(weights[i] * diff)
			}
			if curError < bestError {
				copy(L[:n], laux[:n])
				bestError = curError
				scale = thisScale
				mn = thisMin
			}
		}
	}
	return scale, -mn
}

// makeQXQuantsRMSE1 is make_qx_quants(n, nmax, x, L, rmse_type=1, qw=NULL),
// the only form the reference quantizers use (Q6_K): symmetric quants in
// [-nmax, nmax-1] (stored biased by nmax), weights x², and 18 extra trial
// scales around nmax/max that are kept when they lower the weighted error.
func makeQXQuantsRMSE1(nmax int, x []float32, L []int8) float32 {
	var mx, amax float32
	for _, v := range x {
		if ax := abs32(v); ax > amax {
			amax, mx = ax, v
		}
	}
	if amax < groupMaxEps {
		for i := range x {
			L[i] = 0
		}
		return 0
	}
	fn := float32(nmax)
	iscale := -fn / mx
	var sumlx, suml2 float32
	for i, v := range x {
		l := clampInt(nearestInt(float32(iscale*v)), -nmax, nmax-1)
		L[i] = int8(l + nmax)
		w := float32(v * v)
		fl := float32(l)
		sumlx += float32(float32(w*v) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := scale * sumlx
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(fn + float32(0.1*float32(is))) / mx
		sumlx, suml2 = 0, 0
		for _, v := range x {
			l := clampInt(nearestInt(float32(iscale*v)), -nmax, nmax-1)
			w := float32(v * v)
			fl := float32(l)
			sumlx += float32(float32(w*v) * fl)
			suml2 += float32(float32(w*fl) * fl)
		}
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			for i, v := range x {
				l := nearestInt(float32(iscale * v))
				L[i] = int8(nmax + clampInt(l, -nmax, nmax-1))
			}
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

// makeQ3Quants is make_q3_quants(n, nmax, x, L, do_rmse=true): symmetric
// quants in [-nmax, nmax-1] (returned biased by nmax), then up to five passes
// that move single quants when that improves the x²-weighted fit.
func makeQ3Quants(nmax int, x []float32, L []int8) float32 {
	var mx, amax float32
	for _, v := range x {
		if ax := abs32(v); ax > amax {
			amax, mx = ax, v
		}
	}
	if amax < groupMaxEps {
		for i := range x {
			L[i] = 0
		}
		return 0
	}
	iscale := -float32(nmax) / mx
	var sumlx, suml2 float32
	for i, v := range x {
		l := clampInt(nearestInt(float32(iscale*v)), -nmax, nmax-1)
		L[i] = int8(l)
		w := float32(v * v)
		fl := float32(l)
		sumlx += float32(float32(w*v) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	for itry := 0; itry < 5; itry++ {
		changed := 0
		for i, v := range x {
			w := float32(v * v)
			li := float32(L[i])
			slx := sumlx - float32(float32(w*v)*li)
			if slx > 0 {
				sl2 := suml2 - float32(float32(w*li)*li)
				newL := clampInt(nearestInt(float32(v*sl2)/slx), -nmax, nmax-1)
				if newL != int(L[i]) {
					fl := float32(newL)
					slx += float32(float32(w*v) * fl)
					sl2 += float32(float32(w*fl) * fl)
					if sl2 > 0 && float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
						L[i] = int8(newL)
						sumlx, suml2 = slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range x {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

func quantQ2_K(src []float32, dst []byte) {
	var (
		L       [qkK]uint8
		laux    [16]uint8
		weights [16]float32
		mins    [16]float32
		scales  [16]float32
	)
	const q4scale = float32(15)
	for i := 0; i < len(src)/qkK; i++ {
		x := src[i*qkK : i*qkK+qkK]
		b := dst[i*84 : i*84+84]
		ys := b[0:16]
		qs := b[16:80]
		var maxScale, maxMin float32
		for j := 0; j < 16; j++ {
			xs := x[16*j : 16*j+16]
			for l, v := range xs {
				weights[l] = abs32(v)
			}
			scales[j], mins[j] = makeQKX2Quants(3, xs, weights[:], L[16*j:16*j+16], laux[:], -0.5, 0.1, 15, true)
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}
		if maxScale > 0 {
			iscale := q4scale / maxScale
			for j := 0; j < 16; j++ {
				ys[j] = uint8(nearestInt(float32(iscale * scales[j])))
			}
			putF16(b[80:], maxScale/q4scale)
		} else {
			for j := range ys {
				ys[j] = 0
			}
			putF16(b[80:], 0)
		}
		if maxMin > 0 {
			iscale := q4scale / maxMin
			for j := 0; j < 16; j++ {
				ys[j] |= uint8(nearestInt(float32(iscale*mins[j])) << 4)
			}
			putF16(b[82:], maxMin/q4scale)
		} else {
			putF16(b[82:], 0)
		}
		dAll, mAll := f16(b[80:]), f16(b[82:])
		for j := 0; j < 16; j++ {
			d := dAll * float32(ys[j]&0x0f)
			if d == 0 {
				continue
			}
			dm := mAll * float32(ys[j]>>4)
			for ii := 0; ii < 16; ii++ {
				L[16*j+ii] = uint8(clampInt(nearestInt((x[16*j+ii]+dm)/d), 0, 3))
			}
		}
		packQ2(qs, L[:])
	}
}

// packQ2 stores 256 2-bit values: byte l of each 32-byte group holds elements
// l, l+32, l+64 and l+96 of the corresponding 128 in bits 0-1, 2-3, 4-5, 6-7.
func packQ2(qs []byte, L []uint8) {
	for j := 0; j < qkK; j += 128 {
		for l := 0; l < 32; l++ {
			qs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
		}
	}
}

func quantQ3_K(src []float32, dst []byte) {
	var (
		L      [qkK]int8
		scales [16]float32
	)
	for i := 0; i < len(src)/qkK; i++ {
		x := src[i*qkK : i*qkK+qkK]
		b := dst[i*110 : i*110+110]
		hmask := b[0:32]
		qs := b[32:96]
		ys := b[96:108]
		var maxScale, amax float32
		for j := 0; j < 16; j++ {
			scales[j] = makeQ3Quants(4, x[16*j:16*j+16], L[16*j:16*j+16])
			if s := abs32(scales[j]); s > amax {
				amax, maxScale = s, scales[j]
			}
		}
		for j := range ys {
			ys[j] = 0
		}
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := 0; j < 16; j++ {
				l := int8(nearestInt(float32(iscale * scales[j])))
				l = int8(clampInt(int(l), -32, 31)) + 32
				if j < 8 {
					ys[j] = byte(l) & 0x0f
				} else {
					ys[j-8] |= (byte(l) & 0x0f) << 4
				}
				l >>= 4
				ys[j%4+8] |= byte(l) << (2 * (j / 4))
			}
			putF16(b[108:], 1/iscale)
		} else {
			putF16(b[108:], 0)
		}
		dAll := f16(b[108:])
		for j := 0; j < 16; j++ {
			d := dAll * float32(int8(q3Scale(ys, j))-32)
			if d == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				L[16*j+ii] = int8(clampInt(nearestInt(x[16*j+ii]/d), -4, 3) + 4)
			}
		}
		// The high bit of element j goes to bit j/32 of hmask[j%32].
		for j := range hmask {
			hmask[j] = 0
		}
		for j := 0; j < qkK; j++ {
			if L[j] > 3 {
				hmask[j%32] |= 1 << (j / 32)
				L[j] -= 4
			}
		}
		for j := 0; j < qkK; j += 128 {
			for l := 0; l < 32; l++ {
				qs[j/4+l] = byte(L[j+l]) | byte(L[j+l+32])<<2 | byte(L[j+l+64])<<4 | byte(L[j+l+96])<<6
			}
		}
	}
}

// packScaleMinK4 is the inverse of scaleMinK4 for sub-block j; ys must start
// zeroed for the j ≥ 4 cases, which OR into bytes written for j-4.
func packScaleMinK4(ys []byte, j int, ls, lm uint8) {
	if j < 4 {
		ys[j] = ls
		ys[j+4] = lm
		return
	}
	ys[j+4] = ls&0x0f | (lm&0x0f)<<4
	ys[j-4] |= (ls >> 4) << 6
	ys[j] |= (lm >> 4) << 6
}

// quantK45 is the shared body of quantize_row_q4_K_ref and
// quantize_row_q5_K_ref, which differ only in nmax and the search range of
// make_qkx2_quants. L receives the 256 quants in [0, nmax].
func quantK45(x []float32, b []byte, L *[qkK]uint8, nmax int, rmin, rdelta float32, nstep int) {
	var (
		laux    [32]uint8
		weights [32]float32
		mins    [8]float32
		scales  [8]float32
	)
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(nmax, xs, weights[:], L[32*j:32*j+32], laux[:], rmin, rdelta, nstep, false)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	ys := b[4:16]
	for j := range ys {
		ys[j] = 0
	}
	for j := 0; j < 8; j++ {
		ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
		lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
		packScaleMinK4(ys, j, ls, lm)
	}
	dAll := putF16(b[0:], maxScale/63)
	mAll := putF16(b[2:], maxMin/63)
	for j := 0; j < 8; j++ {
		sc, m := scaleMinK4(j, ys)
		d := dAll * float32(sc)
		if d == 0 {
			continue
		}
		dm := mAll * float32(m)
		for ii := 0; ii < 32; ii++ {
			L[32*j+ii] = uint8(clampInt(nearestInt((x[32*j+ii]+dm)/d), 0, nmax))
		}
	}
}

func quantQ4_K(src []float32, dst []byte) {
	var L [qkK]uint8
	for i := 0; i < len(src)/qkK; i++ {
		x := src[i*qkK : i*qkK+qkK]
		b := dst[i*144 : i*144+144]
		quantK45(x, b, &L, 15, -1, 0.1, 20)
		q := b[16:144]
		for j := 0; j < qkK; j += 64 {
			for l := 0; l < 32; l++ {
				q[j/2+l] = L[j+l] | L[j+l+32]<<4
			}
		}
	}
}

func quantQ5_K(src []float32, dst []byte) {
	var L [qkK]uint8
	for i := 0; i < len(src)/qkK; i++ {
		x := src[i*qkK : i*qkK+qkK]
		b := dst[i*176 : i*176+176]
		quantK45(x, b, &L, 31, -0.5, 0.1, 15)
		qh := b[16:48]
		ql := b[48:176]
		for j := range qh {
			qh[j] = 0
		}
		m1, m2 := byte(1), byte(2)
		for n := 0; n < qkK; n += 64 {
			for j := 0; j < 32; j++ {
				l1, l2 := L[n+j], L[n+j+32]
				if l1 > 15 {
					l1 -= 16
					qh[j] |= m1
				}
				if l2 > 15 {
					l2 -= 16
					qh[j] |= m2
				}
				ql[n/2+j] = l1 | l2<<4
			}
			m1 <<= 2
			m2 <<= 2
		}
	}
}

func quantQ6_K(src []float32, dst []byte) {
	var (
		L      [qkK]int8
		scales [16]float32
	)
	for i := 0; i < len(src)/qkK; i++ {
		x := src[i*qkK : i*qkK+qkK]
		b := dst[i*210 : i*210+210]
		var maxScale, maxAbsScale float32
		for ib := 0; ib < 16; ib++ {
			s := makeQXQuantsRMSE1(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
			scales[ib] = s
			if a := abs32(s); a > maxAbsScale {
				maxAbsScale, maxScale = a, s
			}
		}
		if maxAbsScale < groupMaxEps {
			for j := range b {
				b[j] = 0
			}
			continue
		}
		iscale := -128 / maxScale
		dAll := putF16(b[208:], 1/iscale)
		ys := b[192:208]
		for ib := 0; ib < 16; ib++ {
			ys[ib] = byte(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
		}
		for j := 0; j < 16; j++ {
			d := dAll * float32(int8(ys[j]))
			if d == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				L[16*j+ii] = int8(clampInt(nearestInt(x[16*j+ii]/d), -32, 31) + 32)
			}
		}
		ql := b[0:128]
		qh := b[128:192]
		for j := 0; j < qkK; j += 128 {
			o, h := j/2, j/4
			for l := 0; l < 32; l++ {
				q1 := byte(L[j+l]) & 0x0f
				q2 := byte(L[j+l+32]) & 0x0f
				q3 := byte(L[j+l+64]) & 0x0f
				q4 := byte(L[j+l+96]) & 0x0f
				ql[o+l] = q1 | q3<<4
				ql[o+l+32] = q2 | q4<<4
				qh[h+l] = byte(L[j+l])>>4 | (byte(L[j+l+32])>>4)<<2 | (byte(L[j+l+64])>>4)<<4 | (byte(L[j+l+96])>>4)<<6
			}
		}
	}
}
