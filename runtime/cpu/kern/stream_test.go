package kern

import (
	"fmt"
	"testing"

	"github.com/minerva-llm/minerva/ir"
)

// BenchmarkPackedStream: one thread streaming a 75 MB packed Q4_0 matrix from
// memory (decode: one activation row), in work items of rows rows each, as
// the CPU backend hands them out. Reports weight GB/s.
func BenchmarkPackedStream(b *testing.B) {
	for _, v := range []string{"avx2", "avx512"} {
		b.Run(v, func(b *testing.B) {
			useVariant(b, v)
			benchPackedStream(b)
		})
	}
}

// streamMatrix returns n rows of k weights of type wt: one random row
// repeated, each copy with its own first scale byte.
func streamMatrix(b *testing.B, wt ir.DType, n, k int) []byte {
	rb := k / wt.BlockSize() * wt.BlockBytes()
	one, _ := makeWeights(b, wt, k, 1)
	data := make([]byte, n*rb)
	for i := 0; i < n; i++ {
		copy(data[i*rb:], one)
		data[i*rb] ^= byte(i) // distinct scales
	}
	return data
}

func benchPackedStream(b *testing.B) {
	const n, k = 65536, 2048
	wt := ir.Q4_0
	rb := k / 32 * wt.BlockBytes()
	p := Pack(wt, n, k, streamMatrix(b, wt, n, k))
	if p == nil {
		b.Skip("no group kernels")
	}
	ab := PackedActBytes(k)
	// R = 8: a serving step of eight sequences' decode rows (the weights
	// stream from memory once for all eight).
	for _, R := range []int{1, 8} {
		a := make([]byte, R*ab)
		for r := 0; r < R; r++ {
			QuantizePackedActs(randRow(k, 1, uint64(2+r)), a[r*ab:])
		}
		dst := make([]float32, R*n)
		for _, rows := range []int{32, 128, 512} {
			if R > 1 && rows != 128 {
				continue
			}
			b.Run(fmt.Sprintf("%s/R=%d/items_of_%d", wt, R, rows), func(b *testing.B) {
				for b.Loop() {
					// Items in a scattered order, as two workers taking turns would.
					for it := 0; it < n/rows; it++ {
						j := (it * 7919 % (n / rows)) * rows
						p.Dots(j, rows, a, ab, R, dst[j:], n)
					}
				}
				b.ReportMetric(float64(n*rb)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}
