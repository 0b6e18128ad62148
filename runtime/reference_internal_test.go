package runtime

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// The reference program keeps each cache in one allocation of
// [Slots·C, W]; a step touches only its slot's rows, and the f16 window the
// interpreter reads holds exactly the slot's rows (zeros past them), as a
// machine of its own would.
func TestReferenceCacheLayout(t *testing.T) {
	for _, dt := range []ir.DType{ir.F32, ir.F16} {
		t.Run(dt.String(), func(t *testing.T) {
			f, err := gguf.Open(shared.Path(t, "models/gguf/stories260K.gguf"))
			require.NoError(t, err)
			defer f.Close()
			m, err := arch.Load(f, arch.Options{CacheType: dt})
			require.NoError(t, err)
			const ctx, slots = 16, 3
			prog, err := referenceBackend{}.Compile(m.Graph, m.Weights, ProgramConfig{Context: ctx, Slots: slots})
			require.NoError(t, err)
			p := prog.(*refProgram)
			require.Len(t, p.states, 10, "5 layers × k, v")

			// snapshot returns every state's storage as float32.
			snapshot := func() [][]float32 {
				var out [][]float32
				for _, st := range p.states {
					if dt == ir.F32 {
						require.Nil(t, st.f16)
						require.Len(t, st.f32, slots*ctx*st.info.Width)
						out = append(out, append([]float32(nil), st.f32...))
						continue
					}
					require.Nil(t, st.f32)
					require.Len(t, st.f16, slots*ctx*st.info.Width)
					row := make([]float32, len(st.f16))
					for i, h := range st.f16 {
						row[i] = quant.F16ToF32(h)
					}
					out = append(out, row)
				}
				return out
			}
			for i, x := range snapshot() {
				require.Equal(t, make([]float32, len(x)), x, "state %d is clear after Compile", i)
			}
			step := func(slot int, tokens []int32, from int) {
				before := snapshot()
				pos := make([]int32, len(tokens))
				for i := range pos {
					pos[i] = int32(from + i)
				}
				_, err := p.Step(slot, tokens, pos)
				require.NoError(t, err)
				after := snapshot()
				for i, st := range p.states {
					w := st.info.Width
					lo, hi := (slot*ctx+from)*w, (slot*ctx+from+len(tokens))*w
					require.Equal(t, before[i][:lo], after[i][:lo], "state %d below the written rows", i)
					require.Equal(t, before[i][hi:], after[i][hi:], "state %d above the written rows", i)
					require.NotEqual(t, before[i][lo:hi], after[i][lo:hi], "state %d: rows %d..%d of slot %d written", i, from, from+len(tokens), slot)
					if dt == ir.F16 {
						// The window is the slot's rows, zero past those used.
						require.Equal(t, after[i][slot*ctx*w:(slot+1)*ctx*w], st.buf.F32, "state %d window", i)
					}
				}
			}
			step(1, []int32{1, 400, 401, 402, 403, 404, 405}, 0)
			step(0, []int32{1, 300}, 0)
			step(1, []int32{406}, 7)
			step(2, []int32{1}, 0)
			step(0, []int32{301}, 2)

			before := snapshot()
			require.NoError(t, p.ResetSlot(1))
			after := snapshot()
			for i, st := range p.states {
				w := st.info.Width
				require.Equal(t, make([]float32, ctx*w), after[i][ctx*w:2*ctx*w])
				require.Equal(t, before[i][:ctx*w], after[i][:ctx*w])
				require.Equal(t, before[i][2*ctx*w:], after[i][2*ctx*w:])
			}
			step(1, []int32{1}, 0)
			require.NoError(t, p.Close())
		})
	}
}
