package mmap

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"
)

// Resident is the resident size in bytes of the whole mapping that holds
// b's first byte, from /proc/self/smaps: for tests and diagnostics that
// check what a mapping keeps in memory.
func Resident(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, fmt.Errorf("mmap: Resident of an empty slice")
	}
	at := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		// A mapping's header: "start-end perms offset dev inode [path]".
		if fs := strings.Fields(line); len(fs) >= 5 && len(fs[1]) == 4 && strings.Contains(fs[0], "-") {
			lo, hi, _ := strings.Cut(fs[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && start <= at && at < end
			continue
		}
		if rest, ok := strings.CutPrefix(line, "Rss:"); ok && in {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("mmap: /proc/self/smaps: %q", line)
			}
			return kb << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("mmap: no mapping holds %#x", at)
}

// ResidentPages is the bytes of the pages b spans that this process has
// in memory, from /proc/self/pagemap's present bits. Unlike Resident it
// counts b's pages alone: the kernel merges adjacent anonymous mappings
// with the same flags into one, whose Rss in /proc/self/smaps then
// includes the neighbours' pages (a KV cache's reset slot once showed 16
// KB resident that lay past its states). Only b's pages are read, 8 bytes
// of pagemap each, in chunks of fixed size.
func ResidentPages(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, fmt.Errorf("mmap: ResidentPages of an empty slice")
	}
	ps := uint64(os.Getpagesize())
	at := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	first, last := at/ps, (at+uint64(len(b))-1)/ps
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var buf [8 * 512]byte
	var n int64
	for p := first; p <= last; {
		k := min(last-p+1, uint64(len(buf)/8))
		if _, err := f.ReadAt(buf[:8*k], int64(8*p)); err != nil {
			return 0, fmt.Errorf("mmap: /proc/self/pagemap: %w", err)
		}
		for i := range k {
			if binary.LittleEndian.Uint64(buf[8*i:])>>63 != 0 { // present
				n += int64(ps)
			}
		}
		p += k
	}
	return n, nil
}
