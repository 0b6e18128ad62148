package cpu

import (
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime/cpu/kern"
)

// The matrix-vector kernels come from runtime/cpu/kern: activations are
// quantized to the format ggml pairs with the weight type and every dot is
// computed as ggml does: its AVX2 code where kern has an AVX2 variant and the
// CPU has AVX2, its generic code otherwise (MINERVA_CPU forces either).

func actType(w ir.DType) ir.DType    { return kern.ActType(w) }
func actBytes(w ir.DType, n int) int { return kern.ActBytes(w, n) }
func kernSupported(wt ir.DType) bool { return kern.Supported(wt) }
