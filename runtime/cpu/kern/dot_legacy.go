package kern

import (
	"encoding/binary"
	"math"

	"github.com/minerva-llm/minerva/quant"
)

// The 32-element formats against Q8_0 / Q8_1 activations, as
// ggml_vec_dot_{q4_0,q5_0,q8_0,mxfp4}_q8_0_generic and
// ggml_vec_dot_{q4_1,q5_1}_q8_1_generic. In the 4- and 5-bit weights byte j
// holds element j in its low nibble and element j+16 in its high nibble.

// i8 widens a byte holding an int8 quant.
func i8(b byte) int32 { return int32(int8(b)) }

// dotI8x16 is Σ x[j]*y[j] over 16 signed bytes.
func dotI8x16(x, y *[16]byte) int32 {
	s0 := i8(x[0])*i8(y[0]) + i8(x[1])*i8(y[1]) + i8(x[2])*i8(y[2]) + i8(x[3])*i8(y[3])
	s1 := i8(x[4])*i8(y[4]) + i8(x[5])*i8(y[5]) + i8(x[6])*i8(y[6]) + i8(x[7])*i8(y[7])
	s2 := i8(x[8])*i8(y[8]) + i8(x[9])*i8(y[9]) + i8(x[10])*i8(y[10]) + i8(x[11])*i8(y[11])
	s3 := i8(x[12])*i8(y[12]) + i8(x[13])*i8(y[13]) + i8(x[14])*i8(y[14]) + i8(x[15])*i8(y[15])
	return (s0 + s1) + (s2 + s3)
}

// dotNib is Σ lo(q[j])*ylo[j] + hi(q[j])*yhi[j] with the nibbles unsigned.
func dotNib(q, ylo, yhi *[16]byte) int32 {
	var s0, s1, s2, s3 int32
	for j := 0; j < 16; j += 2 {
		b0, b1 := q[j], q[j+1]
		s0 += int32(b0&15) * i8(ylo[j])
		s1 += int32(b0>>4) * i8(yhi[j])
		s2 += int32(b1&15) * i8(ylo[j+1])
		s3 += int32(b1>>4) * i8(yhi[j+1])
	}
	return (s0 + s1) + (s2 + s3)
}

// dotNib5 is dotNib with fifth bits: bit j of qh goes with element j, bit
// j+16 with element j+16.
func dotNib5(q *[16]byte, qh uint32, ylo, yhi *[16]byte) int32 {
	var s0, s1, s2, s3 int32
	for j := 0; j < 16; j += 2 {
		b0, b1 := q[j], q[j+1]
		h := qh >> uint(j)
		s0 += (int32(b0&15) | int32(h&1)<<4) * i8(ylo[j])
		s1 += (int32(b0>>4) | int32(h>>16&1)<<4) * i8(yhi[j])
		s2 += (int32(b1&15) | int32(h>>1&1)<<4) * i8(ylo[j+1])
		s3 += (int32(b1>>4) | int32(h>>17&1)<<4) * i8(yhi[j+1])
	}
	return (s0 + s1) + (s2 + s3)
}

// dotNibOff is dotNib with off subtracted from every nibble (Q4_0).
func dotNibOff(q, ylo, yhi *[16]byte, off int32) int32 {
	var s0, s1, s2, s3 int32
	for j := 0; j < 16; j += 2 {
		b0, b1 := q[j], q[j+1]
		s0 += (int32(b0&15) - off) * i8(ylo[j])
		s1 += (int32(b0>>4) - off) * i8(yhi[j])
		s2 += (int32(b1&15) - off) * i8(ylo[j+1])
		s3 += (int32(b1>>4) - off) * i8(yhi[j+1])
	}
	return (s0 + s1) + (s2 + s3)
}

// dotNib5Off is dotNib5 with off subtracted from every value (Q5_0).
func dotNib5Off(q *[16]byte, qh uint32, ylo, yhi *[16]byte, off int32) int32 {
	var s0, s1, s2, s3 int32
	for j := 0; j < 16; j += 2 {
		b0, b1 := q[j], q[j+1]
		h := qh >> uint(j)
		s0 += (int32(b0&15) | int32(h&1)<<4 - off) * i8(ylo[j])
		s1 += (int32(b0>>4) | int32(h>>16&1)<<4 - off) * i8(yhi[j])
		s2 += (int32(b1&15) | int32(h>>1&1)<<4 - off) * i8(ylo[j+1])
		s3 += (int32(b1>>4) | int32(h>>17&1)<<4 - off) * i8(yhi[j+1])
	}
	return (s0 + s1) + (s2 + s3)
}

func dotQ8_0(nb int, w, a []byte) float32 {
	w, a = w[:nb*34], a[:nb*34]
	var sumf float32
	for i := 0; i < nb; i++ {
		x := (*[34]byte)(w[i*34:])
		y := (*[34]byte)(a[i*34:])
		sumi := dotI8x16((*[16]byte)(x[2:]), (*[16]byte)(y[2:])) + dotI8x16((*[16]byte)(x[18:]), (*[16]byte)(y[18:]))
		// sumi*(dx*dy)
		sumf += float32(float32(sumi) * float32(f16(x[:])*f16(y[:])))
	}
	return sumf
}

func dotQ4_0(nb int, w, a []byte) float32 {
	w, a = w[:nb*18], a[:nb*34]
	var sumf float32
	for i := 0; i < nb; i++ {
		x := (*[18]byte)(w[i*18:])
		y := (*[34]byte)(a[i*34:])
		ylo, yhi := (*[16]byte)(y[2:]), (*[16]byte)(y[18:])
		sumi := dotNibOff((*[16]byte)(x[2:]), ylo, yhi, 8)
		// sumi*dx*dy is (sumi*dx)*dy.
		sumf += float32(float32(float32(sumi)*f16(x[:])) * f16(y[:]))
	}
	return sumf
}

func dotQ4_1(nb int, w, a []byte) float32 {
	w, a = w[:nb*20], a[:nb*36]
	var sumf float32
	for i := 0; i < nb; i++ {
		x := (*[20]byte)(w[i*20:])
		y := (*[36]byte)(a[i*36:])
		sumi := dotNib((*[16]byte)(x[4:]), (*[16]byte)(y[4:]), (*[16]byte)(y[20:]))
		// sumf += (dx*dy)*sumi + mx*sy
		t := float32(float32(f16(x[0:])*f16(y[0:]))*float32(sumi)) + float32(f16(x[2:])*f16(y[2:]))
		sumf += t
	}
	return sumf
}

func dotQ5_0(nb int, w, a []byte) float32 {
	w, a = w[:nb*22], a[:nb*34]
	var sumf float32
	for i := 0; i < nb; i++ {
		x := (*[22]byte)(w[i*22:])
		y := (*[34]byte)(a[i*34:])
		ylo, yhi := (*[16]byte)(y[2:]), (*[16]byte)(y[18:])
		qh := binary.LittleEndian.Uint32(x[2:])
		sumi := dotNib5Off((*[16]byte)(x[6:]), qh, ylo, yhi, 16)
		// (dx*dy)*sumi
		sumf += float32(float32(f16(x[:])*f16(y[:])) * float32(sumi))
	}
	return sumf
}

func dotQ5_1(nb int, w, a []byte) float32 {
	w, a = w[:nb*24], a[:nb*36]
	var sumf float32
	for i := 0; i < nb; i++ {
		x := (*[24]byte)(w[i*24:])
		y := (*[36]byte)(a[i*36:])
		qh := binary.LittleEndian.Uint32(x[4:])
		sumi := dotNib5((*[16]byte)(x[8:]), qh, (*[16]byte)(y[4:]), (*[16]byte)(y[20:]))
		t := float32(float32(f16(x[0:])*f16(y[0:]))*float32(sumi)) + float32(f16(x[2:])*f16(y[2:]))
		sumf += t
	}
	return sumf
}

// kvaluesMXFP4 is quant.MXFP4Values (ggml's kvalues_mxfp4) widened to int32.
var kvaluesMXFP4 = func() (t [16]int32) {
	for i, v := range quant.MXFP4Values {
		t[i] = int32(v)
	}
	return t
}()

// e8m0Half is ggml_e8m0_to_fp32_half: 2^(e-128).
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func dotMXFP4(nb int, w, a []byte) float32 {
	w, a = w[:nb*17], a[:nb*34]
	kv := &kvaluesMXFP4
	var sumf float32
	for i := 0; i < nb; i++ {
		x := (*[17]byte)(w[i*17:])
		y := (*[34]byte)(a[i*34:])
		q := (*[16]byte)(x[1:])
		ylo, yhi := (*[16]byte)(y[2:]), (*[16]byte)(y[18:])
		var s0, s1, s2, s3 int32
		for j := 0; j < 16; j += 2 {
			b0, b1 := q[j], q[j+1]
			s0 += kv[b0&15] * i8(ylo[j])
			s1 += kv[b0>>4] * i8(yhi[j])
			s2 += kv[b1&15] * i8(ylo[j+1])
			s3 += kv[b1>>4] * i8(yhi[j+1])
		}
		d := f16(y[:]) * e8m0Half(x[0])
		sumf += float32(d * float32((s0+s1)+(s2+s3)))
	}
	return sumf
}
