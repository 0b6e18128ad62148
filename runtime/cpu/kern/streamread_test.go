package kern

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/minerva-llm/minerva/ir"
)

// BenchmarkStreamVsRead: one thread (t1) or two (t2, each a contiguous
// half, as decode's two workers share a matmul) multiplying a 1 GB packed matrix (2048
// wide, one activation row: decode) from memory, against a plain read of
// the same packed bytes (sumBytes, the bandwidth probe's loop), the two
// taking turns each iteration so that a shared machine's moving bandwidth
// slows both alike. It reports each one's best GB/s and kernel_of_read, the
// read's total time over the kernel's: how close the kernel's stream comes
// to what the memory gives one core. 1 GB, twice the largest last-level
// cache met (an Intel Xeon VM showed 480 MB), so that neither reads from
// it.
//
//	go test ./runtime/cpu/kern -run '^$' -bench StreamVsRead -benchtime 6x
func BenchmarkStreamVsRead(b *testing.B) {
	for _, v := range []string{"avx2", "avx512"} {
		for _, threads := range []int{1, 2} {
			for _, wt := range []ir.DType{ir.Q4_0, ir.Q8_0, ir.Q4_K, ir.Q5_K, ir.Q6_K, ir.Q3_K, ir.Q2_K} {
				b.Run(fmt.Sprintf("%s/t%d/%s", v, threads, wt), func(b *testing.B) { streamVsRead(b, v, threads, wt) })
			}
		}
	}
}

func streamVsRead(b *testing.B, v string, threads int, wt ir.DType) {
	useVariant(b, v)
	if !PackedSupported(wt) {
		b.Skip("no group kernels")
	}
	const k = 2048
	rb := k / wt.BlockSize() * wt.BlockBytes()
	n := (1 << 30) / rb &^ 15
	p := Pack(wt, n, k, streamMatrix(b, wt, n, k))
	defer p.Free()
	a := make([]byte, p.ActBytes())
	p.QuantizeActs(Current(), randRow(k, 1, 2), a)
	dst := make([]float32, n)
	half := n / threads // whole groups of eight rows
	gb := len(p.groups) / (n / 8)
	// each runs f on every thread's share (rows j0..j0+cnt) at once.
	each := func(f func(j0, cnt int)) {
		var wg sync.WaitGroup
		for t := range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f(t*half, half)
			}()
		}
		wg.Wait()
	}
	var best, total [2]time.Duration // kernel, read
	best[0], best[1] = 1<<62, 1<<62
	for b.Loop() {
		for m := range 2 {
			t0 := time.Now()
			if m == 0 {
				each(func(j0, cnt int) { p.Dots(j0, cnt, a, len(a), 1, dst[j0:], n) })
			} else {
				each(func(j0, cnt int) { readSink.Add(sumBytes(p.groups[j0/8*gb : (j0+cnt)/8*gb])) })
			}
			d := time.Since(t0)
			best[m], total[m] = min(best[m], d), total[m]+d
		}
	}
	bytes := float64(len(p.groups))
	b.ReportMetric(bytes/best[0].Seconds()/1e9, "kernel_GB/s")
	b.ReportMetric(bytes/best[1].Seconds()/1e9, "read_GB/s")
	b.ReportMetric(total[1].Seconds()/total[0].Seconds(), "kernel_of_read")
}
