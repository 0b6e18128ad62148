package quant

import "github.com/minerva-llm/minerva/ir"

// The K-quants: 256-element super-blocks split into 16 or 8 sub-blocks, each
// with its own small integer scale (and for Q2_K/Q4_K/Q5_K a minimum), which a
// half-precision super-block scale turns into floats.
//
//	block_q2_K {u8 scales[16]; u8 qs[64]; f16 d; f16 dmin}                 84 bytes
//	block_q3_K {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}             110 bytes
//	block_q4_K {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]}                144 bytes
//	block_q5_K {f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}     176 bytes
//	block_q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}               210 bytes
//
// The quants are interleaved so that SIMD code can unpack 32 consecutive
// elements from one shift of 32 consecutive bytes; the loops below walk the
// layout the way ggml's dequantize_row_* do and write elements in order.
//
// Float order matters for bit-exactness: ggml first forms the sub-block scale
// (d*sc, and min*m) in float32, then multiplies the quant by it, then
// subtracts the scaled minimum. Every product feeding an addition is wrapped
// in float32() so Go cannot fuse it into an FMA.

const qkK = 256 // QK_K, elements per super-block

func init() {
	register(ir.Q2_K, codec{dequant: dequantQ2_K, quant: quantQ2_K})
	register(ir.Q3_K, codec{dequant: dequantQ3_K, quant: quantQ3_K})
	register(ir.Q4_K, codec{dequant: dequantQ4_K, quant: quantQ4_K})
	register(ir.Q5_K, codec{dequant: dequantQ5_K, quant: quantQ5_K})
	register(ir.Q6_K, codec{dequant: dequantQ6_K, quant: quantQ6_K})
}

func dequantQ2_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qkK; i++ {
		b := src[i*84 : i*84+84]
		y := dst[i*qkK : i*qkK+qkK]
		scales := b[0:16]
		d := f16(b[80:])
		dmin := f16(b[82:])
		is, o := 0, 0
		for n := 0; n < 2; n++ { // two halves of 128, each from 32 bytes of qs
			q := b[16+32*n : 16+32*n+32]
			for shift := uint(0); shift < 8; shift += 2 {
				for half := 0; half < 2; half++ { // 16 elements from q[0:16], then 16 from q[16:32]
					sc := scales[is]
					is++
					dl := d * float32(sc&0x0f)
					ml := dmin * float32(sc>>4)
					qq := q[16*half : 16*half+16]
					out := y[o : o+16]
					for l := range out {
						out[l] = float32(dl*float32((qq[l]>>shift)&3)) - ml
					}
					o += 16
				}
			}
		}
	}
}

// q3Scale returns the 6-bit scale j (0..15) of a Q3_K block, unsigned (0..63):
// the low 4 bits are nibbles of scales[0:8], the high 2 bits are bit pairs of
// scales[8:12].
func q3Scale(s []byte, j int) int {
	var lo byte
	if j < 8 {
		lo = s[j] & 0x0f
	} else {
		lo = s[j-8] >> 4
	}
	hi := (s[8+j%4] >> (2 * (j / 4))) & 3
	return int(lo | hi<<4)
}

func dequantQ3_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qkK; i++ {
		b := src[i*110 : i*110+110]
		y := dst[i*qkK : i*qkK+qkK]
		hm := b[0:32]
		scales := b[96:108]
		dAll := f16(b[108:])
		is, o := 0, 0
		m := byte(1)
		for n := 0; n < 2; n++ {
			q := b[32+32*n : 32+32*n+32]
			for shift := uint(0); shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					dl := dAll * float32(q3Scale(scales, is)-32)
					is++
					qq := q[16*half : 16*half+16]
					hh := hm[16*half : 16*half+16]
					out := y[o : o+16]
					for l := range out {
						v := int((qq[l] >> shift) & 3)
						if hh[l]&m == 0 { // high bit clear: the value is 4 lower
							v -= 4
						}
						out[l] = dl * float32(v)
					}
					o += 16
				}
				m <<= 1
			}
		}
	}
}

// scaleMinK4 is ggml's get_scale_min_k4: the 6-bit scale and min of sub-block
// j (0..7) of a Q4_K/Q5_K block. Sub-blocks 0..3 use the low 6 bits of bytes
// j and j+4; sub-blocks 4..7 take their low 4 bits from byte j+4 and their
// high 2 bits from the top bits of bytes j-4 and j.
func scaleMinK4(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0x0f | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

func dequantQ4_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qkK; i++ {
		b := src[i*144 : i*144+144]
		y := dst[i*qkK : i*qkK+qkK]
		d := f16(b[0:])
		dmin := f16(b[2:])
		scales := b[4:16]
		for g := 0; g < 4; g++ { // 64 elements from 32 bytes: low nibbles, then high
			q := b[16+32*g : 16+32*g+32]
			sc, m := scaleMinK4(2*g, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(2*g+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			lo := y[64*g : 64*g+32]
			hi := y[64*g+32 : 64*g+64]
			for l := 0; l < 32; l++ {
				lo[l] = float32(d1*float32(q[l]&0x0f)) - m1
				hi[l] = float32(d2*float32(q[l]>>4)) - m2
			}
		}
	}
}

func dequantQ5_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qkK; i++ {
		b := src[i*176 : i*176+176]
		y := dst[i*qkK : i*qkK+qkK]
		d := f16(b[0:])
		dmin := f16(b[2:])
		scales := b[4:16]
		qh := b[16:48]
		u1, u2 := byte(1), byte(2)
		for g := 0; g < 4; g++ {
			ql := b[48+32*g : 48+32*g+32]
			sc, m := scaleMinK4(2*g, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(2*g+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			lo := y[64*g : 64*g+32]
			hi := y[64*g+32 : 64*g+64]
			for l := 0; l < 32; l++ {
				v1 := ql[l] & 0x0f
				if qh[l]&u1 != 0 {
					v1 += 16
				}
				v2 := ql[l] >> 4
				if qh[l]&u2 != 0 {
					v2 += 16
				}
				lo[l] = float32(d1*float32(v1)) - m1
				hi[l] = float32(d2*float32(v2)) - m2
			}
			u1 <<= 2
			u2 <<= 2
		}
	}
}

func dequantQ6_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qkK; i++ {
		b := src[i*210 : i*210+210]
		y := dst[i*qkK : i*qkK+qkK]
		d := f16(b[208:])
		for n := 0; n < 2; n++ { // two halves of 128: 64 bytes of ql, 32 of qh, 8 scales each
			ql := b[64*n : 64*n+64]
			qh := b[128+32*n : 128+32*n+32]
			sc := b[192+8*n : 192+8*n+8]
			out := y[128*n : 128*n+128]
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int(ql[l]&0x0f|(qh[l]&3)<<4) - 32
				q2 := int(ql[l+32]&0x0f|((qh[l]>>2)&3)<<4) - 32
				q3 := int(ql[l]>>4|((qh[l]>>4)&3)<<4) - 32
				q4 := int(ql[l+32]>>4|((qh[l]>>6)&3)<<4) - 32
				// d * sc * q is (d*sc)*q in C; the conversion after the first
				// product is what the spec needs to keep it rounded.
				out[l] = float32(d*float32(int8(sc[is]))) * float32(q1)
				out[l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
				out[l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
				out[l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
			}
		}
	}
}
