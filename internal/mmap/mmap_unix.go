//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package mmap

import (
	"os"
	"syscall"
)

// File maps size bytes of fh read-only and returns the bytes and the function
// that unmaps them. The mapping outlives fh, which the caller may close.
func File(fh *os.File, size int) ([]byte, func() error, error) {
	data, err := syscall.Mmap(int(fh.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, os.NewSyscallError("mmap", err)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
