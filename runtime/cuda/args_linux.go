//go:build linux

package cuda

import (
	"fmt"
	"syscall"
	"unsafe"
)

// argBlock is a parameter block (see argLayout) in memory mapped outside the
// Go heap: the driver reads the pointer array and the values it points at
// during cuLaunchKernel (and keeps kernelParams of graph nodes), so neither
// may be Go memory the runtime could move or free.
type argBlock struct {
	l   argLayout
	mem []byte // mmapped, page-aligned
}

func newArgBlock(sizes []int) (*argBlock, error) {
	l, err := planArgs(sizes)
	if err != nil {
		return nil, err
	}
	n := max(l.size, 1)
	page := syscall.Getpagesize()
	n = (n + page - 1) / page * page
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("cuda: mmap of a kernel parameter block: %w", err)
	}
	b := &argBlock{l: l, mem: mem}
	for i, off := range l.off {
		*(*uintptr)(unsafe.Pointer(&mem[i*ptrSize])) = uintptr(unsafe.Pointer(&mem[off]))
	}
	return b, nil
}

// setPtr stores device pointer p as argument i (an 8-byte argument).
func (b *argBlock) setPtr(i int, p uint64) {
	if b.l.sizes[i] != 8 {
		panic(fmt.Sprintf("cuda: argument %d has %d bytes, not a pointer", i, b.l.sizes[i]))
	}
	*(*uint64)(unsafe.Pointer(&b.mem[b.l.off[i]])) = p
}

// setU32 stores v as argument i (a 4-byte argument).
func (b *argBlock) setU32(i int, v uint32) {
	if b.l.sizes[i] != 4 {
		panic(fmt.Sprintf("cuda: argument %d has %d bytes, not 4", i, b.l.sizes[i]))
	}
	*(*uint32)(unsafe.Pointer(&b.mem[b.l.off[i]])) = v
}

// params is the kernelParams argument of cuLaunchKernel: the address of the
// pointer array.
func (b *argBlock) params() uintptr { return uintptr(unsafe.Pointer(&b.mem[0])) }

// free unmaps the block; it must not be used afterwards.
func (b *argBlock) free() error {
	if b.mem == nil {
		return nil
	}
	err := syscall.Munmap(b.mem)
	b.mem = nil
	return err
}
