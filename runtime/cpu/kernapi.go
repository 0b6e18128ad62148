package cpu

import (
	"sync"
	"unsafe"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// Private fallback for runtime/cpu/kern until it builds: activations stay
// float32, weight rows are dequantized and dotted in float32.

// kernExact reports whether dots follow ggml's quantized-activation path.
const kernExact = false

func actType(w ir.DType) ir.DType { return ir.F32 }

func actBytes(w ir.DType, n int) int { return 4 * n }

func quantizeActs(t ir.DType, x []float32, dst []byte) {
	copy(unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(dst))), len(x)), x)
}

func kernSupported(wt ir.DType) bool { return wt == ir.F32 || quant.Supported(wt) }

var rowScratch = sync.Pool{New: func() any { s := make([]float32, 0, 1024); return &s }}

func dot(wt ir.DType, n int, w []byte, a []byte) float32 {
	x := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(a))), n)
	if wt == ir.F32 {
		return dotF32(unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(w))), n), x)
	}
	sp := rowScratch.Get().(*[]float32)
	if cap(*sp) < n {
		*sp = make([]float32, n)
	}
	r := (*sp)[:n]
	_ = quant.Dequantize(wt, w, r)
	s := dotF32(r, x)
	rowScratch.Put(sp)
	return s
}

// ExactQuantizedDots reports whether quantized matmuls quantize the
// activations as ggml does (the kern package), so results match llama.cpp
// to 2e-2 rather than 5e-2.
const ExactQuantizedDots = kernExact
