package kern

import (
	"fmt"
	"testing"
	"time"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime/bench"
)

// BenchmarkKQuantStream: one thread multiplying a 64 MB k-quant matrix
// (2048 wide, TinyLlama's hidden size) row by row (the row kernels, which
// decode runs for matrices that are not packed) by one Q8_K activation row,
// the decode step, against the streaming read bandwidth that minervac bench
// measures (bench.Bandwidth, one thread, as much memory). The two alternate
// each iteration and each reports its best, so that a busy machine slows
// both alike: of_stream is kernel GB/s over read GB/s. The packed group
// kernels' stream is BenchmarkStreamVsRead's (1 GB, against a read of the
// same bytes: 64 MB fits in some machines' last-level cache), their
// arithmetic BenchmarkGroupHot's.
func BenchmarkKQuantStream(b *testing.B) { benchKQuantMatVec(b, 64<<20, true) }

// BenchmarkKQuantCached is BenchmarkKQuantStream on a 256 KB matrix, which
// stays in the caches: the row kernels' arithmetic speed.
func BenchmarkKQuantCached(b *testing.B) { benchKQuantMatVec(b, 256<<10, false) }

func benchKQuantMatVec(b *testing.B, size int, stream bool) {
	for _, wt := range []ir.DType{ir.Q4_K, ir.Q6_K, ir.Q5_K, ir.Q4_0} {
		for _, v := range []string{"avx2", "avx512"} {
			b.Run(fmt.Sprintf("%s_%s", wt, v), func(b *testing.B) {
				useVariant(b, v)
				const k = 2048
				rb := k / wt.BlockSize() * wt.BlockBytes()
				n := size / rb &^ 7
				data := streamMatrix(b, wt, n, k)
				a := make([]byte, ActBytes(wt, k))
				QuantizeActs(ActType(wt), randRow(k, 1, 2), a)
				dst := make([]float32, n)
				ks := Current()
				best, bw := time.Duration(1<<62), 0.0
				for b.Loop() {
					t0 := time.Now()
					ks.MatVec(wt, k, data, a, dst)
					best = min(best, time.Since(t0))
					if stream {
						bw = max(bw, bench.Bandwidth(int64(size), 1, 1))
					}
				}
				gbs := float64(n*rb) / best.Seconds() / 1e9
				b.ReportMetric(gbs, "GB/s")
				if stream {
					b.ReportMetric(bw, "stream_GB/s")
					b.ReportMetric(gbs/bw, "of_stream")
				}
			})
		}
	}
}
