package mmap

import (
	"sync"
	"unsafe"
)

// mapped records the live read-only file mappings made by File, as address
// ranges [start, end), so that ReleaseMapped can tell a file-backed slice
// from heap or anonymous memory.
var mapped struct {
	mu     sync.RWMutex
	ranges map[uintptr]uintptr // start → end
}

// register records b as a live file mapping and returns the function that
// forgets it (idempotent).
func register(b []byte) func() {
	if len(b) == 0 {
		return func() {}
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	mapped.mu.Lock()
	if mapped.ranges == nil {
		mapped.ranges = map[uintptr]uintptr{}
	}
	mapped.ranges[start] = start + uintptr(len(b))
	mapped.mu.Unlock()
	var once sync.Once // a second unmap must not forget a new mapping at the same address
	return func() {
		once.Do(func() {
			mapped.mu.Lock()
			delete(mapped.ranges, start)
			mapped.mu.Unlock()
		})
	}
}

// ReleaseMapped is Release of b when b lies entirely inside a live mapping
// made by File, and does nothing otherwise (Go heap, anonymous memory, a
// file that was read rather than mapped, a mapping already unmapped). It
// is the safe form for callers that receive bytes without knowing where
// they live: a backend that repacks weights at load calls it on the
// original bytes it no longer reads, and the model's file pages leave the
// resident set instead of counting beside the repacked copy. It reports
// whether b was released. A mapping is not unmapped while a release in it
// runs.
func ReleaseMapped(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	end := start + uintptr(len(b))
	mapped.mu.RLock()
	defer mapped.mu.RUnlock()
	for s, e := range mapped.ranges {
		if s <= start && end <= e {
			Release(b)
			return true
		}
	}
	return false
}
