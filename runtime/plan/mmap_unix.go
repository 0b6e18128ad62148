//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package plan

import (
	"os"
	"syscall"
)

// mapFile maps size bytes of fh read-only: embedded weights are used in
// place, costing page cache rather than heap.
func mapFile(fh *os.File, size int) ([]byte, func() error, error) {
	data, err := syscall.Mmap(int(fh.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, os.NewSyscallError("mmap", err)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
