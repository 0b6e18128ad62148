// Package gpu lowers a fused ir.Graph to one GPU kernel library, written
// once for every C-family GPU language: walking the graph, choosing a
// kernel family by op and dtype, baking shapes into kernel parameters,
// deduplicating kernels, the launch schedule and buffer binding, and MoE
// dispatch. What a language differs in — its prelude, decoders, templates,
// half type, math function names and how a matrix product picks its block
// shape and prefill path — is a Language value (the shape of tinygrad's
// CStyleLanguage and its subclasses): codegen/cuda and codegen/metal each
// hold one and nothing else.
package gpu

import "github.com/minerva-llm/minerva/codegen/sched"

// Library is the emitted source of one graph and how to launch it.
type Library struct {
	Source   string   `json:"source"`
	Kernels  []Kernel `json:"kernels"`  // in source order
	Launches []Launch `json:"launches"` // in execution order
	// Argmax is the greedy-sampling kernel of a language that emits one
	// (CUDA); nil without it or without a logits output.
	Argmax *Argmax `json:"argmax,omitempty"`
}

// Kernel describes one emitted kernel function.
type Kernel struct {
	Name   string `json:"name"`
	Family string `json:"family"`          // embed, matvec, matmul_tiled, swiglu, swiglu_tiled, qkv_rope, rope_kv, attn_split, attn_merge, rmsnorm, softmax, eltwise, topk_softmax, moe_up, moe_down, argmax
	DType  string `json:"dtype,omitempty"` // weight (or KV cache) dtype the kernel decodes
}

// Argmax is the greedy-sampling kernel of a library with a logits output:
// it writes into out[t] the smallest index of the largest value of logits
// row t (NaN never wins; a row of NaNs gives 0), grid (1, T, 1). It is not
// in Launches: the runtime launches it after a step when it needs the
// greedy token alone, and then copies T ints back instead of T·V floats.
type Argmax struct {
	Value   int    `json:"value"` // the logits value
	Kernel  string `json:"kernel"`
	Threads int    `json:"threads"`
}

// The launch schedule's types are codegen/sched's, shared with the
// runtimes.
type (
	GridDim = sched.GridDim
	Arg     = sched.Arg
	Launch  = sched.Launch
)

// KVBaseArg binds the step's cache bases (sched.KVBase): every kernel that
// reads or writes a KV cache takes it after pos, and the cache bound whole.
var KVBaseArg = Arg{Value: sched.KVBase}

// Step returns the launches a step of T tokens runs, in order.
func (lib *Library) Step(T int) []Launch { return sched.Step(lib.Launches, T) }
