//go:build !linux

package mmap

import "errors"

// Resident is Linux's (/proc/self/smaps) alone.
func Resident([]byte) (int64, error) {
	return 0, errors.New("mmap: Resident needs /proc/self/smaps (Linux)")
}

// ResidentPages is Linux's (/proc/self/pagemap) alone.
func ResidentPages([]byte) (int64, error) {
	return 0, errors.New("mmap: ResidentPages needs /proc/self/pagemap (Linux)")
}
