package cuda

import (
	"fmt"

	"github.com/minerva-llm/minerva/codegen/gpu"
	"github.com/minerva-llm/minerva/ir"
)

// The argmax kernel (gpu.Argmax): extern "C" __global__ void Kernel(const
// float* logits, int* out, const u32 T), grid (1, T, 1), blockDim.x =
// Threads.

// argmaxThreads is the block size of the argmax kernel: 1024 threads for a
// vocabulary of at least 8192 (each thread then scans V/1024 values, with
// as many loads in flight), 256 below.
func argmaxThreads(V int64) int {
	if V >= 8192 {
		return 1024
	}
	return 256
}

// argmax emits the argmax kernel of g's logits output, if there is one.
func argmax(e *gpu.Emitter, g *ir.Graph) (*Argmax, error) {
	lg := g.Output("logits")
	if lg == nil {
		return nil, nil
	}
	s := lg.Type.Shape
	if lg.Type.DType != ir.F32 || len(s) != 2 || s[0] != ir.Sym("T") || !s[1].IsConst() || s[1].N <= 0 {
		return nil, fmt.Errorf("logits output must be f32[T, V] for the argmax kernel, got %s", lg.Type)
	}
	V := s[1].N
	if V > 1<<31-1 {
		return nil, fmt.Errorf("vocabulary of %d does not fit the argmax kernel's int result", V)
	}
	threads := argmaxThreads(V)
	p := &gpu.Params{Name: fmt.Sprintf("argmax_%d", V), V: V, Threads: threads, NW: threads / 32}
	name, err := e.Add("argmax", "", p)
	if err != nil {
		return nil, err
	}
	return &Argmax{Value: lg.ID, Kernel: name, Threads: threads}, nil
}
