package kern

import (
	"encoding/binary"
	"math"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// Independent test references: straightforward transcriptions of ggml's
// quantize_row_q8_*_ref and of the generic vec_dot formulas, written per
// element with no shared helpers from the package.

func h16(b []byte) float32 { return quant.F16ToF32(binary.LittleEndian.Uint16(b)) }

func putH16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, quant.F32ToF16(f)) }

func fabs(x float32) float32 { return float32(math.Abs(float64(x))) }

func cRoundf(x float32) int8 { return int8(math.Round(float64(x))) }

func refQuantQ8_0(x []float32) []byte {
	nb := len(x) / 32
	out := make([]byte, nb*34)
	for i := 0; i < nb; i++ {
		var amax float32
		for j := 0; j < 32; j++ {
			v := fabs(x[i*32+j])
			if amax > v {
				continue
			}
			amax = v
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1.0 / d
		}
		putH16(out[i*34:], d)
		for j := 0; j < 32; j++ {
			x0 := x[i*32+j] * id
			out[i*34+2+j] = byte(cRoundf(x0))
		}
	}
	return out
}

func refQuantQ8_1(x []float32) []byte {
	nb := len(x) / 32
	out := make([]byte, nb*36)
	for i := 0; i < nb; i++ {
		var amax float32
		for j := 0; j < 32; j++ {
			amax = max(amax, fabs(x[i*32+j]))
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1.0 / d
		}
		putH16(out[i*36:], d)
		sum := 0
		for j := 0; j < 16; j++ {
			v0 := x[i*32+j] * id
			v1 := x[i*32+16+j] * id
			q0, q1 := cRoundf(v0), cRoundf(v1)
			out[i*36+4+j] = byte(q0)
			out[i*36+20+j] = byte(q1)
			sum += int(q0) + int(q1)
		}
		putH16(out[i*36+2:], float32(sum)*d)
	}
	return out
}

func refQuantQ8_K(x []float32) []byte {
	nb := len(x) / 256
	out := make([]byte, nb*292)
	for i := 0; i < nb; i++ {
		blk := x[i*256 : i*256+256]
		o := out[i*292 : i*292+292]
		var mx, amax float32
		for _, v := range blk {
			if ax := fabs(v); ax > amax {
				amax, mx = ax, v
			}
		}
		if amax == 0 {
			continue // d = 0, qs = 0, bsums = 0
		}
		iscale := -127 / mx
		for j, v := range blk {
			p := iscale * v
			r := int(math.RoundToEven(float64(p))) // nearest_int
			o[4+j] = byte(int8(min(127, r)))
		}
		for j := 0; j < 16; j++ {
			s := 0
			for k := 0; k < 16; k++ {
				s += int(int8(o[4+16*j+k]))
			}
			binary.LittleEndian.PutUint16(o[260+2*j:], uint16(int16(s)))
		}
		binary.LittleEndian.PutUint32(o[0:], math.Float32bits(1/iscale))
	}
	return out
}

// wBlock is one weight block decoded to integers: element quants q (signed,
// offsets applied), per-element integer scale sc and min mn (k-quants), and
// the float factors d, m (legacy _1 min, or k-quant dmin).
type wBlock struct {
	q, sc, mn []int32
	d, m      float32
}

func bit(b []byte, i int) int32 { return int32(b[i/8]>>(i%8)) & 1 }

// nib returns element j (0..31) of a 16-byte legacy nibble array.
func nib(qs []byte, j int) int32 {
	if j < 16 {
		return int32(qs[j] & 15)
	}
	return int32(qs[j-16] >> 4)
}

var mxfp4Vals = []int32{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

func e8m0h(e byte) float32 {
	// 2^(e-128), subnormal for e < 2.
	return float32(math.Ldexp(1, int(e)-128))
}

// k4scale is get_scale_min_k4 written out per index.
func k4scale(s []byte, j int) (int32, int32) {
	if j < 4 {
		return int32(s[j] & 63), int32(s[j+4] & 63)
	}
	return int32(s[j+4]&15) | int32(s[j-4]>>6)<<4, int32(s[j+4]>>4) | int32(s[j]>>6)<<4
}

func decodeBlock(t ir.DType, b []byte) wBlock {
	bs := t.BlockSize()
	w := wBlock{q: make([]int32, bs), sc: make([]int32, bs), mn: make([]int32, bs)}
	switch t {
	case ir.Q4_0:
		w.d = h16(b)
		for j := range 32 {
			w.q[j] = nib(b[2:], j) - 8
		}
	case ir.Q4_1:
		w.d, w.m = h16(b), h16(b[2:])
		for j := range 32 {
			w.q[j] = nib(b[4:], j)
		}
	case ir.Q5_0:
		w.d = h16(b)
		for j := range 32 {
			w.q[j] = nib(b[6:], j) + 16*bit(b[2:6], j) - 16
		}
	case ir.Q5_1:
		w.d, w.m = h16(b), h16(b[2:])
		for j := range 32 {
			w.q[j] = nib(b[8:], j) + 16*bit(b[4:8], j)
		}
	case ir.Q8_0:
		w.d = h16(b)
		for j := range 32 {
			w.q[j] = int32(int8(b[2+j]))
		}
	case ir.MXFP4:
		w.d = e8m0h(b[0])
		for j := range 32 {
			w.q[j] = mxfp4Vals[nib(b[1:], j)]
		}
	case ir.Q2_K:
		w.d, w.m = h16(b[80:]), h16(b[82:])
		for e := range 256 {
			half, r := e/128, e%128
			shift, l := 2*(r/32), r%32
			w.q[e] = int32(b[16+32*half+l]>>shift) & 3
			w.sc[e] = int32(b[e/16] & 15)
			w.mn[e] = int32(b[e/16] >> 4)
		}
	case ir.Q3_K:
		w.d = h16(b[108:])
		s := b[96:108]
		for e := range 256 {
			half, r := e/128, e%128
			shift, l := 2*(r/32), r%32
			g := e / 32
			w.q[e] = int32(b[32+32*half+l]>>shift)&3 - 4*(1-bit(b[0:32], l*8+g))
			j := e / 16
			var lo int32
			if j < 8 {
				lo = int32(s[j] & 15)
			} else {
				lo = int32(s[j-8] >> 4)
			}
			hi := int32(s[8+j%4]>>(2*(j/4))) & 3
			w.sc[e] = lo + 16*hi - 32
		}
	case ir.Q4_K, ir.Q5_K:
		w.d, w.m = h16(b), h16(b[2:])
		qs := 16
		if t == ir.Q5_K {
			qs = 48
		}
		for e := range 256 {
			g, r := e/64, e%64
			v := int32(b[qs+32*g+r%32])
			if r < 32 {
				v &= 15
			} else {
				v >>= 4
			}
			if t == ir.Q5_K {
				v += 16 * bit(b[16:48], (r%32)*8+e/32)
			}
			w.q[e] = v
			w.sc[e], w.mn[e] = k4scale(b[4:16], e/32)
		}
	case ir.Q6_K:
		w.d = h16(b[208:])
		for e := range 256 {
			half, r := e/128, e%128
			k, l := r/32, r%32
			lo := int32(b[64*half+32*(k%2)+l]>>(4*(k/2))) & 15
			hi := int32(b[128+32*half+l]>>(2*k)) & 3
			w.q[e] = lo + 16*hi - 32
			w.sc[e] = int32(int8(b[192+e/16]))
		}
	default:
		panic("decodeBlock: " + t.String())
	}
	return w
}

// dequantRef dequantizes one decoded block with ggml's float formulas; it
// must equal quant.Dequantize bit for bit (checked by a test), which ties
// the integer decoding above to the bit-exact dequantizer.
func dequantRef(t ir.DType, w wBlock) []float32 {
	y := make([]float32, len(w.q))
	for e, q := range w.q {
		switch t {
		case ir.Q4_0, ir.Q5_0, ir.Q8_0, ir.MXFP4:
			y[e] = float32(q) * w.d
		case ir.Q4_1, ir.Q5_1:
			y[e] = float32(float32(q)*w.d) + w.m
		case ir.Q2_K, ir.Q4_K, ir.Q5_K:
			y[e] = float32(float32(w.d*float32(w.sc[e]))*float32(q)) - float32(w.m*float32(w.mn[e]))
		case ir.Q3_K, ir.Q6_K:
			y[e] = float32(w.d*float32(w.sc[e])) * float32(q)
		}
	}
	return y
}

// refDot is the integer reference: both rows decoded to integers, combined
// with the float arithmetic of ggml's generic vec_dot.
func refDot(t ir.DType, n int, w, a []byte) float32 {
	switch t {
	case ir.F32:
		var s float64
		for i := 0; i < n; i++ {
			x := math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:]))
			y := math.Float32frombits(binary.LittleEndian.Uint32(a[4*i:]))
			s += float64(x) * float64(y)
		}
		return float32(s)
	case ir.F16, ir.BF16:
		var s float64
		for i := 0; i < n; i++ {
			u, v := binary.LittleEndian.Uint16(w[2*i:]), binary.LittleEndian.Uint16(a[2*i:])
			var x, y float32
			if t == ir.F16 {
				x, y = quant.F16ToF32(u), quant.F16ToF32(v)
			} else {
				x, y = quant.BF16ToF32(u), quant.BF16ToF32(v)
			}
			s += float64(x) * float64(y) // exact: 11+11 or 8+8 significant bits
		}
		return float32(s)
	}
	bs, bb := t.BlockSize(), t.BlockBytes()
	at := ActType(t)
	ab := at.BlockBytes()
	var sumf float32
	var sums [8]float32
	for i := 0; i < n/bs; i++ {
		wb := decodeBlock(t, w[i*bb:(i+1)*bb])
		ablk := a[i*ab : (i+1)*ab]
		var yq []int32
		var yd, ys float32
		switch at {
		case ir.Q8_0:
			yd = h16(ablk)
			for j := range 32 {
				yq = append(yq, int32(int8(ablk[2+j])))
			}
		case ir.Q8_1:
			yd, ys = h16(ablk), h16(ablk[2:])
			for j := range 32 {
				yq = append(yq, int32(int8(ablk[4+j])))
			}
		case ir.Q8_K:
			yd = math.Float32frombits(binary.LittleEndian.Uint32(ablk))
			for j := range 256 {
				yq = append(yq, int32(int8(ablk[4+j])))
			}
		}
		switch t {
		case ir.Q4_0:
			var sumi int32
			for e := range 32 {
				sumi += wb.q[e] * yq[e]
			}
			p := float32(sumi) * wb.d
			sumf += float32(p * yd)
		case ir.Q8_0, ir.Q5_0:
			var sumi int32
			for e := range 32 {
				sumi += wb.q[e] * yq[e]
			}
			dd := wb.d * yd
			sumf += float32(dd * float32(sumi))
		case ir.MXFP4:
			var sumi int32
			for e := range 32 {
				sumi += wb.q[e] * yq[e]
			}
			dd := yd * wb.d
			sumf += float32(dd * float32(sumi))
		case ir.Q4_1, ir.Q5_1:
			var sumi int32
			for e := range 32 {
				sumi += wb.q[e] * yq[e]
			}
			dd := wb.d * yd
			p1 := float32(dd * float32(sumi))
			p2 := float32(wb.m * ys)
			sumf += p1 + p2
		case ir.Q2_K:
			var isum, summs int32
			for e := range 256 {
				isum += wb.sc[e] * wb.q[e] * yq[e]
				summs += wb.mn[e] * yq[e]
			}
			dall := yd * wb.d
			dmin := yd * wb.m
			p1 := float32(dall * float32(isum))
			p2 := float32(dmin * float32(summs))
			sumf += p1 - p2
		case ir.Q3_K, ir.Q4_K, ir.Q5_K, ir.Q6_K:
			var aux [8]int32
			var summ int32
			for e := range 256 {
				aux[e%8] += wb.sc[e] * wb.q[e] * yq[e]
				summ += wb.mn[e] * yq[e]
			}
			d := wb.d * yd
			for l := range 8 {
				sums[l] += float32(d * float32(aux[l]))
			}
			if t == ir.Q4_K || t == ir.Q5_K {
				dmin := wb.m * yd
				sumf -= float32(dmin * float32(summ))
			}
		}
	}
	for l := range 8 {
		sumf += sums[l]
	}
	return sumf
}
