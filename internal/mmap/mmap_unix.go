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
	if n <= 0 {
		return nil, func() error { return nil }, nil
	}
	data, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil, os.NewSyscallError("mmap", err)
	}
	adviseHuge(data)
	return data, func() error { return syscall.Munmap(data) }, nil
}
