//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package mmap

import (
	"os"
	"syscall"
)

// File maps size bytes of fh read-only and returns the bytes and the function
// that unmaps them. The mapping outlives fh, which the caller may close.
// The mapping is recorded until it is unmapped, for ReleaseMapped.
func File(fh *os.File, size int) ([]byte, func() error, error) {
	data, err := syscall.Mmap(int(fh.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, os.NewSyscallError("mmap", err)
	}
	forget := register(data)
	return data, func() error {
		// Forget first: a ReleaseMapped in flight holds the registry, so the
		// mapping is gone from it before the pages are.
		forget()
		return syscall.Munmap(data)
	}, nil
}

// Anon returns n zeroed bytes of anonymous memory outside the Go heap, and
// the function that releases them. On Linux the range is advised for
// transparent huge pages: repacked weights (hundreds of MB, written once,
// then streamed every token) fault in 2 MB at a time instead of 4 KB and
// need 512 times fewer TLB entries.
func Anon(n int) ([]byte, func() error, error) {
	return anon(n, true)
}

// AnonSparse is Anon for memory written a part at a time and perhaps never
// whole, a KV cache sized for the full context: without the huge-page
// advice, what counts in the resident set is the 4 KB pages written, not
// a 2 MB page per cache for a short prompt's first row.
func AnonSparse(n int) ([]byte, func() error, error) {
	return anon(n, false)
}

func anon(n int, huge bool) ([]byte, func() error, error) {
	if n <= 0 {
		return nil, func() error { return nil }, nil
	}
	data, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil, os.NewSyscallError("mmap", err)
	}
	if huge {
		adviseHuge(data)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
