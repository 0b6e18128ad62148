package cpu

import (
	"fmt"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/minerva-llm/minerva/internal/mmap"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime"
)

// LogitRowsDone is the number of rows p's logits matmul has computed.
func LogitRowsDone(p runtime.Program) int64 { return p.(*program).logitRowsDone }

// ActivationMemory reports p's step arena (float32s per token) and how many
// of its values hold buffers of their own, outside the arena.
func ActivationMemory(p runtime.Program) (arenaPerToken int64, own int) {
	pr := p.(*program)
	for _, b := range pr.bufs {
		if b != nil {
			own++
		}
	}
	return pr.arenaPT, own
}

// SetOneHeadAttention forces (or not) attention's one-head work items
// instead of the grouped ones, returning a function restoring the setting.
func SetOneHeadAttention(on bool) (restore func()) {
	old := oneHeadAttention
	oneHeadAttention = on
	return func() { oneHeadAttention = old }
}

// SetTokenRuns turns attention's runs of a prompt's tokens
// (attentionTokenRuns) on or off, returning a function restoring the
// setting: off, grouped-query heads take the grouped work items.
func SetTokenRuns(on bool) (restore func()) {
	old := tokenRunsAttention
	tokenRunsAttention = on
	return func() { tokenRunsAttention = old }
}

// SetActsReuse turns the matmuls' reuse of the previous one's activation
// rows on or off, and CountActsReuse counts the reuses from now on.
func SetActsReuse(on bool) (restore func()) {
	old := actsReuse
	actsReuse = on
	return func() { actsReuse = old }
}

func CountActsReuse() (n *atomic.Int64, restore func()) {
	old := actsReused
	actsReused = new(atomic.Int64)
	return actsReused, func() { actsReused = old }
}

// StateBytes is the size of a CPU program's state buffers (the KV caches):
// every slot's rows, without the padding of the slots' parts.
func StateBytes(p runtime.Program) int64 { return p.(*program).CacheBytes() }

// StateResident is the resident bytes of a CPU program's state buffers
// (their pages alone, mmap.ResidentPages: a mapping's Rss can include an
// adjacent one the kernel merged it with).
func StateResident(p runtime.Program) (int64, error) {
	var n int64
	for _, b := range p.(*program).stateMemory() {
		r, err := mmap.ResidentPages(b)
		if err != nil {
			return 0, err
		}
		n += r
	}
	return n, nil
}

// CacheRow returns head h's f32 cache row at position pos of the slot in
// state st of p (the states in signature order), where state's doc puts
// it: slot s's part from s·slotStride, head h's rows from h·ctx·hw of it.
func CacheRow(p runtime.Program, st, slot, pos, h int) []float32 {
	s := p.(*program).states[st]
	off := slot*s.slotStride + h*s.ctx*s.hw + pos*s.hw
	return s.f32[off : off+s.hw]
}

// Nodes is the number of ops a CPU program runs in a step.
func Nodes(p runtime.Program) int { return len(p.(*program).nodes) }

// PackingArena reports how many of p's weight matrices are packed, how
// many were packed into its packing arena, the bytes the arena has left,
// and whether it starts on a huge page (packarena.go).
func PackingArena(p runtime.Program) (packed, inArena, left int, aligned bool) {
	pr := p.(*program)
	seen := map[*cval]bool{}
	for _, c := range pr.consts {
		if c != nil && c.packed != nil && !seen[c] {
			seen[c] = true
			packed++
		}
	}
	a := pr.packing
	if a == nil {
		return packed, 0, 0, false
	}
	return packed, a.matrices, len(a.free), uintptr(unsafe.Pointer(unsafe.SliceData(a.start)))%hugePage == 0
}

// CheckReadAhead reports the first way in which p's read-ahead plan is
// wrong (making every matmul's decode plan): a node's next is not the first matmul after it (cyclically), or
// a decode matmul's warm set gives a worker more than aheadBytes, a span
// outside the matrix's bytes, or two spans the same bytes.
func CheckReadAhead(p runtime.Program) error {
	pr := p.(*program)
	isMM := func(i int) bool {
		nd := &pr.nodes[i]
		switch nd.v.Op {
		case ir.OpMatMul, ir.OpFusedMatMul, ir.OpSwiGLU, ir.OpQKVRoPE:
			return pr.consts[nd.ix.w] != nil
		}
		return false
	}
	n := len(pr.nodes)
	for i := range pr.nodes {
		want := -1
		for d := 1; d <= n; d++ {
			if isMM((i + d) % n) {
				want = (i + d) % n
				break
			}
		}
		if got := pr.nodes[i].next; got != want {
			return fmt.Errorf("node %d (%s): next %d, want %d", i, pr.nodes[i].v.Op, got, want)
		}
		plan := pr.decodePlan(i)
		if !isMM(i) {
			if plan != nil {
				return fmt.Errorf("node %d (%s) is no matmul and has a decode plan", i, pr.nodes[i].v.Op)
			}
			continue
		}
		if plan == nil {
			return fmt.Errorf("node %d (%s): no decode plan", i, pr.nodes[i].v.Op)
		}
		set := plan.warm
		if (set == nil) != (pr.pool.n == 1) {
			return fmt.Errorf("node %d: warm set %v with %d workers", i, set != nil, pr.pool.n)
		}
		if set == nil {
			continue
		}
		wr := pr.emulated(pr.consts[pr.nodes[i].ix.w].rows(pr.ks))
		whole := wr.data
		if wr.packed != nil && !wr.floatActs {
			whole = wr.packed.RowsBytes(0, wr.packed.Rows())
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(whole)))
		hi := lo + uintptr(len(whole))
		type span struct{ a, b uintptr }
		var all []span
		for w, spans := range *set {
			total := 0
			for _, s := range spans {
				total += len(s)
				if len(s) == 0 {
					continue
				}
				a := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
				if a < lo || a+uintptr(len(s)) > hi {
					return fmt.Errorf("node %d worker %d: a span outside the matrix", i, w)
				}
				for _, o := range all {
					if a < o.b && o.a < a+uintptr(len(s)) {
						return fmt.Errorf("node %d worker %d: a span overlapping another", i, w)
					}
				}
				all = append(all, span{a, a + uintptr(len(s))})
			}
			if total == 0 || total > aheadBytes {
				return fmt.Errorf("node %d worker %d: %d bytes to read ahead", i, w, total)
			}
		}
	}
	return nil
}

// CheckDecodePlans reports how many of p's matmul nodes hold a decode
// plan (node.one) and the first plan that differs from what the node
// works out afresh for one row: its rows, shape, row bytes, encoded row
// key or work items.
func CheckDecodePlans(p runtime.Program) (int, error) {
	pr := p.(*program)
	n := 0
	for i := range pr.nodes {
		nd := &pr.nodes[i]
		one := nd.one
		if one == nil {
			continue
		}
		n++
		c := pr.consts[nd.ix.w]
		N, K, _, err := c.matrix()
		if err != nil {
			return n, err
		}
		wr := pr.emulated(c.rows(pr.ks))
		b, _, _ := pr.items(nd, N, K, 1)
		key := actsKey{x: nd.ix.x, enc: actsEncodingOf(wr), norm: nd.parts.Norm, eps: nd.parts.Eps, gain: nd.ix.gain}
		switch {
		case one.N != N || one.K != K || one.ab != wr.actBytes():
			return n, fmt.Errorf("node %d: shape %d×%d, %d act bytes; want %d×%d, %d", i, one.N, one.K, one.ab, N, K, wr.actBytes())
		case one.wr.dt != wr.dt || one.wr.packed != wr.packed || one.wr.floatActs != wr.floatActs || one.wr.k != wr.k || one.wr.rb != wr.rb:
			return n, fmt.Errorf("node %d: weight rows differ", i)
		case one.key != key:
			return n, fmt.Errorf("node %d: key %+v, want %+v", i, one.key, key)
		case !slices.Equal(one.b, b):
			return n, fmt.Errorf("node %d: items %v, want %v", i, one.b, b)
		}
	}
	return n, nil
}

// KVArena reports a CPU program's KV arena (kvcache.go): the bytes of a
// slot's part, where the arena starts, and slot's range of it; ok is false
// when the program has none.
func KVArena(p runtime.Program, slot int) (slotBytes int, start uintptr, part []byte, ok bool) {
	kv := p.(*program).kv
	if kv == nil {
		return 0, 0, nil, false
	}
	sb := kv.slotBytes
	return sb, uintptr(unsafe.Pointer(unsafe.SliceData(kv.mem))), kv.mem[slot*sb : (slot+1)*sb], true
}
