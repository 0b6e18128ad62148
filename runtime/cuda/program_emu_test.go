//go:build linux

package cuda

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	cudagen "github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/internal/golden"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime"
)

// TestProgramMatchesReference runs stories260K through the CUDA program on
// the emulated driver and through the reference interpreter, step by step:
// a 3-token prefill in slot 1 (launches issued one by one), decode steps
// in slots 1 and 0 interleaved (each slot's captured CUDA graph, replayed),
// a ResetSlot and a restart, and greedy steps (argmax on the device). Every
// logits row must agree within 1e-5·max|ref| (the kernels accumulate in
// float32 in another order than the interpreter).
func TestProgramMatchesReference(t *testing.T) {
	programMatchesReference(t, emuDriver(t), "emulat")
}

// programMatchesReference is TestProgramMatchesReference's body on
// whichever driver the environment loads; the program's device name must
// contain device.
func programMatchesReference(t *testing.T, opts runtime.Options, device string) {
	m := fusedModel(t, shared.Path(t, "models/gguf/stories260K.gguf"))
	cfg := runtime.ProgramConfig{Context: 16, Slots: 2, Options: opts}
	p, err := backend{}.Compile(m.Graph, m.Weights, cfg)
	require.NoError(t, err)
	defer p.Close()
	refB, ok := runtime.LookupBackend("reference")
	require.True(t, ok)
	ref, err := refB.Compile(m.Graph, m.Weights, cfg)
	require.NoError(t, err)
	defer ref.Close()
	require.Equal(t, ref.VocabSize(), p.VocabSize())
	require.Equal(t, ref.CacheBytes(), p.CacheBytes())

	const tol = 1e-5
	step := func(slot int, tokens, pos []int32) {
		t.Helper()
		got, err := p.Step(slot, tokens, pos)
		require.NoError(t, err)
		want, err := ref.Step(slot, tokens, pos)
		require.NoError(t, err)
		require.Len(t, got, len(want))
		for i := range want {
			e := golden.RelErr(got[i], want[i])
			require.LessOrEqualf(t, e, tol, "slot %d, pos %d: logits error %.3g", slot, pos[i], e)
		}
	}
	step(1, []int32{1, 403, 407}, []int32{0, 1, 2})
	step(0, []int32{1}, []int32{0})
	for i := int32(0); i < 3; i++ {
		step(1, []int32{261 + i}, []int32{3 + i})
		step(0, []int32{300 + i}, []int32{1 + i})
	}
	require.NoError(t, p.ResetSlot(1))
	require.NoError(t, ref.ResetSlot(1))
	step(1, []int32{1, 50}, []int32{0, 1})
	step(1, []int32{60}, []int32{2})

	// Greedy steps pick the token on the device (the argmax kernel, one
	// prefill and decode steps through their own graph) and must agree
	// with the argmax of the reference's logits, interleaved with logits
	// steps in the same slot.
	gp := p.(runtime.GreedyProgram)
	greedy := func(slot int, tokens, pos []int32) {
		t.Helper()
		got, err := gp.StepGreedy(slot, tokens, pos)
		require.NoError(t, err)
		want, err := ref.Step(slot, tokens, pos)
		require.NoError(t, err)
		require.Equal(t, runtime.Argmax(want[len(want)-1]), got, "slot %d pos %v", slot, pos)
	}
	greedy(0, []int32{70, 71}, []int32{4, 5})
	greedy(0, []int32{72}, []int32{6})
	step(0, []int32{73}, []int32{7})
	greedy(0, []int32{74}, []int32{8})

	// Bad steps fail with the runtime's errors, not a launch.
	_, err = p.Step(2, []int32{1}, []int32{0})
	require.ErrorContains(t, err, "slot 2")
	_, err = p.Step(0, []int32{int32(p.VocabSize())}, []int32{0})
	require.ErrorContains(t, err, "vocabulary")
	_, err = p.Step(0, []int32{1}, []int32{16})
	require.ErrorIs(t, err, runtime.ErrContextFull)

	dp := p.(runtime.DeviceProgram)
	require.Contains(t, dp.Device(), device)
	bw, err := dp.DeviceBandwidth(1<<20, 2)
	require.NoError(t, err)
	require.Greater(t, bw, 0.0)

	// Kernel times: every launch of a step is timed and falls in a family.
	for _, T := range []int{1, 3} {
		times, err := p.(runtime.KernelTimer).KernelTimes(1, 3, T, 2)
		require.NoError(t, err)
		n := 0
		for _, kt := range times {
			require.NotEmpty(t, kt.Family)
			require.GreaterOrEqual(t, kt.Micros, 0.0)
			n += kt.Launches
		}
		require.Equal(t, len(p.(*program).lib.Step(T)), n, "launches timed at T = %d", T)
	}
	_, err = p.(runtime.KernelTimer).KernelTimes(0, 0, 17, 1)
	require.Error(t, err, "more tokens than the context")
	_, err = p.(runtime.KernelTimer).KernelTimes(0, 14, 3, 1)
	require.Error(t, err, "positions past the context")
	_, err = p.(runtime.KernelTimer).KernelTimes(0, -1, 1, 1)
	require.Error(t, err, "a negative position")

	require.NoError(t, p.Close())
	_, err = p.Step(0, []int32{1}, []int32{0})
	require.ErrorIs(t, err, runtime.ErrClosed)
	require.NoError(t, p.Close(), "closing twice")
}

// The plan is what runs: a program given a plan's kernels section runs that
// library as stored (here the emitted one with a marker comment appended,
// which Emit would never write) and steps as the interpreter does; a section
// that does not decode strictly into a library is an error naming it.
func TestProgramRunsPlanLibrary(t *testing.T) {
	opts := emuDriver(t)
	m := fusedModel(t, shared.Path(t, "models/gguf/stories260K.gguf"))
	lib, err := cudagen.Emit(m.Graph)
	require.NoError(t, err)
	const marker = "\n// stored in the plan\n"
	lib.Source += marker
	section, err := json.Marshal(lib)
	require.NoError(t, err)
	cfg := runtime.ProgramConfig{Context: 8, Options: opts, Kernels: section}
	p, err := backend{}.Compile(m.Graph, m.Weights, cfg)
	require.NoError(t, err)
	defer p.Close()
	require.True(t, strings.HasSuffix(p.(*program).lib.Source, marker), "the program did not run the plan's library")
	refB, _ := runtime.LookupBackend("reference")
	ref, err := refB.Compile(m.Graph, m.Weights, runtime.ProgramConfig{Context: 8})
	require.NoError(t, err)
	defer ref.Close()
	got, err := p.Step(0, []int32{1, 403}, []int32{0, 1})
	require.NoError(t, err)
	want, err := ref.Step(0, []int32{1, 403}, []int32{0, 1})
	require.NoError(t, err)
	for i := range want {
		require.LessOrEqual(t, golden.RelErr(got[i], want[i]), 1e-5)
	}

	for _, bad := range []struct{ section, want string }{
		{`{"source": "", "launches": []}`, "no kernel source"},
		{`{"source": "x", "bogus": 1}`, "unknown field"},
		{string(section) + `{}`, "data after the library"},
		{`[1, 2]`, "kernels section"},
	} {
		cfg.Kernels = []byte(bad.section)
		_, err := backend{}.Compile(m.Graph, m.Weights, cfg)
		require.ErrorContains(t, err, bad.want)
		require.ErrorContains(t, err, "cuda")
	}
}

// TestStepRowsMatchesSlotSteps runs batched steps (runtime.Rows: decode rows
// of two slots beside a prompt chunk of a third, in mixed order) through
// the CUDA program on the emulated driver, and the same rows as one step
// per slot through a second program and through the reference
// interpreter: every logits row agrees within the models' tolerance, and
// the next batched step (which attends to the rows the first wrote into
// each slot) does too. stories260K runs the float kernels; qwen3-p-mix the
// quantized tiled products and rope_kv's head norms, over an f32 cache and
// over an f16 one, whose prefill attention is attn_prefill: its tiles of 64
// queries then hold rows of three slots (one pass per cache base).
func TestStepRowsMatchesSlotSteps(t *testing.T) {
	stepRowsMatchesSlotSteps(t, emuDriver(t))
}

func stepRowsMatchesSlotSteps(t *testing.T, opts runtime.Options) {
	// The quantized model's bound is wider than the float one's: its Q4_0
	// and Q8_0 products round their activations to Q8_0 as the reference
	// engines do (codegen/cuda RoundsActivations), while the interpreter
	// multiplies the float rows; that rounding alone moves this
	// random-weight model's logits by about 1e-2 (7.8e-3 against the
	// interpreter, measured when only the one-token products rounded), and
	// a float-order difference between a batched step's kernels and a
	// one-token step's can flip a rounding. The float model keeps 1e-5.
	for _, c := range []struct {
		model string
		cache ir.DType
		tol   float64
	}{
		{"models/gguf/stories260K.gguf", ir.F32, 1e-5},
		{"models/gguf/synthetic/qwen3-p-mix.gguf", ir.F32, 3e-2},
		{"models/gguf/synthetic/qwen3-p-mix.gguf", ir.F16, 3e-2},
	} {
		t.Run(c.model+"/"+c.cache.String(), func(t *testing.T) {
			m := fusedModelOpts(t, shared.Path(t, c.model), arch.Options{CacheType: c.cache})
			cfg := runtime.ProgramConfig{Context: 16, Slots: 3, Options: opts}
			compile := func(b runtime.Backend) runtime.Program {
				p, err := b.Compile(m.Graph, m.Weights, cfg)
				require.NoError(t, err)
				t.Cleanup(func() { p.Close() })
				return p
			}
			batched, bySlot := compile(backend{}), compile(backend{})
			refB, _ := runtime.LookupBackend("reference")
			ref := compile(refB)
			require.Implements(t, (*runtime.BatchProgram)(nil), batched)

			// Both slots' prompts, one step per slot everywhere.
			for _, p := range []runtime.Program{batched, bySlot, ref} {
				_, err := p.Step(0, []int32{1, 403, 407}, []int32{0, 1, 2})
				require.NoError(t, err)
				_, err = p.Step(1, []int32{1, 50}, []int32{0, 1})
				require.NoError(t, err)
			}
			check := func(r runtime.Rows) {
				t.Helper()
				got, err := runtime.StepRows(batched, r)
				require.NoError(t, err)
				slot, err := runtime.StepRowsBySlot(bySlot.Config(), r, bySlot.Step)
				require.NoError(t, err)
				want, err := runtime.StepRows(ref, r)
				require.NoError(t, err)
				require.Len(t, got, len(want))
				for i := range want {
					row := i
					if r.Logits != nil {
						row = r.Logits[i]
					}
					e := golden.RelErr(got[i], want[i])
					require.LessOrEqualf(t, e, c.tol, "row %d (slot %d, pos %d): logits error %.3g against the interpreter", row, r.Slots[row], r.Pos[row], e)
					e = golden.RelErr(got[i], slot[i])
					require.LessOrEqualf(t, e, c.tol, "row %d (slot %d, pos %d): logits error %.3g against one step per slot", row, r.Slots[row], r.Pos[row], e)
				}
			}
			// Decode rows of slots 0 and 1 around a prompt chunk of slot 2.
			var r runtime.Rows
			r.Add(1, 60, 2)
			r.Add(2, 1, 0)
			r.Add(2, 300, 1)
			r.Add(0, 261, 3)
			r.Add(2, 301, 2)
			check(r)
			// The next step reads what that one wrote into each slot; only
			// some rows' logits come back.
			r = runtime.Rows{Logits: []int{0, 2}}
			r.Add(2, 302, 3)
			r.Add(0, 262, 4)
			r.Add(1, 61, 3)
			check(r)
			// One row alone runs the decode path (its captured graph).
			r = runtime.Rows{}
			r.Add(2, 303, 4)
			check(r)
		})
	}
}

// On a device of compute capability 9.0 a program launches every kernel
// through cuLaunchKernelEx with programmatic stream serialization (the
// emulated driver reads the CUlaunchConfig at cuda.h's offsets and refuses
// any other attribute), unless MINERVA_CUDA_PDL=0; either way the steps
// match the interpreter as TestProgramMatchesReference's do, the captured
// decode graphs included.
func TestProgramLaunchesWithPDLOnSM90(t *testing.T) {
	opts := emuDriver(t)
	t.Setenv("MINERVA_CUDAEMU_SM90", "1")
	m := fusedModel(t, shared.Path(t, "models/gguf/stories260K.gguf"))
	for _, c := range []struct {
		env  string
		want bool
	}{{"0", false}, {"", true}} {
		t.Setenv("MINERVA_CUDA_PDL", c.env)
		p, err := backend{}.Compile(m.Graph, m.Weights, runtime.ProgramConfig{Context: 16, Slots: 1, Options: opts})
		require.NoError(t, err)
		require.Equal(t, c.want, p.(*program).pdl, "MINERVA_CUDA_PDL=%q", c.env)
		require.NoError(t, p.Close())
	}
	// A plan's library from a build before grid_dep_sync (here: the wait
	// taken out of one kernel) is launched the ordinary way.
	lib, err := cudagen.Emit(m.Graph)
	require.NoError(t, err)
	lib.Source = strings.Replace(lib.Source, "grid_dep_sync();\n", "\n", 1) // the first kernel's wait
	section, err := json.Marshal(lib)
	require.NoError(t, err)
	p, err := backend{}.Compile(m.Graph, m.Weights, runtime.ProgramConfig{Context: 16, Slots: 1, Options: opts, Kernels: section})
	require.NoError(t, err)
	require.False(t, p.(*program).pdl, "a kernel without grid_dep_sync launched with programmatic serialization")
	require.NoError(t, p.Close())
	programMatchesReference(t, opts, "emulat")
}
