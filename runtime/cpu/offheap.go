package cpu

import (
	"sync"
	"unsafe"

	"github.com/minerva-llm/minerva/internal/mmap"
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
