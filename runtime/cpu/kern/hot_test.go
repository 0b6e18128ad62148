package kern

import (
	"fmt"
	"testing"

	"github.com/minerva-llm/minerva/ir"
)

// BenchmarkGroupHot: one thread multiplying one packed group (eight rows,
// 2048 wide) by one activation row again and again, the weights in L1/L2:
// each group kernel's compute ceiling in weight GB/s per thread, per
// variant. Set against the read bandwidth one thread must stream
// (BenchmarkPackedStreamPaired's rates over its two threads), it says
// whether decode of a type can be bound by memory on the machine: a kernel
// whose hot rate is not well above its streaming rate cannot hide the
// misses (on a Zen 4 VM, 2026-11-28, two runs: the avx512 Q4_0, Q4_K, Q5_K
// and Q6_K kernels at 28–41 GB/s against 75–78 for Q8_0, while two threads
// must stream 16–25 GB/s each).
//
//	go test ./runtime/cpu/kern -run '^$' -bench GroupHot -benchtime 200000x
func BenchmarkGroupHot(b *testing.B) {
	const k = 2048
	for _, v := range []string{"avx2", "avx512"} {
		for _, wt := range []ir.DType{ir.Q4_0, ir.Q8_0, ir.Q4_K, ir.Q5_K, ir.Q6_K} {
			b.Run(fmt.Sprint(v, "/", wt), func(b *testing.B) {
				useVariant(b, v)
				w := streamMatrix(b, wt, 8, k)
				p := Pack(wt, 8, k, w)
				if p == nil {
					b.Skipf("no group kernels for %s", wt)
				}
				defer p.Free()
				a := make([]byte, p.ActBytes())
				p.QuantizeActs(Current(), randRow(k, 1, 2), a)
				d := make([]float32, 8)
				hotRate(b, len(w), func() { p.Dots(0, 8, a, len(a), 1, d, 8) })
			})
		}
	}
}

// BenchmarkRowHot: the same for the row kernels of the types that are not
// packed (Q2_K, Q3_K), one 4096-wide row in L1, with Q4_K's and Q6_K's row
// kernels beside them (the same Zen 4 VM: Q2_K and Q3_K at 10–14 GB/s, below
// what one thread streams).
//
//	go test ./runtime/cpu/kern -run '^$' -bench RowHot -benchtime 200000x
func BenchmarkRowHot(b *testing.B) {
	const k = 4096
	for _, v := range []string{"avx2", "avx512"} {
		for _, wt := range []ir.DType{ir.Q2_K, ir.Q3_K, ir.Q4_K, ir.Q6_K} {
			b.Run(fmt.Sprint(v, "/", wt), func(b *testing.B) {
				useVariant(b, v)
				w := streamMatrix(b, wt, 1, k)
				a := make([]byte, ActBytes(wt, k))
				QuantizeActs(ActType(wt), randRow(k, 1, 2), a)
				hotRate(b, len(w), func() { Dot(wt, k, w, a) })
			})
		}
	}
}

// hotRate calls f until the benchmark ends and reports the bytes of
// weights one call reads as GB/s.
func hotRate(b *testing.B, bytes int, f func()) {
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
