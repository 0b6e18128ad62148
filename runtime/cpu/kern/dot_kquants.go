package kern

import (
	"encoding/binary"
	"math"
)

// The k-quants against Q8_K activations, as ggml_vec_dot_q{2..6}_K_q8_K_generic.
//
// Q3_K..Q6_K: ggml accumulates scale*q*y of the block into eight int32 lanes
// aux32[l] (element index mod 8), then adds d*aux32[l] into eight float lanes
// sums[l] that run across blocks, and only at the end adds the lanes into the
// result (after the subtracted minima, for Q4_K/Q5_K). The integer lanes are
// exact, so any order works for them; the float lanes are kept as ggml has
// them. Q2_K sums one int per block instead.

// q8kD is the float32 scale of a Q8_K block.
func q8kD(y *[292]byte) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(y[0:]))
}

// bsum is bsums[j] of a Q8_K block.
func bsum(y *[292]byte, j int) int32 {
	return int32(int16(binary.LittleEndian.Uint16(y[260+2*j:])))
}

// finishLanes adds the float lanes into sumf in ggml's order.
func finishLanes(sumf float32, sums *[8]float32) float32 {
	for _, s := range sums {
		sumf += s
	}
	return sumf
}

// addLanes is sums[l] += d*aux[l].
func addLanes(sums *[8]float32, aux *[8]int32, d float32) {
	for l := range sums {
		sums[l] += float32(d * float32(aux[l]))
	}
}

func dotQ2_K(nb int, w, a []byte) float32 {
	w, a = w[:nb*84], a[:nb*292]
	var sumf float32
	for i := 0; i < nb; i++ {
		x := (*[84]byte)(w[i*84:])
		y := (*[292]byte)(a[i*292:])
		sc := (*[16]byte)(x[0:])
		var summs int32
		for j, s := range sc {
			summs += bsum(y, j) * int32(s>>4)
		}
		var isum int32
		for g := 0; g < 8; g++ { // 32 elements from 32 bytes of qs, 2 bits each
			q := (*[32]byte)(x[16+32*(g>>2):])
			shift := uint(2 * (g & 3))
			yq := (*[32]byte)(y[4+32*g:])
			var s0, s1, s2, s3 int32
			for l := 0; l < 16; l += 2 {
				s0 += int32(q[l]>>shift&3) * i8(yq[l])
				s1 += int32(q[l+1]>>shift&3) * i8(yq[l+1])
				s2 += int32(q[l+16]>>shift&3) * i8(yq[l+16])
				s3 += int32(q[l+17]>>shift&3) * i8(yq[l+17])
			}
			isum += int32(sc[2*g]&15)*(s0+s1) + int32(sc[2*g+1]&15)*(s2+s3)
		}
		yd := q8kD(y)
		dall := yd * f16(x[80:])
		dmin := yd * f16(x[82:])
		sumf += float32(float32(dall*float32(isum)) - float32(dmin*float32(summs)))
	}
	return sumf
}

// q3Scales decodes the sixteen 6-bit scales of a Q3_K block, minus 32.
func q3Scales(s *[12]byte, out *[16]int32) {
	for j := 0; j < 4; j++ {
		h := s[8+j]
		out[j] = int32(s[j]&15|(h&3)<<4) - 32
		out[j+4] = int32(s[j+4]&15|(h>>2&3)<<4) - 32
		out[j+8] = int32(s[j]>>4|(h>>4&3)<<4) - 32
		out[j+12] = int32(s[j+4]>>4|(h>>6)<<4) - 32
	}
}

func dotQ3_K(nb int, w, a []byte) float32 {
	w, a = w[:nb*110], a[:nb*292]
	var sums [8]float32
	var sc [16]int32
	for i := 0; i < nb; i++ {
		x := (*[110]byte)(w[i*110:])
		y := (*[292]byte)(a[i*292:])
		hm := (*[32]byte)(x[0:])
		q3Scales((*[12]byte)(x[96:]), &sc)
		var aux [8]int32
		for g := 0; g < 8; g++ {
			q := (*[32]byte)(x[32+32*(g>>2):])
			shift := uint(2 * (g & 3))
			hbit := uint(g)
			yq := (*[32]byte)(y[4+32*g:])
			s0, s1 := sc[(2*g)&15], sc[(2*g+1)&15]
			for l := 0; l < 8; l++ {
				// q - 4 + 4*h: a clear high bit means 4 lower.
				v0 := int32(q[l]>>shift&3) - 4 + int32(hm[l]>>hbit&1)<<2
				v1 := int32(q[l+8]>>shift&3) - 4 + int32(hm[l+8]>>hbit&1)<<2
				v2 := int32(q[l+16]>>shift&3) - 4 + int32(hm[l+16]>>hbit&1)<<2
				v3 := int32(q[l+24]>>shift&3) - 4 + int32(hm[l+24]>>hbit&1)<<2
				aux[l] += s0*(v0*i8(yq[l])+v1*i8(yq[l+8])) + s1*(v2*i8(yq[l+16])+v3*i8(yq[l+24]))
			}
		}
		addLanes(&sums, &aux, f16(x[108:])*q8kD(y))
	}
	return finishLanes(0, &sums)
}

// scalesK4 decodes the eight 6-bit scales and mins of a Q4_K/Q5_K block
// (ggml's get_scale_min_k4).
func scalesK4(q *[12]byte, sc, mn *[8]int32) {
	for j := 0; j < 4; j++ {
		sc[j] = int32(q[j] & 63)
		mn[j] = int32(q[j+4] & 63)
		sc[j+4] = int32(q[j+8]&15 | (q[j]>>6)<<4)
		mn[j+4] = int32(q[j+8]>>4 | (q[j+4]>>6)<<4)
	}
}

func dotQ4_K(nb int, w, a []byte) float32 {
	w, a = w[:nb*144], a[:nb*292]
	var sums [8]float32
	var sumf float32
	var sc, mn [8]int32
	for i := 0; i < nb; i++ {
		x := (*[144]byte)(w[i*144:])
		y := (*[292]byte)(a[i*292:])
		scalesK4((*[12]byte)(x[4:]), &sc, &mn)
		var sumi int32
		for j := 0; j < 8; j++ {
			sumi += (bsum(y, 2*j) + bsum(y, 2*j+1)) * mn[j]
		}
		var aux [8]int32
		for g := 0; g < 4; g++ {
			q := (*[32]byte)(x[16+32*g:])
			ylo := (*[32]byte)(y[4+64*g:])
			yhi := (*[32]byte)(y[36+64*g:])
			s0, s1 := sc[(2*g)&7], sc[(2*g+1)&7]
			for l := 0; l < 8; l++ {
				b0, b1, b2, b3 := q[l], q[l+8], q[l+16], q[l+24]
				lo := int32(b0&15)*i8(ylo[l]) + int32(b1&15)*i8(ylo[l+8]) + int32(b2&15)*i8(ylo[l+16]) + int32(b3&15)*i8(ylo[l+24])
				hi := int32(b0>>4)*i8(yhi[l]) + int32(b1>>4)*i8(yhi[l+8]) + int32(b2>>4)*i8(yhi[l+16]) + int32(b3>>4)*i8(yhi[l+24])
				aux[l] += s0*lo + s1*hi
			}
		}
		yd := q8kD(y)
		addLanes(&sums, &aux, f16(x[0:])*yd)
		sumf -= float32(float32(f16(x[2:])*yd) * float32(sumi))
	}
	return finishLanes(sumf, &sums)
}

func dotQ5_K(nb int, w, a []byte) float32 {
	w, a = w[:nb*176], a[:nb*292]
	var sums [8]float32
	var sumf float32
	var sc, mn [8]int32
	for i := 0; i < nb; i++ {
		x := (*[176]byte)(w[i*176:])
		y := (*[292]byte)(a[i*292:])
		scalesK4((*[12]byte)(x[4:]), &sc, &mn)
		qh := (*[32]byte)(x[16:])
		var sumi int32
		for j := 0; j < 8; j++ {
			sumi += (bsum(y, 2*j) + bsum(y, 2*j+1)) * mn[j]
		}
		var aux [8]int32
		for g := 0; g < 4; g++ {
			q := (*[32]byte)(x[48+32*g:])
			ylo := (*[32]byte)(y[4+64*g:])
			yhi := (*[32]byte)(y[36+64*g:])
			s0, s1 := sc[(2*g)&7], sc[(2*g+1)&7]
			u0, u1 := uint(2*g), uint(2*g+1)
			for l := 0; l < 8; l++ {
				b0, b1, b2, b3 := q[l], q[l+8], q[l+16], q[l+24]
				h0, h1, h2, h3 := qh[l], qh[l+8], qh[l+16], qh[l+24]
				lo := int32(b0&15|(h0>>u0&1)<<4)*i8(ylo[l]) + int32(b1&15|(h1>>u0&1)<<4)*i8(ylo[l+8]) +
					int32(b2&15|(h2>>u0&1)<<4)*i8(ylo[l+16]) + int32(b3&15|(h3>>u0&1)<<4)*i8(ylo[l+24])
				hi := int32(b0>>4|(h0>>u1&1)<<4)*i8(yhi[l]) + int32(b1>>4|(h1>>u1&1)<<4)*i8(yhi[l+8]) +
					int32(b2>>4|(h2>>u1&1)<<4)*i8(yhi[l+16]) + int32(b3>>4|(h3>>u1&1)<<4)*i8(yhi[l+24])
				aux[l] += s0*lo + s1*hi
			}
		}
		yd := q8kD(y)
		addLanes(&sums, &aux, f16(x[0:])*yd)
		sumf -= float32(float32(f16(x[2:])*yd) * float32(sumi))
	}
	return finishLanes(sumf, &sums)
}

func dotQ6_K(nb int, w, a []byte) float32 {
	w, a = w[:nb*210], a[:nb*292]
	var sums [8]float32
	for i := 0; i < nb; i++ {
		x := (*[210]byte)(w[i*210:])
		y := (*[292]byte)(a[i*292:])
		scs := (*[16]byte)(x[192:])
		var aux [8]int32
		for n := 0; n < 2; n++ {
			qh := (*[32]byte)(x[128+32*n:])
			for k := 0; k < 4; k++ { // elements 128n+32k+l, l < 32
				ql := (*[32]byte)(x[64*n+32*(k&1):])
				ns := uint(4 * (k >> 1))
				hs := uint(2 * k)
				yq := (*[32]byte)(y[4+128*n+32*k:])
				s0 := i8(scs[(8*n+2*k)&15])
				s1 := i8(scs[(8*n+2*k+1)&15])
				for l := 0; l < 8; l++ {
					v0 := int32(ql[l]>>ns&15|(qh[l]>>hs&3)<<4) - 32
					v1 := int32(ql[l+8]>>ns&15|(qh[l+8]>>hs&3)<<4) - 32
					v2 := int32(ql[l+16]>>ns&15|(qh[l+16]>>hs&3)<<4) - 32
					v3 := int32(ql[l+24]>>ns&15|(qh[l+24]>>hs&3)<<4) - 32
					aux[l] += s0*(v0*i8(yq[l])+v1*i8(yq[l+8])) + s1*(v2*i8(yq[l+16])+v3*i8(yq[l+24]))
				}
			}
		}
		addLanes(&sums, &aux, f16(x[208:])*q8kD(y))
	}
	return finishLanes(0, &sums)
}
