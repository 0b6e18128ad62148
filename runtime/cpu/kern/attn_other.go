//go:build !amd64

package kern

func scoresQ8AVX2(q []float32, k []byte, stride int, out []float32) {
	panic("kern: no AVX2 kernels on this architecture")
}
func axpyRowsQ8AVX2(acc, w []float32, v []byte, stride int) {
	panic("kern: no AVX2 kernels on this architecture")
}
