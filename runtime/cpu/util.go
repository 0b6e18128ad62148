package cpu

import (
	"math"
	"unsafe"
)

// alignedBytes allocates n bytes aligned for float32 (and 8-byte) access.
func alignedBytes(n int) []byte {
	if n == 0 {
		return nil
	}
	u := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(u))), n)
}

// f32View reinterprets little-endian float32 bytes (copying when misaligned).
func f32View(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 != 0 {
		c := alignedBytes(len(b))
		copy(c, b)
		b = c
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

func gelu(x float64) float64 {
	const c = 0.7978845608028654 // sqrt(2/π)
	return 0.5 * x * (1 + math.Tanh(c*(x+0.044715*x*x*x)))
}

func growF32(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n, n+n/4)
	}
	return b[:n]
}
