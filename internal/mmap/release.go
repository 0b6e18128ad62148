package mmap

import (
	"os"
	"unsafe"
)

// Release drops the whole pages inside b, part of a File mapping, from the
// process's resident set. A model whose weights are repacked at load
// (MLX affine, MXFP4 in the Hugging Face layout) reads the mapped bytes
// once; without this their pages would stay resident beside the repacked
// copy for the life of the mapping, twice the model in RSS. The pages stay
// in the page cache, and a later read of b faults them in again from the
// file, so b keeps its contents. Pages that b shares with its neighbours
// (the partial ones at either end) are kept. Never call it on anonymous
// or Go heap memory: those pages would read back as zeros.
func Release(b []byte) {
	if lo, hi := wholePages(b); lo < hi {
		_ = dontneed(b[lo:hi])
	}
}

// wholePages is the range b[lo:hi] of the whole pages inside b (lo ≥ hi
// when there is none).
func wholePages(b []byte) (lo, hi int) {
	if len(b) == 0 {
		return 0, 0
	}
	ps := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	first := (ps - start%ps) % ps
	end := start + uintptr(len(b))
	last := end - end%ps
	if start+first >= last {
		return 0, 0
	}
	return int(first), int(last - start)
}

// ZeroAnon sets b, which must lie inside memory that Anon or AnonSparse
// returned, to zeros. On Linux the whole pages inside b are dropped rather than written
// (MADV_DONTNEED: a private anonymous page then reads back as zeros), so
// that clearing a long context's KV cache costs no time and takes it out
// of the resident set instead of faulting every page in; the partial pages
// at either end, and every byte elsewhere, are cleared.
func ZeroAnon(b []byte) {
	lo, hi := wholePages(b)
	if lo >= hi {
		clear(b)
		return
	}
	clear(b[:lo])
	clear(b[hi:])
	if !dropZeroes(b[lo:hi]) {
		clear(b[lo:hi])
	}
}
