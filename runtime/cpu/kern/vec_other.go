//go:build !amd64

package kern

const vecAsm = false

func dotF32AVX2(a, b []float32) float32 { panic("kern: no AVX2 kernels on this architecture") }
func axpyF32AVX2(dst []float32, alpha float32, x []float32) {
	panic("kern: no AVX2 kernels on this architecture")
}
func siluMulAVX2(dst, g, u []float32)        { panic("kern: no AVX2 kernels on this architecture") }
func expSubAVX2(dst, x []float32, m float32) { panic("kern: no AVX2 kernels on this architecture") }
func quantQ8_0AVX2(x []float32, dst, side []byte) {
	panic("kern: no AVX2 kernels on this architecture")
}
func dotF32BytesAVX2(n int, w, a []byte) float32 { panic("kern: no AVX2 kernels on this architecture") }
func dotF16BytesAVX2(n int, w, a []byte) float32 { panic("kern: no AVX2 kernels on this architecture") }
func dotBF16BytesAVX2(n int, w, a []byte) float32 {
	panic("kern: no AVX2 kernels on this architecture")
}
func scoresF32AVX2(q, k []float32, stride int, out []float32) {
	panic("kern: no AVX2 kernels on this architecture")
}
func axpyRowsF32AVX2(acc, w, v []float32, stride int) {
	panic("kern: no AVX2 kernels on this architecture")
}
func quantQ8_KAVX2(x []float32, dst []byte)  { panic("kern: no AVX2 kernels on this architecture") }
func prefetchAVX2(b []byte)                  { panic("kern: no AVX2 kernels on this architecture") }
func f32ToF16AVX2(dst []uint16, x []float32) { panic("kern: no AVX2 kernels on this architecture") }
func sumSquaresAVX2(x []float32) float64     { panic("kern: no AVX2 kernels on this architecture") }
func scaleRowAVX2(o, x []float32, scale float64) {
	panic("kern: no AVX2 kernels on this architecture")
}
func scaleGainRowAVX2(o, x []float32, scale float64, gain []float32) {
	panic("kern: no AVX2 kernels on this architecture")
}
