package mmap

import "syscall"

// madvHugepage is Linux's MADV_HUGEPAGE.
const madvHugepage = 14

// adviseHuge asks for transparent huge pages; a kernel without them
// ignores the advice (the error is of no consequence).
func adviseHuge(b []byte) { _ = syscall.Madvise(b, madvHugepage) }

// madvPopulateRead is Linux's MADV_POPULATE_READ (5.14+).
const madvPopulateRead = 22

// populate maps every page of the page-aligned range b into the process's
// page tables now (reading it into the page cache if needed). Older kernels
// reject the advice; the caller then touches the pages itself.
func populate(b []byte) error { return syscall.Madvise(b, madvPopulateRead) }

// madvDontneed is Linux's MADV_DONTNEED.
const madvDontneed = 4

// dontneed drops the page-aligned range b from the process's page tables.
func dontneed(b []byte) error { return syscall.Madvise(b, madvDontneed) }

// dropZeroes drops the page-aligned range b of an anonymous private
// mapping, whose pages then read back as zeros; false if it could not.
func dropZeroes(b []byte) bool { return dontneed(b) == nil }
