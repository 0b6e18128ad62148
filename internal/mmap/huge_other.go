//go:build !linux

package mmap

func adviseHuge([]byte) {}

func populate([]byte) error { return errNoPopulate }

func dontneed([]byte) error { return nil }

// dropZeroes is false: MADV_DONTNEED does not promise zeros outside Linux
// (and Anon is heap memory where there is no mmap), so ZeroAnon clears.
func dropZeroes([]byte) bool { return false }
