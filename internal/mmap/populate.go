package mmap

import (
	"errors"
	"os"
	"sync/atomic"
	"unsafe"
)

var errNoPopulate = errors.New("no MADV_POPULATE_READ here")

// Populate maps the pages under b (part of a File mapping, or any memory)
// before they are first read. Weights that are read once per step in a
// random order — a mixture-of-experts model uses 4 of its 32 experts per
// token — otherwise fault their pages in one step at a time: on gpt-oss-20b
// the expert dots ran at a fifth of their speed for the first ~30 tokens,
// each page's first read a minor fault. With MADV_POPULATE_READ this is one
// call; without it, one read per page.
func Populate(b []byte) {
	if len(b) == 0 {
		return
	}
	ps := uintptr(os.Getpagesize())
	// madvise wants a page-aligned start: advise from the first page
	// boundary in b (the kernel rounds the length up to whole pages) and
	// read the partial page before it.
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	first := int((ps - start%ps) % ps)
	if first < len(b) && populate(b[first:]) == nil {
		populateSink.Add(uint32(b[0]))
		return
	}
	var sink byte
	for i := 0; i < len(b); i += int(ps) {
		sink ^= b[i]
	}
	populateSink.Add(uint32(sink))
}

// populateSink keeps the page-touching reads from being optimised away
// (atomic: programs may be compiled concurrently).
var populateSink atomic.Uint32
