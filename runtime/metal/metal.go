// Package metal is the Metal backend ("metal" target): it runs a plan's
// emitted MSL library (codegen/metal) on an Apple GPU.
//
// Status, stated plainly: NOTHING HERE HAS RUN ON APPLE HARDWARE. The
// kernels (codegen/metal) are type-checked with clang and executed on the
// CPU through a C++ shim against ir/eval on Linux. The device runtime is
// written, and built and vetted for darwin/arm64, but has never executed:
//
//   - plan.go (every platform, unit-tested on Linux): the buffer layout
//     (weights, folded constants, inputs, KV caches of Slots·Context rows,
//     one activation arena at the memory plan's per-token offsets, the
//     split-KV/MoE scratch, T), the binding of every launch for a step of
//     T tokens in slot s, the grouping of weights into page-aligned no-copy
//     regions, the pipeline-cache key (SHA-256 of the source), load-time
//     folding of constants, and chunking of long steps;
//   - objc_darwin.go (the only code that talks to Metal, through purego's
//     objc package, no cgo): MTLCreateSystemDefaultDevice,
//     newLibraryWithSource:options:error: cached per source hash,
//     pipeline states that support indirect command buffers,
//     shared-storage buffers (newBufferWithBytesNoCopy over the weights'
//     pages, a copy where Metal refuses), one command buffer and one compute
//     encoder per step, and the decode step (T = 1) recorded once in an
//     indirect command buffer and replayed for every slot (the caches are
//     bound whole; each row's slot is its cache base);
//   - metal_darwin.go: the runtime.Program over those two.
//
// Off darwin, Compile fails with one line: "metal: only on darwin".
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
