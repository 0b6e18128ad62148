package cpu

import (
	"fmt"
	"time"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime"
)

// KernelTimes implements runtime.KernelTimer for the CPU (`minervac bench
// --kernel-times`): a step of T tokens (runtime.KernelTimesStep: token 1
// at positions pos0..pos0+T-1, the last row's logits) in slot, run runs+1
// times with the clock read around every op, and per op family the sum
// over its ops of each op's best time (the first run warms up), as the
// CUDA program times its launches. A family is the op, and for the matmul
// ops (matmul, fused_matmul, swiglu, qkv_rope) the weight type too: where
// a decode step's time goes, and at what rate each weight type streams.
// The step writes the slot's KV cache at its positions.
func (p *program) KernelTimes(slot, pos0, T, runs int) ([]runtime.KernelTime, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, runtime.ErrClosed
	}
	tokens, pos, err := runtime.KernelTimesStep(p.cfg, slot, pos0, T, runs)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	p.opTimes = make([]time.Duration, len(p.nodes))
	defer func() { p.opTimes = nil }()
	best := make([]time.Duration, len(p.nodes))
	for r := 0; r <= runs; r++ {
		if _, err := p.slotStep(slot, tokens, pos, []int{T - 1}); err != nil {
			return nil, err
		}
		if r == 0 {
			continue // the warm-up
		}
		for i, d := range p.opTimes {
			if r == 1 || d < best[i] {
				best[i] = d
			}
		}
	}
	return runtime.SumKernelTimes(len(p.nodes),
		func(i int) string { return opFamily(p, &p.nodes[i]) },
		func(i int) float64 { return float64(best[i].Nanoseconds()) / 1e3 }), nil
}

// opFamily names nd's family for KernelTimes.
func opFamily(p *program, nd *node) string {
	switch nd.v.Op {
	case ir.OpMatMul, ir.OpFusedMatMul, ir.OpSwiGLU, ir.OpQKVRoPE:
		if c := p.consts[nd.args[1]]; c != nil {
			return fmt.Sprintf("%s/%s", nd.v.Op, c.dt)
		}
	}
	return fmt.Sprint(nd.v.Op)
}
