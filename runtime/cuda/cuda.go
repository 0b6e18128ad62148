// Package cuda is the CUDA backend ("cuda" target): it is to run a plan's
// emitted CUDA C library (codegen/cuda) on an NVIDIA GPU from a
// CGO_ENABLED=0 binary, talking to libcuda.so.1 and libnvrtc through purego.
//
// Status, stated plainly: the backend registers itself but RUNS NOTHING YET.
// What exists:
//
//   - loader_linux.go: dlopens libcuda.so.1 and libnvrtc (libnvrtc.so,
//     libnvrtc.so.13, .so.12, .so.11.2, …; $MINERVA_CUDA_LIB and
//     $MINERVA_NVRTC_LIB name the files instead) and resolves the driver and
//     NVRTC entry points the backend needs, with thin wrappers called through
//     purego.SyscallN. A missing library is one error line naming every file
//     tried and the environment variable that points at it;
//   - errors.go (every platform): CUresult and nvrtcResult codes → names and
//     messages;
//   - cache.go (every platform): the on-disk module cache, keyed by the
//     SHA-256 of the source, the compute capability and the driver version;
//   - args.go, args_linux.go: the kernel-parameter block handed to
//     cuLaunchKernel (an array of pointers to the argument values, both in
//     one mmapped region outside the Go heap, so the garbage collector never
//     moves or frees what the driver reads).
//
// What does not exist: device memory planning, weight upload, the step, the
// CUDA graph of the decode step, and any kernel launch. Compile therefore
// fails: with the loader's error when the libraries are missing (the case on
// machines without an NVIDIA driver), otherwise with ErrNotImplemented.
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
