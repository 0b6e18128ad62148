package kern

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/minerva-llm/minerva/internal/mmap"
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

// BenchmarkPackedStreamPaired: two threads decoding one activation row
// against TinyLlama-sized packed matrices of each type in turn (MXFP4 too,
// gpt-oss's experts)
// (pairedStreams), each type's rate over Q4_0's in the same iteration as
// <type>_of_q4_0 (Q4_0 decode is known to stream at the read bandwidth).
// Separate runs of BenchmarkPackedStreamThreads vary more between
// themselves than the types do. One sub-benchmark per kernel variant the CPU
// runs (avx2, and avx512 where it has VNNI).
//
//	go test ./runtime/cpu/kern -run '^$' -bench PackedStreamPaired -benchtime 30x
func BenchmarkPackedStreamPaired(b *testing.B) {
	for _, v := range []string{"avx2", "avx512"} {
		b.Run(v, func(b *testing.B) {
			useVariant(b, v)
			var sets []streamSet
			for _, wt := range []ir.DType{ir.Q4_0, ir.Q4_K, ir.Q5_K, ir.Q6_K, ir.Q8_0, ir.MXFP4} {
				sets = append(sets, streamSet{name: wt.String(), wt: wt})
			}
			pairedStreams(b, tinyLlamaShape, sets, func(i int) int { return 0 })
		})
	}
}

// BenchmarkPackedStreamRead: pairedStreams with a plain read of the same
// bytes as the base: each type's decode rate over the rate at which two
// threads merely sum packed Q4_0 matrices' bytes in the same items, in the
// same iteration (<type>_of_read). This, not a type's rate over another
// type's, says whether decode reaches the memory's limit; one sub-benchmark
// per kernel variant the CPU runs.
//
//	go test ./runtime/cpu/kern -run '^$' -bench PackedStreamRead -benchtime 30x
func BenchmarkPackedStreamRead(b *testing.B) {
	pairedReads(b, tinyLlamaShape, ir.Q4_0, ir.Q4_K, ir.Q5_K, ir.Q6_K, ir.Q8_0, ir.Q3_K, ir.Q2_K)
}

// BenchmarkPackedStreamRead7B: BenchmarkPackedStreamRead at a Llama-7B's
// shapes, for the types of its Q4_K_M file: matrices 4096 wide of an
// ffn_gate's bytes (11008 Q4_K rows, 25 MB), 48 a set, so that each set
// streams 1.2 GB and the three 3.7 GB, about what decode of the 7B reads
// in a step (against the TinyLlama shape's 144 MB a set).
//
//	go test ./runtime/cpu/kern -run '^$' -bench 'PackedStreamRead7B/avx512' -benchtime 10x
func BenchmarkPackedStreamRead7B(b *testing.B) {
	pairedReads(b, llama7BShape, ir.Q4_K, ir.Q6_K)
}

// pairedReads runs pairedStreams of matrices of shape sh, a set of each
// type, against a plain read of packed Q4_0 matrices of the same bytes
// (the base), once per kernel variant the CPU runs.
func pairedReads(b *testing.B, sh streamShape, types ...ir.DType) {
	for _, v := range []string{"avx2", "avx512"} {
		b.Run(v, func(b *testing.B) {
			useVariant(b, v)
			sets := []streamSet{{name: "read", wt: ir.Q4_0, read: true}}
			for _, wt := range types {
				sets = append(sets, streamSet{name: wt.String(), wt: wt})
			}
			pairedStreams(b, sh, sets, func(i int) int { return 0 })
		})
	}
}

// readSink keeps sumBytes' results alive.
var readSink atomic.Uint64

// sumBytes reads b (its length a multiple of 64) as the bandwidth probe
// reads its buffer (bench.SumWords).
func sumBytes(b []byte) uint64 {
	return bench.SumWords(unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8))
}

// BenchmarkPackedStreamArena: pairedStreams over Q4_K and Q5_K matrices
// packed each into a mapping of its own (Pack) and the same matrices
// packed one after another into one mapping from a 2 MB boundary
// (PackInto, as the CPU backend packs a program's weights), the arena's
// rate over the own mappings' as <type>/arena_of_<type>/own.
//
//	go test ./runtime/cpu/kern -run '^$' -bench PackedStreamArena -benchtime 30x
func BenchmarkPackedStreamArena(b *testing.B) {
	useVariant(b, "avx2")
	var sets []streamSet
	for _, wt := range []ir.DType{ir.Q4_K, ir.Q5_K} {
		sets = append(sets, streamSet{name: wt.String() + "/own", wt: wt}, streamSet{name: wt.String() + "/arena", wt: wt, arena: true})
	}
	pairedStreams(b, tinyLlamaShape, sets, func(i int) int { return i &^ 1 })
}

// A streamSet is one kind of matrix that pairedStreams decodes: its name,
// type and whether its matrices share one mapping from a 2 MB boundary.
type streamSet struct {
	name  string
	wt    ir.DType
	arena bool
	read  bool // only sum the items' packed bytes: the read rate
}

// A streamShape is the matrices pairedStreams decodes: k wide, each about
// bytes big (whole 16-row pairs of groups), mats distinct ones per set.
type streamShape struct{ k, bytes, mats int }

var (
	tinyLlamaShape = streamShape{k: 2048, bytes: 6 << 20, mats: 24}
	llama7BShape   = streamShape{k: 4096, bytes: 11008 * 4096 / 256 * 144, mats: 48}
)

// pairedStreams: two threads decoding one activation row against packed
// matrices of shape sh (TinyLlama's: 6 MB, 2048 wide, 24 distinct ones per
// set), so that nothing stays in the caches, in items cut as the CPU backend
// cuts a matmul (cpu.splitRows: a quarter of what is left per worker, at
// least 16 rows). The sets take turns matrix by matrix, so that the
// machine's bandwidth, which moves on a scale of milliseconds on a shared
// VM, slows them alike. Each iteration gives every set's GB/s over its
// matrices; it reports their medians, and for each set i with base(i) != i
// the median over the iterations of its rate over set base(i)'s in the
// same iteration, as <name>_of_<base name>.
func pairedStreams(b *testing.B, sh streamShape, sets []streamSet, base func(i int) int) {
	const threads = 2
	k, mats := sh.k, sh.mats
	type matrices struct {
		read   bool
		ps     []*Packed
		a      []byte
		n, rb  int
		bounds []int
	}
	ms := make([]*matrices, len(sets))
	for i, set := range sets {
		wt := set.wt
		rb := k / wt.BlockSize() * wt.BlockBytes()
		m := &matrices{n: sh.bytes / rb &^ 15, rb: rb, read: set.read}
		data := streamMatrix(b, wt, m.n, k)
		pb := PackedBytes(wt, m.n, k)
		var arena []byte
		if set.arena {
			mem, unmap, err := mmap.Anon(mats*pb + 2<<20)
			if err != nil {
				b.Fatal(err)
			}
			defer unmap()
			skip := (2<<20 - int(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))%(2<<20)) % (2 << 20)
			arena = mem[skip:]
		}
		for j := range mats {
			var p *Packed
			if set.arena {
				p = Current().PackInto(wt, m.n, k, data, arena[j*pb:(j+1)*pb])
			} else {
				p = Pack(wt, m.n, k, data)
			}
			if p == nil {
				b.Skipf("no group kernels for %s", wt)
			}
			defer p.Free()
			m.ps = append(m.ps, p)
		}
		m.a = make([]byte, m.ps[0].ActBytes())
		m.ps[0].QuantizeActs(Current(), randRow(k, 1, 2), m.a)
		// Whole pairs of groups (the pair kernels'), as splitRows.
		for at := 0; at < m.n; {
			m.bounds = append(m.bounds, at)
			at = min(m.n, at+max(16, ((m.n-at+2*threads-1)/(2*threads)+15)&^15))
		}
		m.bounds = append(m.bounds, m.n)
		ms[i] = m
	}
	rows := 0
	for _, m := range ms {
		rows = max(rows, m.n)
	}
	dst := make([]float32, rows)
	mul := func(m *matrices, p *Packed) {
		var wg sync.WaitGroup
		var next atomic.Int64
		for range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i+1 >= len(m.bounds) {
						return
					}
					j0, j1 := m.bounds[i], m.bounds[i+1]
					if m.read {
						gb := p.nb * p.gbb
						readSink.Add(sumBytes(p.groups[j0/8*gb : j1/8*gb]))
						continue
					}
					p.Dots(j0, j1-j0, m.a, len(m.a), 1, dst[j0:], m.n)
				}
			}()
		}
		wg.Wait()
	}
	rates := make([][]float64, len(sets))
	for b.Loop() {
		took := make([]time.Duration, len(sets))
		for j := range mats {
			for i, m := range ms {
				t0 := time.Now()
				mul(m, m.ps[j])
				took[i] += time.Since(t0)
			}
		}
		for i, m := range ms {
			rates[i] = append(rates[i], float64(mats*m.n*m.rb)/took[i].Seconds()/1e9)
		}
	}
	for i, set := range sets {
		b.ReportMetric(median(rates[i]), set.name+"_GB/s")
		if o := base(i); o != i {
			of := make([]float64, len(rates[i]))
			for it := range of {
				of[it] = rates[i][it] / rates[o][it]
			}
			b.ReportMetric(median(of), set.name+"_of_"+sets[o].name)
		}
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
