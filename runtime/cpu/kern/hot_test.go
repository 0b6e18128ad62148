package kern

import (
	"fmt"
	"testing"
	"time"

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
// must stream 16–25 GB/s each; BenchmarkGroupCycles measures the same
// kernels without the machine's noise).
//
//	go test ./runtime/cpu/kern -run '^$' -bench GroupHot -benchtime 200000x
func BenchmarkGroupHot(b *testing.B) {
	eachGroup(b, func(b *testing.B, bytes, _ int, f func()) { hotRate(b, bytes, f) })
}

// BenchmarkGroupCycles is BenchmarkGroupHot in core cycles per super-block
// (eight rows by 256 weights) of the one-row group kernels, the number to
// compare kernel forms by on a shared machine (hotCycles).
//
//	go test ./runtime/cpu/kern -run '^$' -bench GroupCycles -benchtime 2000x
func BenchmarkGroupCycles(b *testing.B) {
	eachGroup(b, func(b *testing.B, _, superblocks int, f func()) { hotCycles(b, superblocks, f) })
}

// eachGroup runs measure, per variant and packed type, on one call of the
// one-row group kernel over one packed group (eight rows, 2048 wide) that
// reads bytes of weights, superblocks of them per row.
func eachGroup(b *testing.B, measure func(b *testing.B, bytes, superblocks int, f func())) {
	const k = 2048
	for _, v := range []string{"avx2", "avx512"} {
		for _, wt := range []ir.DType{ir.Q4_0, ir.Q8_0, ir.Q4_K, ir.Q5_K, ir.Q6_K, ir.Q3_K, ir.Q2_K} {
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
				measure(b, len(w), k/256, func() { p.Dots(0, 8, a, len(a), 1, d, 8) })
			})
		}
	}
}

// BenchmarkRowCycles is BenchmarkRowHot in core cycles per row super-block
// (256 weights) of the row kernels (hotCycles).
//
//	go test ./runtime/cpu/kern -run '^$' -bench RowCycles -benchtime 2000x
func BenchmarkRowCycles(b *testing.B) {
	eachRow(b, func(b *testing.B, _, superblocks int, f func()) { hotCycles(b, superblocks, f) })
}

// eachRow runs measure, per variant and k-quant with a row kernel, on one
// call of the row kernel over one 4096-wide row that reads bytes of
// weights, superblocks of them.
func eachRow(b *testing.B, measure func(b *testing.B, bytes, superblocks int, f func())) {
	const k = 4096
	for _, v := range []string{"avx2", "avx512"} {
		for _, wt := range []ir.DType{ir.Q2_K, ir.Q3_K, ir.Q4_K, ir.Q6_K} {
			b.Run(fmt.Sprint(v, "/", wt), func(b *testing.B) {
				useVariant(b, v)
				w := streamMatrix(b, wt, 1, k)
				a := make([]byte, ActBytes(wt, k))
				QuantizeActs(ActType(wt), randRow(k, 1, 2), a)
				measure(b, len(w), k/256, func() { Dot(wt, k, w, a) })
			})
		}
	}
}

// hotCycles reports f's core cycles per super-block (f covers superblocks
// of them): each iteration times one short burst of calls and one
// dependent add chain (one add a cycle), and the benchmark keeps the
// fastest of each, which a neighbour's burst or a descheduled vCPU does not
// reach; their ratio is the cycles. On the Zen 4 VM repeated runs agree
// within about 2%, where the hot benchmarks' GB/s swing 30%; a run that
// reports a GHz below the machine's clock met a slow stretch longer than
// itself and says nothing.
func hotCycles(b *testing.B, superblocks int, f func()) {
	const calls, adds = 100, 100_000
	burst, chain := time.Duration(1<<62), time.Duration(1<<62)
	for b.Loop() {
		t := time.Now()
		for range calls {
			f()
		}
		burst = min(burst, time.Since(t))
		t = time.Now()
		chainSink += addChain(adds)
		chain = min(chain, time.Since(t))
	}
	ghz := adds / float64(chain.Nanoseconds())
	b.ReportMetric(float64(burst.Nanoseconds())*ghz/calls/float64(superblocks), "cycles/superblock")
	b.ReportMetric(ghz, "GHz")
}

// addChain adds 0..n-1 in one dependent chain: one add a cycle.
//
//go:noinline
func addChain(n int) int {
	s := 0
	for i := range n {
		s += i
	}
	return s
}

var chainSink int

// BenchmarkRowHot: the same for the row kernels of the types that are not
// packed (Q2_K, Q3_K), one 4096-wide row in L1, with Q4_K's and Q6_K's row
// kernels beside them (the same Zen 4 VM: Q2_K and Q3_K at 10–14 GB/s, below
// what one thread streams).
//
//	go test ./runtime/cpu/kern -run '^$' -bench RowHot -benchtime 200000x
func BenchmarkRowHot(b *testing.B) {
	eachRow(b, func(b *testing.B, bytes, _ int, f func()) { hotRate(b, bytes, f) })
}

// hotRate calls f until the benchmark ends and reports the bytes of
// weights one call reads as GB/s.
func hotRate(b *testing.B, bytes int, f func()) {
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
