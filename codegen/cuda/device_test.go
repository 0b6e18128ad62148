//go:build linux

package cuda_test

import (
	"os"
	"testing"

	"github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/codegen/gpu/gputest"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime"
	rtcuda "github.com/minerva-llm/minerva/runtime/cuda"
)

// TestDeviceKernels runs every emulation case (emuCases: each weight dtype's
// matrix-vector kernel, swiglu, qkv_rope, attention, embeddings, the row
// ops, the vector-load and gpt-oss kernels; tiledCases: the tensor-core
// prefill tiles) on the GPU instead of the CPU emulation, with the same
// random inputs and the same tolerances against ir/eval. It needs libcuda
// and NVRTC (runtime/cuda loads them) and a device of compute capability
// 8.0 or newer; without them it skips, as it does in CI.
func TestDeviceKernels(t *testing.T) {
	// minervac's flags would read these variables; the test reads them itself.
	dev, err := rtcuda.DeviceName(runtime.Options{CUDALib: os.Getenv("MINERVA_CUDA_LIB"), NVRTCLib: os.Getenv("MINERVA_NVRTC_LIB")})
	if err != nil {
		t.Skipf("no GPU: %v", err)
	}
	t.Logf("device: %s", dev)
	// Parallel subtests: NVRTC compiles in parallel; RunLaunches runs one
	// case's launches at a time.
	target.Emulate(t, append(emuCases(), tiledCases()...), onDevice)
}

func onDevice(t *testing.T, g *ir.Graph, lib *cuda.Library, bufs map[int][]byte, T int) map[int][]byte {
	t.Helper()
	if err := rtcuda.RunLaunches(lib, bufs, T); err != nil {
		t.Fatal(err)
	}
	byID := gputest.ValuesByID(g)
	for id := range bufs {
		if v := byID[id]; v != nil && v.Op == ir.OpWeight {
			delete(bufs, id)
		}
	}
	return bufs
}
