package cpu

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/minerva-llm/minerva/internal/mmap"
	"github.com/minerva-llm/minerva/ir"
)

// offHeap is a buffer in an anonymous mapping outside the Go heap: the KV
// cache, the step's activation arena and folded weight copies. On the heap
// they would raise the collector's goal with them (it lets the heap grow
// to twice what is live), so that the garbage of the load — concatenated
// q/k/v and gate/up copies, freed once packed — stayed resident beside a
// long prompt's cache (with the other causes issue 23 found, TinyLlama's
// peak RSS at a 2K prompt was 1.19–1.20× the 16-token one; 1.11–1.12×
// after). A mapping's pages count only once written, and release returns
// them at once.
type offHeap struct {
	once  sync.Once
	unmap func() error
}

// release unmaps the buffer; a second call does nothing.
func (o *offHeap) release() {
	if o == nil {
		return
	}
	o.once.Do(func() { _ = o.unmap() })
}

// offHeapSlice returns n zeroed elements of T outside the Go heap (on the
// heap where anonymous mappings are not available) and its release;
// sparse for a buffer written a part at a time (mmap.AnonSparse).
func offHeapSlice[T any](n int, sparse bool) ([]T, *offHeap, error) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if n <= 0 {
		return nil, nil, nil
	}
	anon := mmap.Anon
	if sparse {
		anon = mmap.AnonSparse
	}
	b, unmap, err := anon(n * size)
	if err != nil {
		return nil, nil, err
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n), &offHeap{unmap: unmap}, nil
}

// offHeapSet is a program's off-heap buffers. It is its own object so that
// a cleanup attached to the program can release them when a program is
// dropped without Close (the cleanup must not reach the program).
type offHeapSet struct {
	mu    sync.Mutex
	bufs  []*offHeap
	arena *offHeap // replaced as the arena grows
}

func (s *offHeapSet) add(o *offHeap) {
	s.mu.Lock()
	s.bufs = append(s.bufs, o)
	s.mu.Unlock()
}

// setArena records the arena's new mapping and releases the old one.
func (s *offHeapSet) setArena(o *offHeap) {
	s.mu.Lock()
	old := s.arena
	s.arena = o
	s.mu.Unlock()
	old.release()
}

// releaseAll unmaps every buffer; nothing may read them after.
func (s *offHeapSet) releaseAll() {
	s.mu.Lock()
	bufs, arena := s.bufs, s.arena
	s.bufs, s.arena = nil, nil
	s.mu.Unlock()
	for _, o := range bufs {
		o.release()
	}
	arena.release()
}

// asBytes views s's elements as bytes.
func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

// hugeBytes returns n zeroed bytes outside the Go heap from a huge-page
// boundary (offHeapSlice with the huge-page advice; the mapping has a
// huge page more, to align it), so that every whole huge page of them can
// be one. Memory read once a decode step after the step's hundreds of MB
// of weights finds its 4 KB pages' translations gone: on an Intel Xeon VM
// (a throwaway Go program, medians of 60 reads with 600 MB streamed
// between two) a cold 1152-byte row of a 35 MB table took 130–150 µs to
// read from 4 KB pages, file-mapped, anonymous or Go heap alike, and 1.6 µs
// from a copy on huge pages.
func hugeBytes(n int) ([]byte, *offHeap, error) {
	b, mem, err := offHeapSlice[byte](n+hugePage, false)
	if err != nil || b == nil {
		return nil, mem, err
	}
	skip := (hugePage - int(uintptr(unsafe.Pointer(unsafe.SliceData(b))))%hugePage) % hugePage
	return b[skip : skip+n], mem, nil
}

// hugeTable moves an embedding table's bytes onto huge pages (hugeBytes)
// and gives the originals back when a file maps them (mmap.ReleaseMapped).
// A decode step reads the table's row of its token, a row no step has
// read in a while: from the model file's 4 KB pages (mapped and populated)
// it took 105–129 µs a step to dequantize against 3.8 µs from a copy
// (medians of 90–150 TinyLlama Q4_0 decode steps, an Intel Xeon VM).
// The table is then resident whole, as in llama.cpp, which maps its model
// file populated.
func (p *program) hugeTable(c *cval) error {
	if c.mem != nil || len(c.data) == 0 {
		return nil // a copy already (a fold's), or nothing to move
	}
	b, mem, err := hugeBytes(len(c.data))
	if err != nil {
		return fmt.Errorf("embedding table of %d bytes: %w", len(c.data), err)
	}
	p.mem.add(mem)
	copy(b, c.data)
	mmap.ReleaseMapped(c.data)
	if c.f32 != nil && c.dt == ir.F32 {
		c.f32 = f32View(b)
	}
	c.data, c.mem = b, mem
	return nil
}
