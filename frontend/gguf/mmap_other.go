//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package gguf

import (
	"io"
	"os"
)

// mapFile reads the whole file: on systems without syscall.Mmap support here
// (windows, wasm, plan9) correctness matters more than zero-copy loading.
func mapFile(fh *os.File, size int) ([]byte, func() error, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(fh, data); err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}
