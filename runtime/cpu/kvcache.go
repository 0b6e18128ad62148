package cpu

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/minerva-llm/minerva/internal/mmap"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime"
)

// kvArena is the one mapping that holds a program's f32 and f16 KV caches
// (states), slot by slot: slot s's part of every such state lies in
// [s·slotBytes, (s+1)·slotBytes), the states one after another, so that a
// slot is one range of memory that a reset gives back at once.
//
// Where a slot's part is at least a huge page, slotBytes is a whole number
// of huge pages from a huge-page boundary and the mapping asks for huge
// pages (mmap.Anon). Attention reads a layer's cache in 4 KB pages as a TLB
// miss each after the hundreds of MB of weights a decode step streams
// between two reads of it, and under a hypervisor each such miss is a
// nested page walk. TinyLlama Q4_0 at depth 512 (minervac bench, per-step
// timers over the attention ops, three alternating runs of each): its
// attention took 1.48–1.55 ms a step from huge pages against 2.10–2.54
// from 4 KB pages, an Intel Xeon VM. The cost: a slot's whole cache is
// resident from its first step (its heads' rows lie ctx rows apart, so the
// first row touches every huge page of it), as llama.cpp's whole cache is
// from the start; 4 KB pages had counted only the rows written. A reset
// releases whole huge pages (mmap.ZeroAnon), so they come back as huge
// pages. Smaller slots (test models, short contexts) keep 4 KB pages
// (mmap.AnonSparse), which a huge page shared by several slots would
// split at each reset.
//
// q8_0 caches keep a sparse mapping of their own (state.slotStride is then
// ctx·Width): their offsets are block counts (q8Bytes), which a slot part
// of whole huge pages does not hold in general.
type kvArena struct {
	mem       []byte // slots·slotBytes
	slotBytes int
}

// allocStates makes the program's states for slots of ctx rows: p.states
// in the order of infos, the f32 and f16 ones in p.kv.
func (p *program) allocStates(infos []runtime.StateInfo, ctx, slots int) error {
	rows := slots * ctx
	if rows/ctx != slots {
		return fmt.Errorf("KV cache of %d slots × %d rows overflows", slots, ctx)
	}
	part := make([]int, len(infos)) // a slot's bytes of each arena state
	raw := 0
	for i, info := range infos {
		sz := rows * info.Width
		if info.Width <= 0 || sz/info.Width != rows || sz > 1<<40 {
			return fmt.Errorf("state %q: %d slots × %d rows × %d overflow", info.Name, slots, ctx, info.Width)
		}
		if info.DType != ir.Q8_0 {
			part[i] = (ctx*info.Width*stateElemBytes(info.DType) + 63) &^ 63
			raw += part[i]
		}
	}
	if raw > 0 {
		huge := raw >= hugePage
		align := os.Getpagesize()
		if huge {
			align = hugePage
		}
		slotBytes := (raw + align - 1) / align * align
		if slotBytes > (1<<41)/slots {
			return fmt.Errorf("KV cache of %d slots × %d bytes is too large", slots, slotBytes)
		}
		var b []byte
		var mem *offHeap
		var err error
		if huge {
			b, mem, err = hugeBytes(slots * slotBytes)
		} else { // AnonSparse maps whole pages from a page boundary
			b, mem, err = offHeapSlice[byte](slots*slotBytes, true)
		}
		if err != nil {
			return fmt.Errorf("KV cache: %w", err)
		}
		p.mem.add(mem)
		p.kv = &kvArena{mem: b, slotBytes: slotBytes}
	}
	off := 0
	for i, info := range infos {
		st := &state{info: info, ctx: ctx, hw: info.Width}
		if info.DType == ir.Q8_0 {
			var mem *offHeap
			var err error
			st.q8, mem, err = offHeapSlice[byte](rows*info.Width/q8Block*q8BlockBytes, true)
			if err != nil {
				return fmt.Errorf("state %q: %w", info.Name, err)
			}
			p.mem.add(mem)
			st.slotStride = ctx * info.Width
		} else {
			// From the state's part in slot 0 to the end of its part in
			// the last slot; slot s's part starts s·slotStride elements in.
			eb := stateElemBytes(info.DType)
			b := p.kv.mem[off : (slots-1)*p.kv.slotBytes+off+ctx*info.Width*eb]
			n := len(b) / eb
			if info.DType == ir.F16 {
				st.f16 = unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), n)
			} else {
				st.f32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), n)
			}
			st.slotStride = p.kv.slotBytes / eb
			off += part[i]
		}
		p.states = append(p.states, st)
	}
	return nil
}

// stateElemBytes is the bytes of one element of an f16 or f32 state; every
// type but F16 and Q8_0 is kept in f32.
func stateElemBytes(dt ir.DType) int {
	if dt == ir.F16 {
		return 2
	}
	return 4
}

// resetSlot gives slot's cache pages back to the system (they read as
// zeros again) rather than writing zeros over them: a long context's cache
// leaves the resident set at once.
func (p *program) resetSlot(slot int) {
	if p.kv != nil {
		sb := p.kv.slotBytes
		mmap.ZeroAnon(p.kv.mem[slot*sb : (slot+1)*sb])
	}
	for _, st := range p.states {
		if st.q8 != nil {
			lo := slot * st.slotStride
			hi := lo + st.ctx*st.info.Width
			mmap.ZeroAnon(st.q8[lo/q8Block*q8BlockBytes : hi/q8Block*q8BlockBytes])
		}
	}
}

// stateMemory is the memory that holds the states, each range once: the
// arena and the q8_0 caches' mappings.
func (p *program) stateMemory() [][]byte {
	var m [][]byte
	if p.kv != nil {
		m = append(m, p.kv.mem)
	}
	for _, st := range p.states {
		if st.q8 != nil {
			m = append(m, st.q8)
		}
	}
	return m
}
