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
		b := (*[84]byte)(src[i*84:])
		y := (*[qkK]float32)(dst[i*qkK:])
		d := f16(b[80:])
		dmin := f16(b[82:])
		is, o := 0, 0
		for n := 0; n < 2; n++ { // two halves of 128, each from 32 bytes of qs
			q := (*[32]byte)(b[16+32*n:])
			for shift := uint(0); shift < 8; shift += 2 {
				// 16 elements from q[0:16] with one scale, then 16 from
				// q[16:32] with the next.
				sc := b[is]
				dl1, ml1 := d*float32(sc&0x0f), dmin*float32(sc>>4)
				sc = b[is+1]
				dl2, ml2 := d*float32(sc&0x0f), dmin*float32(sc>>4)
				is += 2
				out := (*[32]float32)(y[o:])
				for l := 0; l < 16; l++ {
					out[l] = float32(dl1*float32((q[l]>>shift)&3)) - ml1
					out[l+16] = float32(dl2*float32((q[l+16]>>shift)&3)) - ml2
				}
				o += 32
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
		b := (*[110]byte)(src[i*110:])
		y := (*[qkK]float32)(dst[i*qkK:])
		hm := (*[32]byte)(b[0:])
		scales := b[96:108]
		dAll := f16(b[108:])
		is, o := 0, 0
		hbit := uint(0) // bit of hmask that holds the high bits of this group of 32
		for n := 0; n < 2; n++ {
			q := (*[32]byte)(b[32+32*n:])
			for shift := uint(0); shift < 8; shift += 2 {
				dl1 := dAll * float32(q3Scale(scales, is)-32)
				dl2 := dAll * float32(q3Scale(scales, is+1)-32)
				is += 2
				out := (*[32]float32)(y[o:])
				for l := 0; l < 16; l++ {
					// A clear high bit means the value is 4 lower: q - 4 + 4*h.
					v1 := int((q[l]>>shift)&3) - 4 + int((hm[l]>>hbit)&1)<<2
					v2 := int((q[l+16]>>shift)&3) - 4 + int((hm[l+16]>>hbit)&1)<<2
					out[l] = dl1 * float32(v1)
					out[l+16] = dl2 * float32(v2)
				}
				o += 32
				hbit++
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
		b := (*[144]byte)(src[i*144:])
		y := (*[qkK]float32)(dst[i*qkK:])
		d := f16(b[0:])
		dmin := f16(b[2:])
		scales := b[4:16]
		for g := 0; g < 4; g++ { // 64 elements from 32 bytes: low nibbles, then high
			q := (*[32]byte)(b[16+32*g:])
			sc, m := scaleMinK4(2*g, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(2*g+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			out := (*[64]float32)(y[64*g:])
			for l := 0; l < 32; l++ {
				out[l] = float32(d1*float32(q[l]&0x0f)) - m1
				out[l+32] = float32(d2*float32(q[l]>>4)) - m2
			}
		}
	}
}

func dequantQ5_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qkK; i++ {
		b := (*[176]byte)(src[i*176:])
		y := (*[qkK]float32)(dst[i*qkK:])
		d := f16(b[0:])
		dmin := f16(b[2:])
		scales := b[4:16]
		qh := (*[32]byte)(b[16:])
		for g := 0; g < 4; g++ {
			ql := (*[32]byte)(b[48+32*g:])
			sc, m := scaleMinK4(2*g, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(2*g+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			// The fifth bits of this group's two halves are bits 2g and 2g+1
			// of qh (ggml's masks u1 = 1<<2g, u2 = 2<<2g).
			s1, s2 := uint(2*g), uint(2*g+1)
			out := (*[64]float32)(y[64*g:])
			for l := 0; l < 32; l++ {
				v1 := ql[l]&0x0f | (qh[l]>>s1&1)<<4
				v2 := ql[l]>>4 | (qh[l]>>s2&1)<<4
				out[l] = float32(d1*float32(v1)) - m1
				out[l+32] = float32(d2*float32(v2)) - m2
			}
		}
	}
}

func dequantQ6_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qkK; i++ {
		b := (*[210]byte)(src[i*210:])
		y := (*[qkK]float32)(dst[i*qkK:])
		d := f16(b[208:])
		for n := 0; n < 2; n++ { // two halves of 128: 64 bytes of ql, 32 of qh, 8 scales each
			ql := (*[64]byte)(b[64*n:])
			qh := (*[32]byte)(b[128+32*n:])
			sc := (*[8]byte)(b[192+8*n:])
			out := (*[128]float32)(y[128*n:])
			for is := 0; is < 2; is++ { // sub-blocks of 16: l in [16*is, 16*is+16)
				// d * sc * q is (d*sc)*q in C.
				d1 := d * float32(int8(sc[is]))
				d2 := d * float32(int8(sc[is+2]))
				d3 := d * float32(int8(sc[is+4]))
				d4 := d * float32(int8(sc[is+6]))
				for l := 16 * is; l < 16*is+16; l++ {
					h := qh[l]
					q1 := int(ql[l]&0x0f|(h&3)<<4) - 32
					q2 := int(ql[l+32]&0x0f|(h>>2&3)<<4) - 32
					q3 := int(ql[l]>>4|(h>>4&3)<<4) - 32
					q4 := int(ql[l+32]>>4|(h>>6&3)<<4) - 32
					out[l] = d1 * float32(q1)
					out[l+32] = d2 * float32(q2)
					out[l+64] = d3 * float32(q3)
					out[l+96] = d4 * float32(q4)
				}
			}
		}
	}
}
