package cpu

import (
	"sync/atomic"
	"unsafe"

	"github.com/minerva-llm/minerva/internal/mmap"
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

// StateBytes is the size of a CPU program's state buffers (the KV caches).
func StateBytes(p runtime.Program) int64 {
	var n int64
	for _, st := range p.(*program).states {
		n += int64(4*len(st.f32) + 2*len(st.f16) + len(st.q8))
	}
	return n
}

// StateResident is the resident bytes of a CPU program's state buffers
// (their pages alone, mmap.ResidentPages: a mapping's Rss can include an
// adjacent one the kernel merged it with).
func StateResident(p runtime.Program) (int64, error) {
	var n int64
	for _, st := range p.(*program).states {
		var b []byte
		switch {
		case st.f32 != nil:
			b = asBytes(st.f32)
		case st.f16 != nil:
			b = asBytes(st.f16)
		default:
			b = st.q8
		}
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
// it: slot s's part from s·ctx·width, head h's rows from h·ctx·hw of it.
func CacheRow(p runtime.Program, st, slot, pos, h int) []float32 {
	s := p.(*program).states[st]
	off := slot*s.ctx*s.info.Width + h*s.ctx*s.hw + pos*s.hw
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
