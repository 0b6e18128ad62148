// Package cuda is the CUDA C language of the GPU lowering (codegen/gpu): one
// library (one source, compiled by NVRTC at run time) holding an extern "C"
// __global__ kernel per distinct (op kind, flags, dtype, shape) of the
// graph, with the shapes baked in as constants and the step sizes (T; cache
// positions through the pos buffer) as kernel arguments, plus the launch
// schedule of one step.
//
// What is CUDA's alone lives here: the templates (templates*.go), the
// decoders (dtypes.go), how a matrix-vector kernel reads its weights and
// stages its activations (vecload.go, planXStage), the tensor-core prefill
// (tiled.go) and the greedy argmax kernel (argmax.go). The source is
// self-contained — no cuda_fp16.h or other header: half conversions are
// one-instruction inline PTX and the warp reductions use __shfl_down_sync —
// so NVRTC needs no include path. Nothing here runs a kernel; the tests
// compile every emitted library to PTX with clang's CUDA mode against
// testdata/cudaprelude.h, and run the kernels on the CPU as C++ against
// testdata/cudaemu.h (which defines MINERVA_CUDA_EMU, the prelude's hook for
// C++ half conversions), comparing them with ir/eval.
package cuda

import (
	"fmt"
	"strings"

	"github.com/minerva-llm/minerva/codegen/gpu"
	"github.com/minerva-llm/minerva/codegen/sched"
	"github.com/minerva-llm/minerva/ir"
)

// The library types are codegen/gpu's.
type (
	Library = gpu.Library
	Kernel  = gpu.Kernel
	Argmax  = gpu.Argmax
	GridDim = gpu.GridDim
	Arg     = gpu.Arg
	Launch  = gpu.Launch
)

// halfType is the prelude's name of an IEEE half (Language.F16), a
// constant so that code Language refers to can use it too.
const halfType = "f16"

// Language is CUDA C as codegen/gpu writes it.
var Language = &gpu.Language{
	Name:        "CUDA",
	Package:     "cuda",
	Prelude:     preludeSource,
	F16:         halfType,
	Vec2:        "{%s, %s}",
	Decoders:    decoders,
	Helpers:     helperSource,
	HelperOrder: helperOrder,
	DQTemplate:  dqTemplate,
	Templates:   gpu.Compile(familyTemplates, moeTemplates, attnPrefillTemplates),
	MatVec:      matVec,
	Prefill:     prefill,
	// Sixteen warps per (head, split) for decode: one block per head and
	// split is too few warps to hide the per-row warp_sums and the cache
	// reads' latency. The H100 measured one warp slower than four; on the
	// H200, 7B Q4_0 at depth 512, four warps took 1,025 µs a decode step
	// (32 launches, 262 GB/s of 8 MB of f16 cache per layer).
	AttnDecodeWarps: 16,
}

// Emit lowers g, a graph after the pass pipeline, to one CUDA C library,
// with the argmax kernel of its logits output.
func Emit(g *ir.Graph) (*Library, error) {
	e := gpu.NewEmitter(Language)
	if err := e.Graph(g); err != nil {
		return nil, err
	}
	am, err := argmax(e, g)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	lib := e.Library()
	lib.Argmax = am
	return lib, nil
}

// KernelsWait reports whether every kernel of a library's source calls
// grid_dep_sync(), so that a runtime may launch them with programmatic
// dependent launch: a library stored in a plan by a build before the wait
// existed must be launched the ordinary way, or its kernels would read
// their inputs while the kernel before them still writes them.
func KernelsWait(src string) bool {
	bodies := KernelBodies(src)
	for _, b := range bodies {
		if !strings.Contains(b.Body, "grid_dep_sync();") {
			return false
		}
	}
	return len(bodies) > 0
}

// KernelBody is one kernel of a library's source: its name and the text of
// its body after the parameter list.
type KernelBody struct {
	Name, Body string
}

// KernelBodies splits a library's source into its kernels (see the
// template conventions: extern "C" __global__, the parameter list ending
// in const u32 T).
func KernelBodies(src string) []KernelBody {
	var out []KernelBody
	for _, k := range strings.Split(src, `extern "C" __global__ void `)[1:] {
		if strings.HasPrefix(k, "__launch_bounds__(") {
			_, k, _ = strings.Cut(k, ") ")
		}
		name, _, _ := strings.Cut(k, "(")
		_, body, _ := strings.Cut(k, "const u32 T) {\n")
		out = append(out, KernelBody{name, body})
	}
	return out
}

// Supports reports whether Emit handles op.
func Supports(op ir.Op) bool { return Language.Supports(op) }

// WeightDTypes lists the weight dtypes the emitter can decode, in a fixed order.
func WeightDTypes() []ir.DType { return Language.WeightDTypes() }

// nwarps is the warps per block of the matrix-vector kernels: one output
// feature (or RoPE pair) per warp, four per block.
const nwarps = 4

// mvWarps is the warps per block of a matrix-vector kernel whose
// activation row is staged in shared memory (planXStage).
const mvWarps = 8

// matVec chooses a matrix-vector kernel's weight read path and block
// shape. With the row staged in shared memory, a block of mvWarps rows
// amortises the staging over twice the weight bytes; where that does not
// fit, nwarps. The expert kernels keep nwarps.
func matVec(p *gpu.Params, wdt ir.DType, moe bool) {
	if moe {
		p.NW, p.Threads = nwarps, 32*nwarps
		p.XS = planXStage(p)
		return
	}
	p.Vec = planVecLoad(wdt, p.Unit, p.NU, p.RowBytes)
	if p.Q8 = planQ8(p, wdt); p.Q8.On {
		p.NW, p.Threads = mvWarps, 32*mvWarps
		return
	}
	for _, nw := range []int{mvWarps, nwarps} {
		p.NW, p.Threads = nw, 32*nw
		if p.XS = planXStage(p); p.XS.On {
			break
		}
	}
}

// q8Dots are the weight dtypes whose matrix-vector kernels multiply
// activations rounded to Q8_0 in integers (dq8_* in the prelude): what ggml
// does for them (its vec_dot_type is Q8_0), at a fifth of the float path's
// instructions per weight, which on an H100 kept that path below half the
// memory bandwidth (issue 20's first device run: 0.9–1.3 TB/s of 3.0 in the
// Q4_0 decode kernels). The rounding is a launch of its own (q8_quant) once
// per product and step: rounding in every block of the product (a first
// attempt) cost more than it saved (TinyLlama decode 711 → 532 tok/s).
var q8Dots = map[ir.DType]bool{ir.Q4_0: true, ir.Q8_0: true, ir.Q5_0: true}

// RoundsActivations reports whether steps multiply weights of dtype dt
// with activations rounded to Q8_0: the products of q8Dots
// dtypes do at every step size — the matrix-vector kernels through the
// q8_quant launch, the tiled prefill kernels in their load stage — as the
// reference engines do. A one-token product whose result goes to the
// scratch (Qwen3's q and k head norms) keeps the float path and does not
// round, as its q8_quant launch would write the scratch it writes (planQ8);
// the emulation cases have none with a q8Dots weight at T = 1.
func RoundsActivations(dt ir.DType) bool { return q8Dots[dt] }

// planQ8 has a q8Dots weight's products read their activation rows as Q8_0
// blocks that a q8_quant launch wrote into the step's scratch (gpu.Q8Stage),
// unless the product's own result goes to the scratch.
func planQ8(p *gpu.Params, wdt ir.DType) gpu.Q8Stage {
	if !q8Dots[wdt] || p.K%32 != 0 || p.ScratchOut {
		return gpu.Q8Stage{}
	}
	return q8Layout(p.K, 0)
}

// q8Layout is the layout of K-long rows rounded to Q8_0 blocks in the
// scratch, from off bytes per token of the step on: K values, then the
// blocks' scales and sums, each row padded to 16 bytes.
func q8Layout(K, off int64) gpu.Q8Stage {
	blocks := K / 32
	return gpu.Q8Stage{On: true, Blocks: blocks, RowBytes: (K + 8*blocks + 15) / 16 * 16, Off: off}
}

// launchMatVec appends a matrix-vector launch; one that multiplies 8-bit
// activations (p.Q8) comes after the q8_quant launch that rounds its rows
// into the scratch, over the same rows and steps, and reads them there
// instead of x (its first argument). The gain goes to q8_quant; the kernel
// keeps the parameter, unused, so that its arguments stay the float path's.
func launchMatVec(e *gpu.Emitter, p *gpu.Params, mv Launch) error {
	if !p.Q8.On {
		e.Launch(mv)
		return nil
	}
	xq, err := launchQ8Quant(e, p, p.Q8, mv)
	if err != nil {
		return err
	}
	mv.Args = append([]Arg{xq}, mv.Args[1:]...)
	e.Launch(mv)
	return nil
}

// launchQ8Quant appends the q8_quant launch that rounds the rows x (the
// first argument of mv) of product p — normalised and times the gain where
// p fuses them — to Q8_0 blocks in the scratch, laid out as q8 says, for
// mv's value and steps; it returns the scratch argument the product then
// reads them from.
func launchQ8Quant(e *gpu.Emitter, p *gpu.Params, q8 gpu.Q8Stage, mv Launch) (Arg, error) {
	xq := Arg{Value: sched.Scratch, ScratchPerToken: q8.Off + q8.RowBytes}
	qp := &gpu.Params{K: p.K, Norm: p.Norm, Gain: p.Gain, Eps: p.Eps, Q8: q8, NW: mvWarps, Threads: 32 * mvWarps}
	qp.Name = fmt.Sprintf("q8_quant_%d", p.K)
	if p.Norm {
		qp.Name += "_norm"
	}
	args := []Arg{mv.Args[0]}
	for _, x := range p.Extra {
		if x.Name == "gain" {
			qp.Extra = append(qp.Extra, gpu.Slot{Name: x.Name, Slot: len(args), T: x.T})
			args = append(args, mv.Args[x.Slot])
			qp.Name += "_gain"
			if x.T == halfType {
				qp.Name += "f16"
			}
		}
	}
	if q8.Off > 0 {
		qp.Name += fmt.Sprintf("_off%d", q8.Off)
	}
	args = append(args, xq)
	qp.OutSlot, qp.TSlot = len(args)-1, len(args)
	name, err := e.Add("q8_quant", "", qp)
	if err != nil {
		return Arg{}, err
	}
	e.Launch(Launch{Value: mv.Value, Kernel: name, Threads: qp.Threads, Args: args, MinT: mv.MinT, MaxT: mv.MaxT,
		Grid: [3]GridDim{{N: (q8.Blocks + mvWarps - 1) / mvWarps}, mv.Grid[1], {N: 1}}})
	return xq, nil
}

// planXStage stages the activation row in shared memory when it fits
// beside the weight stage; a longer row keeps reading global memory.
//
// The stage holds K floats and, for quantized weights, one float of
// padding per unit (float weights have one-element units, which the lanes
// already read consecutively). Lane l decodes units l, l+32, … and reads
// element k of each: from global memory (or unpadded shared memory) the 32
// lanes' reads are a unit apart, 32 transactions (or a 32-way bank
// conflict) per read; padded, unit u starts at u·(unit+1) and the lanes hit
// 32 distinct banks. One copy per block also replaces each warp's own pass
// over the row for the RMSNorm sum.
func planXStage(p *gpu.Params) gpu.XStage {
	pad := p.Unit > 1
	floats := p.K
	if pad {
		floats += p.NU
	}
	bytes := 4*floats + 4*int64(p.NW)
	if p.Vec.On {
		bytes += int64(p.NW) * p.Vec.Bytes
	}
	if p.Unit < 1 || p.K%p.Unit != 0 || bytes > staticShared {
		return gpu.XStage{}
	}
	return gpu.XStage{On: true, Pad: pad, Floats: floats}
}

// staticShared is the static shared memory a kernel may declare (CUDA's
// limit without an opt-in attribute).
const staticShared = 48 << 10
