//go:build !amd64

package kern

// No grouped AVX2 kernels here: ks.vec() is false, so these are never called.
var scoresF16GAVX2 [GroupLanes + 1]func(q []float32, qs, d int, k []uint16, stride int, out []float32)
var axpyRowsF16GAVX2 [GroupLanes + 1]func(acc []float32, as, d int, w []float32, v []uint16, stride int)
var scoresF32GAVX2 [GroupLanes + 1]func(q []float32, qs, d int, k []float32, stride int, out []float32)
var axpyRowsF32GAVX2 [GroupLanes + 1]func(acc []float32, as, d int, w []float32, v []float32, stride int)

func scaleMax8AVX2(x []float32, scale float32, mx []float32) {
	panic("kern: no AVX2 kernels on this architecture")
}
func expSubSum8AVX2(dst, x, m, l []float32) { panic("kern: no AVX2 kernels on this architecture") }
