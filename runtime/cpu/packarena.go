package cpu

import (
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime/cpu/kern"
)

// packArena is one mapping that every packed weight matrix of a program
// is packed into (kern.Kernels.PackInto), one after another from a 2 MB
// boundary, so that decode streams them from huge pages. A mapping of its
// own per matrix, a few MB each and placed wherever mmap puts it, got huge
// pages for about two thirds of TinyLlama Q4_K's memory (AnonHugePages
// in /proc/PID/smaps_rollup: 396 of 600 MiB anonymous; 570 of 594 with
// the arena). Two threads decoding 6 MB Q4_K and Q5_K matrices read them
// 1.02–1.06× faster from one arena than from a mapping each (kern's
// BenchmarkPackedStreamArena, four runs); TinyLlama's decode efficiency
// moved by less than its run-to-run spread (±2%) in three alternating runs.
type packArena struct {
	start    []byte // the whole arena
	free     []byte // the unused rest, from a 64-byte boundary
	matrices int    // packed into it
}

// hugePage is the size (and alignment) of a huge page on x86-64, and on
// arm64 with 4 KB pages.
const hugePage = 2 << 20

// maxPacking bounds a matrix's elements and the arena's bytes, 1 TiB (a
// 405B-parameter model at 4.5 bits is some 230 GB): the arena is sized
// from the graph's types before any weight is read, so a matrix past it
// (an absurd shape) is left out of the arena and a graph whose matrices
// add up to more gets none; loading the weights then says what is wrong
// with them. Below it the mapping is only reserved: its pages count once
// a matrix is packed into them.
const maxPacking = 1 << 40

// reservePacking makes p.packing large enough for every weight matrix that
// prepare will pack, each rounded up to a cache line; with none, or when
// the mapping cannot be made, each matrix gets a mapping of its own
// (kern.Kernels.Pack). The pages count in the resident set only as the
// matrices are packed into them.
func (p *program) reservePacking(g *ir.Graph, isConst map[*ir.Value]bool) {
	seen := map[*ir.Value]bool{}
	total := 0
	for _, v := range g.Values {
		if isConst[v] || !matmulFamily(v.Op) || len(v.Args) < 2 || seen[v.Args[1]] {
			continue
		}
		w := v.Args[1]
		seen[w] = true
		if len(w.Type.Shape) != 2 || !w.Type.Shape[0].IsConst() || !w.Type.Shape[1].IsConst() {
			continue
		}
		n, k := w.Type.Shape[0].N, w.Type.Shape[1].N
		if n <= 0 || k <= 0 || k > maxPacking || n > maxPacking/k || !p.packs(w.Type.DType, int(n)) {
			continue
		}
		if total += (kern.PackedBytes(w.Type.DType, int(n), int(k)) + 63) &^ 63; total > maxPacking {
			return
		}
	}
	if total == 0 {
		return
	}
	b, mem, err := hugeBytes(total)
	if err != nil {
		return
	}
	p.mem.add(mem)
	p.packing = &packArena{start: b, free: b}
}

// packs reports whether prepare packs an n-row matrix of dt for the group
// kernels: the kernels have them, the rows make whole groups, and the
// reference engine's activation rounding (refround.go) does not send its
// matmuls down the float path, which reads the original rows.
func (p *program) packs(dt ir.DType, n int) bool {
	return p.ks.PackedSupported(dt) && n%8 == 0 && !(p.q82 && q82FloatTypes[dt])
}

// pack packs the n×k matrix data of dt, into the arena while it has room.
func (p *program) pack(dt ir.DType, n, k int, data []byte) *kern.Packed {
	size := kern.PackedBytes(dt, n, k)
	if a := p.packing; a != nil && size > 0 && size <= len(a.free) {
		dst := a.free[:size:size]
		a.free = a.free[min(len(a.free), (size+63)&^63):]
		a.matrices++
		return p.ks.PackInto(dt, n, k, data, dst)
	}
	return p.ks.Pack(dt, n, k, data)
}

// matmulFamily reports whether op reads a weight matrix (its second
// operand) through kern dots: the ops prepare packs weights for.
func matmulFamily(op ir.Op) bool {
	switch op {
	case ir.OpMatMul, ir.OpFusedMatMul, ir.OpSwiGLU, ir.OpQKVRoPE:
		return true
	}
	return false
}
