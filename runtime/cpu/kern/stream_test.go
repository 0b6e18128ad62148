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

func benchPackedStream(b *testing.B) {
	const n, k = 65536, 2048
	wt := ir.Q4_0
	rb := k / 32 * wt.BlockBytes()
	one, _ := makeWeights(b, wt, k, 1)
	data := make([]byte, n*rb)
	for i := 0; i < n; i++ {
		copy(data[i*rb:], one)
		data[i*rb] ^= byte(i) // distinct scales
	}
	p := Pack(wt, n, k, data)
	if p == nil {
		b.Skip("no group kernels")
	}
	a := make([]byte, PackedActBytes(k))
	QuantizePackedActs(randRow(k, 1, 2), a)
	dst := make([]float32, n)
	for _, rows := range []int{32, 128, 512} {
		b.Run(fmt.Sprintf("%s/items_of_%d", wt, rows), func(b *testing.B) {
			for b.Loop() {
				// Items in a scattered order, as two workers taking turns would.
				for it := 0; it < n/rows; it++ {
					j := (it * 7919 % (n / rows)) * rows
					p.Dots(j, rows, a, len(a), 1, dst[j:], n)
				}
			}
			b.ReportMetric(float64(n*rb)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}
