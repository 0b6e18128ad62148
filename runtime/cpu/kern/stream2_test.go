package kern

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime/bench"
)

// BenchmarkPackedStreamThreads: two threads decoding one activation row
// against a 256 MB packed Q4_0, Q8_0, Q4_K, Q5_K or Q6_K matrix (2048
// wide), taking 128-row work items from a shared counter as the CPU
// backend's pool does, against the streaming read bandwidth of two threads
// (bench.Bandwidth) measured in the same iterations; each reports its best,
// and of_stream is kernel GB/s over read GB/s:
//
//	go test ./runtime/cpu/kern -run '^$' -bench PackedStreamThreads -benchtime 10x
func BenchmarkPackedStreamThreads(b *testing.B) {
	const k, size, item, threads = 2048, 256 << 20, 128, 2
	for _, wt := range []ir.DType{ir.Q4_0, ir.Q8_0, ir.Q4_K, ir.Q5_K, ir.Q6_K} {
		b.Run(fmt.Sprint(wt), func(b *testing.B) {
			useVariant(b, "avx2")
			rb := k / wt.BlockSize() * wt.BlockBytes()
			n := size / rb &^ (item - 1)
			p := Pack(wt, n, k, streamMatrix(b, wt, n, k))
			if p == nil {
				b.Skip("no group kernels")
			}
			defer p.Free()
			a := make([]byte, p.ActBytes())
			p.QuantizeActs(Current(), randRow(k, 1, 2), a)
			dst := make([]float32, n)
			best, bw := time.Duration(1<<62), 0.0
			for b.Loop() {
				var wg sync.WaitGroup
				var next atomic.Int64
				t0 := time.Now()
				for range threads {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							i := int(next.Add(1)-1) * item
							if i >= n {
								return
							}
							p.Dots(i, item, a, len(a), 1, dst[i:], n)
						}
					}()
				}
				wg.Wait()
				best = min(best, time.Since(t0))
				bw = max(bw, bench.Bandwidth(size, threads, 1))
			}
			gbs := float64(n*rb) / best.Seconds() / 1e9
			b.ReportMetric(gbs, "GB/s")
			b.ReportMetric(bw, "stream_GB/s")
			b.ReportMetric(gbs/bw, "of_stream")
		})
	}
}
