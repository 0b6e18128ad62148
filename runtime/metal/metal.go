// Package metal is the Metal backend ("metal" target): it runs a plan's
// emitted MSL library (codegen/metal) on an Apple GPU.
//
// Status, stated plainly: only the kernels exist. codegen/metal emits them,
// and Linux CI type-checks every emitted library with clang and executes the
// kernels on the CPU through a C++ shim against ir/eval. The device side
// (MTLCreateSystemDefaultDevice, newLibraryWithSource, shared buffers over
// the mmapped weights, one encoder per step, an indirect command buffer for
// decode, all through purego's objc package) is not written yet, so Compile
// fails with one line on every platform: "metal: only on darwin" elsewhere,
// and on darwin an error saying the runtime is not implemented. Nothing has
// run on Apple hardware.
package metal

import (
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/runtime"
)

// Name is the backend's registry key and the plan target it runs.
const Name = "metal"

type backend struct{}

func init() { runtime.RegisterBackend(backend{}) }

func (backend) Name() string { return Name }

// Compile prepares g on the GPU; see the package comment for what exists.
func (backend) Compile(g *ir.Graph, w eval.Weights, cfg runtime.ProgramConfig) (runtime.Program, error) {
	return compile(g, w, cfg)
}
