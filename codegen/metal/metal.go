// Package metal is the Metal Shading Language of the GPU lowering
// (codegen/gpu): one library (one MSL source) holding a kernel per distinct
// (op kind, flags, dtype, shape) of the graph, with the shapes baked in as
// constants and the step sizes (T; cache positions through the pos buffer)
// as arguments, plus the launch schedule that runs one step.
//
// What is Metal's alone lives here: the templates (templates.go), the
// decoders (dtypes.go) and the simdgroup-matrix prefill. Nothing here runs
// a kernel: runtime/metal does that on Apple hardware, and the tests
// type-check every emitted source with clang against testdata/mslshim.h and
// execute the kernels on the CPU through the same header (one std::thread
// per Metal thread, real barriers) against ir/eval.
package metal

import (
	"github.com/minerva-llm/minerva/codegen/gpu"
	"github.com/minerva-llm/minerva/codegen/internal/kernsrc"
	"github.com/minerva-llm/minerva/ir"
)

// The library types are codegen/gpu's.
type (
	Library = gpu.Library
	Kernel  = gpu.Kernel
	GridDim = gpu.GridDim
	Arg     = gpu.Arg
	Launch  = gpu.Launch
)

// Language is Metal Shading Language as codegen/gpu writes it.
var Language = &gpu.Language{
	Name:        "Metal",
	Package:     "metal",
	Prelude:     preludeSource,
	Features:    map[string]string{"simdgroup_matrix": "#include <metal_simdgroup_matrix>\n"},
	F16:         "half",
	Vec2:        "float2(%s, %s)",
	Math:        map[string]string{"expf": "exp", "tanhf": "tanh", "fminf": "min", "fmaxf": "max"},
	Decoders:    decoders,
	Helpers:     helperSource,
	HelperOrder: helperOrder,
	DQTemplate:  dqTemplate,
	Templates:   gpu.Compile(familyTemplates),
	MatVec:      matVec,
	Prefill:     prefill,
}

// Emit lowers g, a graph after the pass pipeline, to one MSL library.
func Emit(g *ir.Graph) (*Library, error) { return gpu.Emit(Language, g) }

// Supports reports whether Emit handles op.
func Supports(op ir.Op) bool { return Language.Supports(op) }

// WeightDTypes lists the weight dtypes the emitter can decode, in a fixed order.
func WeightDTypes() []ir.DType { return Language.WeightDTypes() }

// nsg is the simdgroups per threadgroup of the matrix-vector kernels: four
// rows per threadgroup keeps 128 threads in flight per group, the size
// llama.cpp's Metal mat-vec kernels use too.
const nsg = 4

func matVec(p *gpu.Params, _ ir.DType, _ bool) { p.NW, p.Threads = nsg, 32*nsg }

// The tiled matrix-matrix kernels (prefill): a threadgroup of nsg
// simdgroups computes a tileN-feature × tileT-token output tile, simdgroup s
// owning features 8s..8s+7 as tileT/8 simdgroup_float8x8 accumulators, over
// K in chunks of tileK (one quantized block per weight row).
const (
	tileN = 8 * nsg
	tileT = 32
	tileK = 32
)

// prefill: a [T, N] product of more than one token runs the tiled
// matrix-matrix kernel instead of mv, which reads each weight tile once per
// tileT tokens rather than once per token. qkv_rope keeps mv.
func prefill(e *gpu.Emitter, family string, p *gpu.Params, wdt ir.DType, rows GridDim, width int64, mv Launch) error {
	tiled := map[string]string{"matvec": "matmul_tiled", "swiglu": "swiglu_tiled"}[family]
	if tiled == "" || !rows.PerToken || rows.N != 1 || tileK%p.Unit != 0 {
		e.Launch(mv)
		return nil
	}
	mv.MaxT = 1
	e.Launch(mv)
	tp := *p
	tp.TileN, tp.TileT, tp.TileK, tp.UPC = tileN, tileT, tileK, tileK/p.Unit
	tp.Name = p.Name + "_mm"
	tname, err := e.Add(tiled, wdt.String(), &tp)
	if err != nil {
		return err
	}
	e.Use("simdgroup_matrix")
	e.Launch(Launch{Value: mv.Value, Kernel: tname, Threads: p.Threads, Args: mv.Args, MinT: 2,
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(width, tileN)}, {N: 1, PerToken: true, Tile: tileT}, {N: 1}}})
	return nil
}
