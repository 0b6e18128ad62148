package passes

import "fmt"

// pipeline is the compiler's pass list, in order.
var pipeline = []string{
	"canonicalize",
	"dce",
	"cse",
	"fuse-qkv",       // q, k, v projections + rope + cache writes → qkv_rope
	"fuse-swiglu",    // silu(gate)·up → swiglu with one merged weight
	"fuse-rmsnorm",   // rmsnorm feeding only matmuls → their prologue
	"fuse-residual",  // x + matmul(...) → the matmul's epilogue
	"tile-attention", // attention → flash_attention
	"dce",
	"plan-memory",
}

// constraints are the orderings the pipeline relies on, checked by Pipeline.
var constraints = []struct{ before, after, why string }{
	{"cse", "fuse-qkv", "merging needs shared inputs to be one value"},
	{"fuse-qkv", "fuse-rmsnorm", "the norm then fuses once into the merged projection, not into three matmuls"},
	{"fuse-swiglu", "fuse-rmsnorm", "the same, for the merged gate/up projection"},
	{"fuse-rmsnorm", "fuse-residual", "a residual add must not block the norm from seeing a matmul-only consumer set"},
	{"tile-attention", "plan-memory", "the plan must see the final ops"},
}

// Pipeline returns the passes in order, or an error if a pass is missing or
// an ordering constraint does not hold.
func Pipeline() ([]Pass, error) {
	first := map[string]int{}
	list := make([]Pass, len(pipeline))
	for i, name := range pipeline {
		p, ok := registry[name]
		if !ok {
			return nil, fmt.Errorf("pipeline names unknown pass %q", name)
		}
		list[i] = p
		if _, seen := first[name]; !seen {
			first[name] = i
		}
	}
	for _, c := range constraints {
		b, okb := first[c.before]
		a, oka := first[c.after]
		if !okb || !oka || b > a {
			return nil, fmt.Errorf("pipeline must run %s before %s: %s", c.before, c.after, c.why)
		}
	}
	return list, nil
}
