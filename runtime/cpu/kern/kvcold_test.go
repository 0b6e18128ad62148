package kern

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minerva-llm/minerva/quant"
	"github.com/minerva-llm/minerva/runtime/bench"
)

// BenchmarkGroupedAttentionCold: the grouped kernels of one decode work
// item (eight heads of 64 over 144 f16 rows: TinyLlama at depth 576 in four
// KV parts) on cache rows that the CPU caches do not hold, as in decode,
// where hundreds of MB of weights pass between two reads of a layer's
// cache. The rows are a KV head's in a cache of four heads: side by side
// with the other heads' (512 bytes apart) or dense, one head's rows
// together (128 bytes apart), as the CPU backend keeps them. Reports the
// time per row of scores and weighted values, in each SIMD variant:
//
//	go test ./runtime/cpu/kern -run '^$' -bench GroupedAttentionCold -benchtime 30x
//
// Between passes it reads twice the last-level cache (flushBytes): with a
// fixed 64 MB the rows stayed in the 480 MB L3 of a Xeon VM, and the
// benchmark read 18–25 ns a row where decode's attention, reading the
// cache after 600 MB of weights, took 45 (1 GB: 44–51 ns).
func BenchmarkGroupedAttentionCold(b *testing.B) {
	const G, hd, n, heads, items = 8, 64, 144, 4, 64
	flush := bench.NewProbe(flushBytes(), 1)
	defer flush.Close()
	// items work items of n rows each, every one on rows not read before
	// in the pass: 16 blocks of n positions × 4 heads.
	k := make([]uint16, items*n*hd)
	v := make([]uint16, len(k))
	for i, x := range randRow(len(k), 1, 5) {
		k[i] = quant.F32ToF16(x)
		v[i] = k[i]
	}
	q := randRow(G*hd, 1, 6)
	w := randRow(GroupLanes*n, 0.1, 7)
	acc := make([]float32, G*hd)
	out := make([]float32, GroupLanes*n)
	for _, variant := range []string{"avx2", "avx512"} {
		for _, layout := range []string{"interleaved", "dense"} {
			b.Run(variant+"/"+layout, func(b *testing.B) {
				useVariant(b, variant)
				ks := Current()
				stride := hd
				if layout == "interleaved" {
					stride = heads * hd
				}
				var total time.Duration
				for b.Loop() {
					flush.Sample()
					t0 := time.Now()
					for it := range items {
						h, blk := it%heads, it/heads
						base := (h*items/heads + blk) * n * hd // dense: head h's rows, block blk
						if layout == "interleaved" {
							base = blk*n*stride + h*hd
						}
						ks.ScoresF16G(q, hd, hd, G, k[base:], stride, out)
						ks.AxpyRowsF16G(acc, hd, hd, G, w, v[base:], stride)
					}
					total += time.Since(t0)
				}
				b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*items*n), "ns/row")
			})
		}
	}
}

// flushBytes is how much a cold benchmark reads to evict what it read
// before: twice the last-level cache Linux reports for CPU 0 (the largest
// level in /sys/devices/system/cpu/cpu0/cache), at least 64 MB, 256 MB
// where it reports none.
func flushBytes() int64 {
	var llc int64
	for i := 0; ; i++ {
		b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cache/index" + strconv.Itoa(i) + "/size")
		if err != nil {
			break
		}
		s := strings.TrimSpace(string(b))
		mul := int64(1)
		switch {
		case strings.HasSuffix(s, "K"):
			mul, s = 1<<10, strings.TrimSuffix(s, "K")
		case strings.HasSuffix(s, "M"):
			mul, s = 1<<20, strings.TrimSuffix(s, "M")
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			llc = max(llc, n*mul)
		}
	}
	if llc == 0 {
		return 256 << 20
	}
	return max(64<<20, 2*llc)
}
