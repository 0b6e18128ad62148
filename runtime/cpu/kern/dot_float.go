package kern

import (
	"encoding/binary"
	"math"
)

// The float dots follow ggml_vec_dot_f32/f16/bf16 without SIMD: each product
// is formed in float32 (exact for f16·f16 and bf16·bf16), widened to double
// and summed in order in a double (ggml_float) accumulator.

func dotF32(n int, w, a []byte) float32 {
	w, a = w[:4*n], a[:4*n]
	var s float64
	i := 0
	for ; i+4 <= n; i += 4 {
		x := (*[16]byte)(w[4*i:])
		y := (*[16]byte)(a[4*i:])
		x0 := math.Float32frombits(binary.LittleEndian.Uint32(x[0:]))
		x1 := math.Float32frombits(binary.LittleEndian.Uint32(x[4:]))
		x2 := math.Float32frombits(binary.LittleEndian.Uint32(x[8:]))
		x3 := math.Float32frombits(binary.LittleEndian.Uint32(x[12:]))
		y0 := math.Float32frombits(binary.LittleEndian.Uint32(y[0:]))
		y1 := math.Float32frombits(binary.LittleEndian.Uint32(y[4:]))
		y2 := math.Float32frombits(binary.LittleEndian.Uint32(y[8:]))
		y3 := math.Float32frombits(binary.LittleEndian.Uint32(y[12:]))
		s += float64(float32(x0 * y0))
		s += float64(float32(x1 * y1))
		s += float64(float32(x2 * y2))
		s += float64(float32(x3 * y3))
	}
	for ; i < n; i++ {
		x := math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:]))
		y := math.Float32frombits(binary.LittleEndian.Uint32(a[4*i:]))
		s += float64(float32(x * y))
	}
	return float32(s)
}

func dotF16(n int, w, a []byte) float32 {
	w, a = w[:2*n], a[:2*n]
	t := &f16Table
	var s float64
	i := 0
	for ; i+4 <= n; i += 4 {
		x := (*[8]byte)(w[2*i:])
		y := (*[8]byte)(a[2*i:])
		s += float64(t[binary.LittleEndian.Uint16(x[0:])] * t[binary.LittleEndian.Uint16(y[0:])])
		s += float64(t[binary.LittleEndian.Uint16(x[2:])] * t[binary.LittleEndian.Uint16(y[2:])])
		s += float64(t[binary.LittleEndian.Uint16(x[4:])] * t[binary.LittleEndian.Uint16(y[4:])])
		s += float64(t[binary.LittleEndian.Uint16(x[6:])] * t[binary.LittleEndian.Uint16(y[6:])])
	}
	for ; i < n; i++ {
		s += float64(t[binary.LittleEndian.Uint16(w[2*i:])] * t[binary.LittleEndian.Uint16(a[2*i:])])
	}
	return float32(s)
}

func bf16(b []byte) float32 {
	return math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16)
}

func dotBF16(n int, w, a []byte) float32 {
	w, a = w[:2*n], a[:2*n]
	var s float64
	i := 0
	for ; i+4 <= n; i += 4 {
		x := (*[8]byte)(w[2*i:])
		y := (*[8]byte)(a[2*i:])
		s += float64(bf16(x[0:]) * bf16(y[0:]))
		s += float64(bf16(x[2:]) * bf16(y[2:]))
		s += float64(bf16(x[4:]) * bf16(y[4:]))
		s += float64(bf16(x[6:]) * bf16(y[6:]))
	}
	for ; i < n; i++ {
		s += float64(bf16(w[2*i:]) * bf16(a[2*i:]))
	}
	return float32(s)
}
