// Package cuda is the CUDA backend ("cuda" target): it is to run a plan's
// emitted CUDA C library (codegen/cuda) on an NVIDIA GPU from a
// CGO_ENABLED=0 binary, talking to libcuda.so.1 and libnvrtc through purego.
//
// It has run on an NVIDIA H200 (driver 580, NVRTC 13): the golden cases and
// the kernel tests pass there (device_test.go here and in codegen/cuda, run
// by .ci/device-check.sh on a lent GPU machine; they skip without a
// driver). In CI it runs end to end on the CPU against an emulated driver
// (testdata/emudriver: the same C entry points, kernels built as C++ over
// codegen/cuda/testdata/cudaemu.h), which checks the calls, their order,
// the parameter blocks, stream capture and graph replay, and the bounds of
// every pointer handed to a kernel.
//
//   - loader_linux.go: dlopens libcuda.so.1 and libnvrtc (libnvrtc.so,
//     libnvrtc.so.13, .so.12, …; $MINERVA_CUDA_LIB and $MINERVA_NVRTC_LIB
//     name the files instead) and wraps the entry points, called through
//     purego.SyscallN. A missing library is one error line naming every
//     file tried and the environment variable that points at it;
//   - program_linux.go: the runtime.Program: one device allocation for the
//     weights (uploaded once through two pinned staging buffers), one arena
//     for inputs, KV caches, activations and scratch, a parameter block per
//     launch outside the Go heap, steps on one stream (batched steps: rows
//     of several slots, each at its own cache base), and the decode step
//     captured once as a CUDA graph, for every slot, and replayed;
//   - plan.go, runtime/internal/devplan: the buffer layout and bindings;
//   - cache.go: the on-disk module cache, keyed by the SHA-256 of the
//     source, the compute capability and the driver version;
//   - errors.go: CUresult and nvrtcResult codes → names and messages;
//   - args.go, args_linux.go: the kernel-parameter blocks;
//   - launch_linux.go: RunLaunches, one library's launches over caller
//     buffers (the device kernel tests).
//
// Off linux, Compile fails with "cuda: only on linux".
package cuda

import (
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/runtime"
)

// Name is the backend's registry key and the plan target it runs.
const Name = "cuda"

type backend struct{}

func init() { runtime.RegisterBackend(backend{}) }

func (backend) Name() string { return Name }

// Compile prepares g on the GPU; see the package comment for what exists.
func (backend) Compile(g *ir.Graph, w eval.Weights, cfg runtime.ProgramConfig) (runtime.Program, error) {
	return compile(g, w, cfg)
}
