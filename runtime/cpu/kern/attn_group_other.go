//go:build !amd64

package kern

// No grouped AVX2 or AVX-512 kernels here: ks.vec() is false, so these are
// never called.
var (
	scoresF16GAVX2     [GroupLanes + 1]func(q []float32, qs, d int, k []uint16, stride int, out []float32)
	axpyRowsF16GAVX2   [GroupLanes + 1]func(acc []float32, as, d int, w []float32, v []uint16, stride int)
	scoresF32GAVX2     [GroupLanes + 1]func(q []float32, qs, d int, k []float32, stride int, out []float32)
	axpyRowsF32GAVX2   [GroupLanes + 1]func(acc []float32, as, d int, w []float32, v []float32, stride int)
	scoresF16GAVX512   [GroupLanes + 1]func(q []float32, qs, d int, k []uint16, stride int, out []float32)
	axpyRowsF16GAVX512 [GroupLanes + 1]func(acc []float32, as, d int, w []float32, v []uint16, stride int)
	scoresF32GAVX512   [GroupLanes + 1]func(q []float32, qs, d int, k []float32, stride int, out []float32)
	axpyRowsF32GAVX512 [GroupLanes + 1]func(acc []float32, as, d int, w []float32, v []float32, stride int)
	axpyRowsQ8GAVX512  [GroupLanes + 1]func(acc []float32, as, d int, w []float32, v []byte, stride int)
)

func scaleMax8AVX2(x []float32, scale float32, mx []float32) {
	panic("kern: no AVX2 kernels on this architecture")
}
func expSubSum8AVX2(dst, x, m, l []float32) { panic("kern: no AVX2 kernels on this architecture") }
