package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bestIndexFull is ggml's best_index_mxfp4 searching all 16 codes.
func bestIndexFull(x, e float32) uint8 {
	best := uint8(0)
	bestErr := abs32(float32(float32(MXFP4Values[0])*e) - x)
	for i := 1; i < 16; i++ {
		if err := abs32(float32(float32(MXFP4Values[i])*e) - x); err < bestErr {
			best, bestErr = uint8(i), err
		}
	}
	return best
}

// TestBestIndexMXFP4Narrowed: the search over one sign's codes picks the
// code the full search does, for random bit patterns (infinities, subnormals)
// and block-like values, at every scale.
func TestBestIndexMXFP4Narrowed(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000000; i++ {
		e := e8m0Half(uint8(r.IntN(256)))
		x := math.Float32frombits(r.Uint32())
		if i%3 == 0 {
			x = float32(r.NormFloat64()) * e * 8
		}
		if math.IsNaN(float64(x)) {
			continue
		}
		if a, b := bestIndexMXFP4(x, e), bestIndexFull(x, e); a != b {
			t.Fatalf("x=%v e=%v: narrow %d full %d", x, e, a, b)
		}
	}
}
