package quant

import (
	"math"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// f16Ref decodes a binary16 pattern with float64 arithmetic straight from the
// IEEE definition, independent of the bit manipulation in F16ToF32.
func f16Ref(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch e {
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	case 0:
		return sign * m * math.Ldexp(1, -24)
	default:
		return sign * (1 + m/1024) * math.Ldexp(1, e-15)
	}
}

// bf16Ref decodes a bfloat16 pattern the same way (8 exponent bits, bias 127,
// 7 mantissa bits). expAllowed255 treats exponent 255 as an ordinary binade
// (2^128), which the rounding reference uses as the "next value" above the
// largest finite bfloat16.
func bf16Ref(b uint16, expAllowed255 bool) float64 {
	sign := 1.0
	if b&0x8000 != 0 {
		sign = -1
	}
	e := int(b>>7) & 0xff
	m := float64(b & 0x7f)
	switch {
	case e == 0xff && !expAllowed255:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	case e == 0:
		return sign * m * math.Ldexp(1, -133)
	default:
		return sign * (1 + m/128) * math.Ldexp(1, e-127)
	}
}

func TestF16ToF32Exhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		got := F16ToF32(h)
		want := f16Ref(h)
		if math.IsNaN(want) {
			require.True(t, math.IsNaN(float64(got)), "%#04x", h)
			bits := math.Float32bits(got)
			require.Equal(t, uint32(h&0x8000)<<16, bits&0x80000000, "%#04x: NaN sign", h)
			require.NotZero(t, bits&0x00400000, "%#04x: NaN not quiet", h)
			require.Equal(t, uint32(h&0x1ff), bits>>13&0x1ff, "%#04x: NaN payload", h)
			continue
		}
		require.Equal(t, want, float64(got), "%#04x", h)
		require.Equal(t, math.Signbit(want), math.Signbit(float64(got)), "%#04x: sign", h)
	}
}

func TestBF16ToF32Exhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		b := uint16(i)
		got := BF16ToF32(b)
		want := bf16Ref(b, false)
		if math.IsNaN(want) {
			// ggml widens by shifting: the NaN keeps every bit.
			require.Equal(t, uint32(b)<<16, math.Float32bits(got), "%#04x", b)
			continue
		}
		require.Equal(t, want, float64(got), "%#04x", b)
		require.Equal(t, math.Signbit(want), math.Signbit(float64(got)), "%#04x: sign", b)
	}
}

// halfTable holds the values of the non-negative finite halves in increasing
// order; index = bit pattern. It is the basis of an F32→F16 reference that
// knows nothing about bits: find the two neighbouring halves, take the nearer,
// on a tie the one with the even pattern.
var halfTable = func() []float64 {
	v := make([]float64, 0x7c00)
	for h := range v {
		v[h] = f16Ref(uint16(h))
	}
	return v
}()

func f32ToF16Ref(f float32) uint16 {
	x := float64(f)
	var sign uint16
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	if math.IsNaN(x) {
		return sign | 0x7e00
	}
	const maxHalf, next = 65504.0, 65536.0 // largest finite half, and the value the next pattern would have
	if x >= maxHalf {
		if next-x <= x-maxHalf { // at or past the midpoint 65520: ties go to the even pattern 0x7c00
			return sign | 0x7c00
		}
		return sign | 0x7bff
	}
	hi := sort.SearchFloat64s(halfTable, x) // first half ≥ x
	if halfTable[hi] == x {
		return sign | uint16(hi)
	}
	lo := hi - 1
	dlo, dhi := x-halfTable[lo], halfTable[hi]-x
	if dlo < dhi || dlo == dhi && lo%2 == 0 {
		return sign | uint16(lo)
	}
	return sign | uint16(hi)
}

// ggmlF32ToF16 is a transcription of ggml's ggml_compute_fp32_to_fp16 (the
// scalar fallback in ggml-impl.h), a second reference that also fixes the
// NaN encoding.
func ggmlF32ToF16(f float32) uint16 {
	scaleToInf := math.Float32frombits(0x77800000)
	scaleToZero := math.Float32frombits(0x08800000)
	base := float32(abs32(f)*scaleToInf) * scaleToZero
	w := math.Float32bits(f)
	shl1W := w + w
	sign := w & 0x80000000
	bias := shl1W & 0xff000000
	if bias < 0x71000000 {
		bias = 0x71000000
	}
	base = math.Float32frombits(bias>>1+0x07800000) + base
	bits := math.Float32bits(base)
	expBits := bits >> 13 & 0x00007c00
	mantissaBits := bits & 0x00000fff
	nonsign := expBits + mantissaBits
	if shl1W > 0xff000000 {
		nonsign = 0x7e00
	}
	return uint16(sign>>16) | uint16(nonsign)
}

func TestF32ToF16Cases(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	cases := []struct {
		name string
		in   float32
		want uint16
	}{
		{"zero", 0, 0x0000},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"one", 1, 0x3c00},
		{"tie below 1+ulp goes to even 1", 1 + p(-11), 0x3c00},
		{"tie above 1+ulp goes to even 1+2ulp", 1 + 3*p(-11), 0x3c02},
		{"just above the tie rounds up", 1 + p(-11) + p(-23), 0x3c01},
		{"largest finite", 65504, 0x7bff},
		{"just below the overflow tie", 65520 - p(-8), 0x7bff},
		{"overflow tie goes to infinity", 65520, 0x7c00},
		{"huge", 1e10, 0x7c00},
		{"negative huge", -1e10, 0xfc00},
		{"infinity", float32(math.Inf(1)), 0x7c00},
		{"negative infinity", float32(math.Inf(-1)), 0xfc00},
		{"smallest normal", p(-14), 0x0400},
		{"largest subnormal", p(-14) - p(-24), 0x03ff},
		{"tie between largest subnormal and smallest normal", p(-14) - p(-25), 0x0400},
		{"smallest subnormal", p(-24), 0x0001},
		{"half the smallest subnormal ties to zero", p(-25), 0x0000},
		{"just above half the smallest subnormal", p(-25) + p(-40), 0x0001},
		{"1.5 smallest subnormals ties to 2", 3 * p(-25), 0x0002},
		{"2.5 smallest subnormals ties to 2", 5 * p(-25), 0x0002},
		{"negative subnormal", -p(-24), 0x8001},
		{"below every half", p(-30), 0x0000},
		{"float32 subnormal", math.Float32frombits(1), 0x0000},
		{"NaN", float32(math.NaN()), 0x7e00},
		{"negative NaN", math.Float32frombits(0xffc00001), 0xfe00},
		{"signaling NaN", math.Float32frombits(0x7f800001), 0x7e00},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, F32ToF16(c.in), "%g (%#08x)", c.in, math.Float32bits(c.in))
			require.Equal(t, c.want, ggmlF32ToF16(c.in), "ggml transcription disagrees with the table")
		})
	}
}

// TestF32ToF16RoundTrip: every half widens and narrows back to itself.
func TestF32ToF16RoundTrip(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		got := F32ToF16(F16ToF32(h))
		if h&0x7fff > 0x7c00 { // NaN: canonical quiet NaN with the sign
			require.Equal(t, h&0x8000|0x7e00, got, "%#04x", h)
			continue
		}
		require.Equal(t, h, got, "%#04x", h)
	}
}

// TestF32ToF16Boundaries checks every rounding decision there is: for each pair
// of neighbouring halves, the exact midpoint (a tie) and the float32 values one
// ulp either side of it, in both signs, against the table reference.
func TestF32ToF16Boundaries(t *testing.T) {
	check := func(f float32) {
		want := f32ToF16Ref(f)
		if got := F32ToF16(f); got != want {
			t.Fatalf("F32ToF16(%g = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
	for h := 0; h < 0x7c00; h++ {
		lo := halfTable[h]
		hi := 65536.0
		if h+1 < len(halfTable) {
			hi = halfTable[h+1]
		}
		mid := float32((lo + hi) / 2) // exact: a half plus half an ulp needs 12 significant bits
		require.Equal(t, (lo+hi)/2, float64(mid))
		for _, f := range []float32{mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, float32(math.Inf(1))), float32(lo)} {
			check(f)
			check(-f)
		}
	}
}

// TestF32ToF16Sweep compares F32ToF16 with both references on a strided sweep
// of all 2^32 float32 patterns (every 509th, so every exponent and sign, NaNs
// and infinities included).
func TestF32ToF16Sweep(t *testing.T) {
	for u := uint64(0); u < 1<<32; u += 509 {
		f := math.Float32frombits(uint32(u))
		got := F32ToF16(f)
		if want := ggmlF32ToF16(f); got != want {
			t.Fatalf("F32ToF16(%#08x) = %#04x, ggml gives %#04x", u, got, want)
		}
		if want := f32ToF16Ref(f); got != want {
			t.Fatalf("F32ToF16(%#08x) = %#04x, reference gives %#04x", u, got, want)
		}
	}
}

// f32ToBF16Ref rounds to nearest even by comparing distances in float64, the
// bfloat16 above the largest finite one taken as 2^128 so that overflow
// rounds like any other binade; NaNs are quieted as ggml does.
func f32ToBF16Ref(f float32) uint16 {
	u := math.Float32bits(f)
	if math.IsNaN(float64(f)) {
		return uint16(u>>16) | 0x40
	}
	lo := uint16(u >> 16) // truncation: same sign, smaller or equal magnitude
	if u&0xffff == 0 {
		return lo
	}
	hi := lo + 1
	x := math.Abs(float64(f))
	dlo := x - math.Abs(bf16Ref(lo, true))
	dhi := math.Abs(bf16Ref(hi, true)) - x
	if dlo < dhi || dlo == dhi && lo%2 == 0 {
		return lo
	}
	return hi
}

func TestF32ToBF16(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	cases := []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3f80},
		{"tie goes to even", 1 + p(-8), 0x3f80},
		{"tie goes up to even", 1 + 3*p(-8), 0x3f82},
		{"above the tie", 1 + p(-8) + p(-23), 0x3f81},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"largest float32 overflows", math.MaxFloat32, 0x7f80},
		{"infinity", float32(math.Inf(-1)), 0xff80},
		{"subnormal kept", math.Float32frombits(0x00010000), 0x0001},
		{"quiet NaN", math.Float32frombits(0x7fc00000), 0x7fc0},
		{"signaling NaN is quieted, not rounded to infinity", math.Float32frombits(0x7f800001), 0x7fc0},
		{"negative NaN keeps its sign and payload", math.Float32frombits(0xff812345), 0xffc1},
	}
	for _, c := range cases {
		require.Equal(t, c.want, F32ToBF16(c.in), c.name)
	}
	for u := uint64(0); u < 1<<32; u += 257 {
		f := math.Float32frombits(uint32(u))
		if got, want := F32ToBF16(f), f32ToBF16Ref(f); got != want {
			t.Fatalf("F32ToBF16(%#08x) = %#04x, want %#04x", u, got, want)
		}
	}
	for i := 0; i < 1<<16; i++ { // every bfloat16 survives the round trip
		b := uint16(i)
		want := b
		if b&0x7fff > 0x7f80 {
			want |= 0x40
		}
		require.Equal(t, want, F32ToBF16(BF16ToF32(b)), "%#04x", b)
	}
}
