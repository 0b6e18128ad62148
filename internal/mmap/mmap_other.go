//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package mmap

import (
	"io"
	"os"
)

// File reads the whole file where syscall.Mmap is not available here
// (windows, wasm, plan9): correctness over zero-copy loading.
func File(fh *os.File, size int) ([]byte, func() error, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(fh, data); err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}

// Anon allocates n zeroed bytes on the Go heap where anonymous mappings are
// not available here.
func Anon(n int) ([]byte, func() error, error) {
	return make([]byte, n), func() error { return nil }, nil
}

// AnonSparse is Anon.
func AnonSparse(n int) ([]byte, func() error, error) { return Anon(n) }
