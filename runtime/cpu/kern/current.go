package kern

import "github.com/minerva-llm/minerva/ir"

// Wrappers over the process default kernels (Current), for callers that
// hold no Kernels value: tests, tools and code outside a program.

// Dot is Current().Dot.
func Dot(wt ir.DType, n int, w []byte, a []byte) float32 { return Current().Dot(wt, n, w, a) }

// DotRows is Current().DotRows.
func DotRows(wt ir.DType, n int, w, a []byte, stride int, dst []float32) {
	Current().DotRows(wt, n, w, a, stride, dst)
}

// QuantizeActs is Current().QuantizeActs.
func QuantizeActs(t ir.DType, x []float32, dst []byte) { Current().QuantizeActs(t, x, dst) }

// PackedSupported is Current().PackedSupported.
func PackedSupported(wt ir.DType) bool { return Current().PackedSupported(wt) }

// Pack is Current().Pack.
func Pack(wt ir.DType, n, k int, data []byte) *Packed { return Current().Pack(wt, n, k, data) }

// PackInto is Current().PackInto.
func PackInto(wt ir.DType, n, k int, data, dst []byte) *Packed {
	return Current().PackInto(wt, n, k, data, dst)
}

// QuantizePackedActs is Current().QuantizePackedActs.
func QuantizePackedActs(x []float32, dst []byte) { Current().QuantizePackedActs(x, dst) }

// DotF32 is Current().DotF32.
func DotF32(a, b []float32) float32 { return Current().DotF32(a, b) }

// Axpy is Current().Axpy.
func Axpy(dst []float32, alpha float32, x []float32) { Current().Axpy(dst, alpha, x) }

// SiLUMul is Current().SiLUMul.
func SiLUMul(dst, g, u []float32) { Current().SiLUMul(dst, g, u) }

// ExpSub is Current().ExpSub.
func ExpSub(dst, x []float32, m float32) { Current().ExpSub(dst, x, m) }

// Scores is Current().Scores.
func Scores(q, k []float32, stride int, out []float32) { Current().Scores(q, k, stride, out) }

// AxpyRows is Current().AxpyRows.
func AxpyRows(acc, w, v []float32, stride int) { Current().AxpyRows(acc, w, v, stride) }
