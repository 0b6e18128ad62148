package cpu_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/cpu"
	"github.com/minerva-llm/minerva/synth"
)

// The read-ahead plan of fused models (decode matmuls of every kind:
// QKV, the attention output with its residual, SwiGLU, down, the logits),
// packed and row-by-row weights, plain and Q8_2-rounded activations, on
// 1 to 3 workers: each node's next is the first matmul after it (the
// step's first after the last), and each matmul's warm set gives every
// worker at most aheadBytes of its own bytes of the matrix
// (cpu.CheckReadAhead); decode steps leave every matmul the plan it
// would work out afresh for one row (cpu.CheckDecodePlans), a prompt step
// none; the logits of a run are those of one worker.
func TestReadAheadPlan(t *testing.T) {
	for _, dt := range []ir.DType{ir.Q4_0, ir.Q4_K, ir.Q6_K, ir.F32} {
		for _, q82 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/q82=%v", dt, q82), func(t *testing.T) {
				m := synth.Default()
				m.Matrix = dt
				m.NEmbd, m.NFF = 256, 768
				m.NHead, m.NHeadKV = 8, 4
				am := synthModel(t, m)
				if q82 {
					if am.Graph.Attrs == nil {
						am.Graph.Attrs = ir.Attrs{}
					}
					am.Graph.Attrs[ir.AttrActRounding] = ir.ActRoundingQ8_2
				}
				fuse(t, am.Graph)
				prompt, more := []int32{1, 2, 3, 4, 5}, []int32{6, 7, 8}
				matmuls := 0 // QKV, output, SwiGLU and down a layer, the logits
				for _, v := range am.Graph.Values {
					switch v.Op {
					case ir.OpMatMul, ir.OpFusedMatMul, ir.OpSwiGLU, ir.OpQKVRoPE:
						matmuls++
					}
				}
				require.Equal(t, 4*m.NLayer+1, matmuls)
				want := run(t, cpu.Backend{Threads: 1}, am.Graph, am.Weights, prompt, more)
				for _, th := range []int{1, 2, 3} {
					p, err := cpu.Backend{Threads: th}.Compile(am.Graph, am.Weights, runtime.ProgramConfig{Context: 64})
					require.NoError(t, err)
					// Decode steps keep each matmul's plan (node.one); a
					// prompt step makes none.
					_, err = p.Step(0, prompt, []int32{0, 1, 2, 3, 4})
					require.NoError(t, err)
					n, err := cpu.CheckDecodePlans(p)
					require.NoError(t, err)
					require.Zero(t, n, "plans after a prompt step")
					for k, tok := range more {
						_, err = p.Step(0, []int32{tok}, []int32{int32(len(prompt) + k)})
						require.NoError(t, err)
					}
					n, err = cpu.CheckDecodePlans(p)
					require.NoError(t, err, "threads %d", th)
					require.Equal(t, matmuls, n, "threads %d: a plan for every matmul", th)
					require.NoError(t, cpu.CheckReadAhead(p), "threads %d", th)
					p.Close()
					require.Equal(t, want, run(t, cpu.Backend{Threads: th}, am.Graph, am.Weights, prompt, more), "threads %d", th)
				}
			})
		}
	}
}
