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
	cfg int    // offset of the CUlaunchConfig and its one CUlaunchAttribute (launchConfig)
}

// The CUlaunchConfig and CUlaunchAttribute layouts of cuda.h (CUDA 12.0):
// seven unsigned ints (grid, block, sharedMemBytes), the stream at 32, the
// attribute array at 40 and its length at 48, 56 bytes in all; an
// attribute is its id, padded to 8, then a 64-byte value union.
const (
	launchConfigBytes    = 56
	launchAttributeBytes = 72
	// attrProgrammaticStreamSerialization is
	// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION; its value is
	// the int programmaticStreamSerializationAllowed.
	attrProgrammaticStreamSerialization = 6
)

func newArgBlock(sizes []int) (*argBlock, error) {
	l, err := planArgs(sizes)
	if err != nil {
		return nil, err
	}
	cfg := (l.size + 7) / 8 * 8
	n := cfg + launchConfigBytes + launchAttributeBytes
	page := syscall.Getpagesize()
	n = (n + page - 1) / page * page
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("cuda: mmap of a kernel parameter block: %w", err)
	}
	b := &argBlock{l: l, mem: mem, cfg: cfg}
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

// launchConfig fills the block's CUlaunchConfig for a launch of grid ×
// block on stream with programmatic stream serialization allowed, and
// returns its address (cuLaunchKernelEx's config argument). Like the
// parameters, it lies outside the Go heap.
func (b *argBlock) launchConfig(grid, block [3]uint32, sharedBytes uint32, stream uintptr) uintptr {
	c := b.mem[b.cfg : b.cfg+launchConfigBytes+launchAttributeBytes]
	clear(c)
	for i, v := range [...]uint32{grid[0], grid[1], grid[2], block[0], block[1], block[2], sharedBytes} {
		*(*uint32)(unsafe.Pointer(&c[4*i])) = v
	}
	attr := &c[launchConfigBytes]
	*(*uintptr)(unsafe.Pointer(&c[32])) = stream
	*(*uintptr)(unsafe.Pointer(&c[40])) = uintptr(unsafe.Pointer(attr))
	*(*uint32)(unsafe.Pointer(&c[48])) = 1
	*(*uint32)(unsafe.Pointer(attr)) = attrProgrammaticStreamSerialization
	*(*int32)(unsafe.Pointer(&c[launchConfigBytes+8])) = 1
	return uintptr(unsafe.Pointer(&c[0]))
}

// free unmaps the block; it must not be used afterwards.
func (b *argBlock) free() error {
	if b.mem == nil {
		return nil
	}
	err := syscall.Munmap(b.mem)
	b.mem = nil
	return err
}
