//go:build !amd64

package kern

func scoresF16AVX2(q []float32, k []uint16, stride int, out []float32) {
	panic("kern: no AVX2 kernels on this architecture")
}
func axpyRowsF16AVX2(acc, w []float32, v []uint16, stride int) {
	panic("kern: no AVX2 kernels on this architecture")
}
func scoresQ8AVX2(q []float32, k []byte, stride int, out []float32) {
	panic("kern: no AVX2 kernels on this architecture")
}
func axpyRowsQ8AVX2(acc, w []float32, v []byte, stride int) {
	panic("kern: no AVX2 kernels on this architecture")
}
