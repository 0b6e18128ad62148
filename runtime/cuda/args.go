package cuda

import "fmt"

// argLayout places a kernel's parameter block, the kernelParams of
// cuLaunchKernel: an array of n pointers, the i-th pointing at argument i's
// value, followed by the values, each aligned to its own size. The emitted
// kernels (codegen/cuda) take device pointers (8 bytes each) and then the
// step's token count T (a 4-byte unsigned int); launchArgSizes gives that
// list.
type argLayout struct {
	sizes []int // each argument's size in bytes: 4 or 8
	off   []int // each value's offset from the start of the block
	size  int   // the block's bytes
}

// ptrSize is the size of a host pointer and of a CUdeviceptr on the 64-bit
// platforms the loader supports.
const ptrSize = 8

func planArgs(sizes []int) (argLayout, error) {
	l := argLayout{sizes: append([]int(nil), sizes...), off: make([]int, len(sizes))}
	at := len(sizes) * ptrSize
	for i, s := range sizes {
		if s != 4 && s != 8 {
			return argLayout{}, fmt.Errorf("cuda: kernel argument %d has %d bytes; 4 or 8 are supported", i, s)
		}
		at = (at + s - 1) / s * s
		l.off[i] = at
		at += s
	}
	l.size = (at + ptrSize - 1) / ptrSize * ptrSize
	return l, nil
}

// launchArgSizes is the argument list of an emitted kernel with nptr
// pointer arguments: nptr CUdeviceptrs, then T.
func launchArgSizes(nptr int) []int {
	s := make([]int, nptr+1)
	for i := range nptr {
		s[i] = ptrSize
	}
	s[nptr] = 4
	return s
}
