package mmap

import "syscall"

// madvHugepage is Linux's MADV_HUGEPAGE.
const madvHugepage = 14

// adviseHuge asks for transparent huge pages; a kernel without them
// ignores the advice (the error is of no consequence).
func adviseHuge(b []byte) { _ = syscall.Madvise(b, madvHugepage) }
