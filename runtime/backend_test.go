package runtime_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/internal/golden"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/tokenizer"
)

func TestBackendRegistry(t *testing.T) {
	require.Contains(t, runtime.Backends(), "reference")
	b, ok := runtime.LookupBackend("reference")
	require.True(t, ok)
	require.Equal(t, "reference", b.Name())
	_, ok = runtime.LookupBackend("no-such-backend")
	require.False(t, ok)
	require.PanicsWithValue(t, "runtime: backend reference registered twice", func() { runtime.RegisterBackend(b) })
	require.Equal(t, runtime.DefaultBackend, "reference")
}

// loadCacheType loads a model with the given KV cache type.
func loadCacheType(t *testing.T, path string, dt ir.DType) (*arch.Model, *tokenizer.Tokenizer) {
	t.Helper()
	f, err := gguf.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	m, err := arch.Load(f, arch.Options{CacheType: dt})
	require.NoError(t, err)
	tok, err := tokenizer.New(m.Vocab)
	require.NoError(t, err)
	return m, tok
}

func compile(t *testing.T, g *ir.Graph, w eval.Weights, cfg runtime.ProgramConfig) runtime.Program {
	t.Helper()
	b, _ := runtime.LookupBackend("reference")
	p, err := b.Compile(g, w, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// positions returns from, from+1, ..., from+n-1.
func positions(from, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(from + i)
	}
	return p
}

// Program.Step on the reference backend gives exactly the logits of the
// interpreter run directly (what Session did before programs existed) and of
// a Session: prefill, then decode steps.
func TestStepMatchesInterpreter(t *testing.T) {
	for _, dt := range []ir.DType{ir.F32, ir.F16} {
		t.Run(dt.String(), func(t *testing.T) {
			m, tok := loadCacheType(t, shared.Path(t, "models/gguf/stories260K.gguf"), dt)
			prompt := tok.Encode("Once upon a time", true)
			const ctx = 32
			p := compile(t, m.Graph, m.Weights, runtime.ProgramConfig{Context: ctx, Slots: 2})
			require.Equal(t, runtime.ProgramConfig{Context: ctx, Slots: 2}, p.Config())
			require.Equal(t, 512, p.VocabSize())
			mach, err := eval.New(m.Graph, m.Weights, ctx)
			require.NoError(t, err)
			s, err := runtime.NewSession(m.Graph, m.Weights, ctx)
			require.NoError(t, err)
			defer s.Close()

			steps := [][]int32{prompt, {432}, {383}, {286}}
			pos := 0
			for _, step := range steps {
				want, err := mach.Run(map[string]eval.Tensor{
					"tokens": {Shape: []int64{int64(len(step))}, I32: step},
					"pos":    {Shape: []int64{int64(len(step))}, I32: positions(pos, len(step))},
				})
				require.NoError(t, err)
				got, err := p.Step(1, step, positions(pos, len(step)))
				require.NoError(t, err)
				viaSession, err := s.Eval(step)
				require.NoError(t, err)
				require.Len(t, got, len(step))
				for i := range got {
					row := want["logits"].F32[i*512 : (i+1)*512]
					require.Equal(t, row, got[i], "step at %d, row %d", pos, i)
					require.Equal(t, row, viaSession[i], "session, step at %d, row %d", pos, i)
				}
				pos += len(step)
			}
		})
	}
}

// Sequences interleaved in the slots of one program give bit for bit the
// logits each gives alone, whatever the order of the steps; a reset of one
// slot leaves the others alone.
func TestSlotIsolation(t *testing.T) {
	for _, dt := range []ir.DType{ir.F32, ir.F16} {
		t.Run(dt.String(), func(t *testing.T) {
			m, tok := loadCacheType(t, shared.Path(t, "models/gguf/stories260K.gguf"), dt)
			prompts := [][]int32{
				tok.Encode("Once upon a time", true),
				tok.Encode("The little dog ran to the park", true),
				tok.Encode("Lily", true),
			}
			// Each sequence: its prompt, then decode steps with fixed tokens.
			seqs := make([][][]int32, len(prompts))
			for i, p := range prompts {
				seqs[i] = [][]int32{p}
				for j := 0; j < 6; j++ {
					seqs[i] = append(seqs[i], []int32{int32(300 + 17*i + j)})
				}
			}
			const ctx = 24
			solo := make([][][][]float32, len(seqs))
			for i, seq := range seqs {
				s, err := runtime.NewSession(m.Graph, m.Weights, ctx)
				require.NoError(t, err)
				for _, step := range seq {
					rows, err := s.Eval(step)
					require.NoError(t, err)
					solo[i] = append(solo[i], rows)
				}
			}

			p := compile(t, m.Graph, m.Weights, runtime.ProgramConfig{Context: ctx, Slots: 3})
			// Slots in reverse order of the sequences, steps interleaved
			// round-robin with slot 1 lagging, and slot 0 reset and rerun.
			slotOf := []int{2, 1, 0}
			next, pos := make([]int, len(seqs)), make([]int, len(seqs))
			order := []int{0, 2, 0, 0, 2, 1, 2, 0, 1, 0, 2, 2, 1, 0, 1, 2, 0, 1, 1, 1}
			for _, i := range order {
				if next[i] >= len(seqs[i]) {
					continue
				}
				step := seqs[i][next[i]]
				rows, err := p.Step(slotOf[i], step, positions(pos[i], len(step)))
				require.NoError(t, err)
				require.Equal(t, solo[i][next[i]], rows, "sequence %d step %d", i, next[i])
				next[i]++
				pos[i] += len(step)
				if i == 2 && next[i] == 3 {
					// Restart sequence 2 from scratch in its slot.
					require.NoError(t, p.ResetSlot(slotOf[i]))
					next[i], pos[i] = 0, 0
				}
			}
			for i := range seqs {
				for ; next[i] < len(seqs[i]); next[i]++ {
					step := seqs[i][next[i]]
					rows, err := p.Step(slotOf[i], step, positions(pos[i], len(step)))
					require.NoError(t, err)
					require.Equal(t, solo[i][next[i]], rows, "sequence %d step %d", i, next[i])
					pos[i] += len(step)
				}
			}
		})
	}
}

// An f16 cache holds real half floats (half the bytes) and stays within
// 2e-3·max|logit| of the f32 cache on stories260K, prompt and generation.
func TestF16CacheStorage(t *testing.T) {
	path := shared.Path(t, "models/gguf/stories260K.gguf")
	m32, tok := loadCacheType(t, path, ir.F32)
	m16, _ := loadCacheType(t, path, ir.F16)
	retyped, err := runtime.WithCacheType(m32.Graph, ir.F16)
	require.NoError(t, err)
	dt, err := runtime.CacheTypeOf(m32.Graph)
	require.NoError(t, err)
	require.Equal(t, ir.F32, dt, "WithCacheType leaves its input alone")
	dt, err = runtime.CacheTypeOf(retyped)
	require.NoError(t, err)
	require.Equal(t, ir.F16, dt)

	const ctx = 64
	p32 := compile(t, m32.Graph, m32.Weights, runtime.ProgramConfig{Context: ctx})
	p16 := compile(t, m16.Graph, m16.Weights, runtime.ProgramConfig{Context: ctx})
	pre := compile(t, retyped, m32.Weights, runtime.ProgramConfig{Context: ctx})
	require.Equal(t, 2*p16.CacheBytes(), p32.CacheBytes())
	require.Equal(t, p16.CacheBytes(), pre.CacheBytes())
	// stories260K: 5 layers × (k, v) × 64 positions × 32 (kv dim) elements.
	require.EqualValues(t, 5*2*ctx*32*4, p32.CacheBytes())

	prompt := tok.Encode("Once upon a time", true)
	a, err := p32.Step(0, prompt, positions(0, len(prompt)))
	require.NoError(t, err)
	b, err := p16.Step(0, prompt, positions(0, len(prompt)))
	require.NoError(t, err)
	c, err := pre.Step(0, prompt, positions(0, len(prompt)))
	require.NoError(t, err)
	require.Equal(t, b, c, "a retyped graph runs like one built with f16 caches")
	worst := 0.0
	for i := range a {
		worst = max(worst, golden.RelErr(b[i], a[i]))
	}
	// Greedy decoding on the f32 program, teacher forcing the f16 one.
	last32, last16 := a[len(a)-1], b[len(b)-1]
	for n := len(prompt); n < ctx; n++ {
		id := runtime.Argmax(last32)
		r32, err := p32.Step(0, []int32{id}, []int32{int32(n)})
		require.NoError(t, err)
		r16, err := p16.Step(0, []int32{id}, []int32{int32(n)})
		require.NoError(t, err)
		last32, last16 = r32[0], r16[0]
		worst = max(worst, golden.RelErr(last16, last32))
	}
	t.Logf("f16 vs f32 cache: worst logits error %.3g·max over %d positions", worst, ctx)
	require.LessOrEqual(t, worst, 2e-3)
	require.Greater(t, worst, 0.0, "the f16 cache rounds")
}

func TestCompileErrors(t *testing.T) {
	m, _ := loadCacheType(t, shared.Path(t, "models/gguf/stories260K.gguf"), ir.F32)
	b, _ := runtime.LookupBackend("reference")
	for _, c := range []struct {
		cfg  runtime.ProgramConfig
		want string
	}{
		{runtime.ProgramConfig{}, "context length 0"},
		{runtime.ProgramConfig{Context: 8, Slots: -1}, "slot count -1"},
	} {
		_, err := b.Compile(m.Graph, m.Weights, c.cfg)
		require.ErrorContains(t, err, c.want)
	}
	// Weights are read at Compile.
	_, err := b.Compile(m.Graph, missingWeights{}, runtime.ProgramConfig{Context: 8})
	require.ErrorContains(t, err, "loading weights")

	// A graph with another input cannot be stepped.
	bl := ir.NewBuilder("extra")
	tokens := bl.Input("tokens", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	bl.Input("mask", ir.Type{DType: ir.F32, Shape: ir.S("T")})
	bl.Output("logits", bl.Embed(bl.Weight("emb", ir.Type{DType: ir.F32, Shape: ir.S(4, 3)}), tokens))
	g, err := bl.Finish()
	require.NoError(t, err)
	_, err = b.Compile(g, missingWeights{}, runtime.ProgramConfig{Context: 8})
	require.ErrorContains(t, err, `graph input "mask"`)

	p := compile(t, m.Graph, m.Weights, runtime.ProgramConfig{Context: 8, Slots: 2})
	for _, c := range []struct {
		slot        int
		tokens, pos []int32
		want        string
	}{
		{2, []int32{1}, []int32{0}, "slot 2 is out of range"},
		{-1, []int32{1}, []int32{0}, "slot -1 is out of range"},
		{0, nil, nil, "no tokens"},
		{0, []int32{1, 2}, []int32{0}, "2 tokens but 1 positions"},
		{0, []int32{512}, []int32{0}, "token 512 (#0) is outside the vocabulary of 512"},
		{1, []int32{1}, []int32{8}, "position 8 (#0) is outside the context of 8"},
	} {
		_, err := p.Step(c.slot, c.tokens, c.pos)
		require.ErrorContains(t, err, c.want)
	}
	require.ErrorContains(t, p.ResetSlot(2), "slot 2 is out of range")
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	_, err = p.Step(0, []int32{1}, []int32{0})
	require.ErrorIs(t, err, runtime.ErrClosed)
	require.ErrorIs(t, p.ResetSlot(0), runtime.ErrClosed)
}

type missingWeights struct{}

func (missingWeights) WeightBytes(name string) ([]byte, error) {
	return nil, fmt.Errorf("no tensor %q here", name)
}

// Sessions over the slots of a program the caller owns.
func TestProgramSessions(t *testing.T) {
	m, tok := loadCacheType(t, shared.Path(t, "models/gguf/stories260K.gguf"), ir.F32)
	p := compile(t, m.Graph, m.Weights, runtime.ProgramConfig{Context: 32, Slots: 2})
	a, err := runtime.NewProgramSession(p, 0)
	require.NoError(t, err)
	b, err := runtime.NewProgramSession(p, 1)
	require.NoError(t, err)
	require.Same(t, p, b.Program())
	require.Nil(t, b.Model())
	prompt := tok.Encode("Once upon a time", true)
	ra, err := a.Eval(prompt)
	require.NoError(t, err)
	rb, err := b.Eval(prompt[:2])
	require.NoError(t, err)
	rb, err = b.Eval(prompt[2:])
	require.NoError(t, err)
	require.Equal(t, ra[len(ra)-1], rb[len(rb)-1])
	_, err = b.GenerateText(context.Background(), "x", runtime.GenerateOptions{})
	require.ErrorContains(t, err, "no tokenizer")
	require.NoError(t, b.Close())
	_, err = b.Eval(prompt)
	require.ErrorIs(t, err, runtime.ErrClosed)
	_, err = runtime.NewProgramSession(p, 2)
	require.ErrorContains(t, err, "slot 2 is out of range")
	// The program outlives the sessions over it.
	_, err = a.Eval([]int32{432})
	require.NoError(t, err)
}

// SumKernelTimes groups launches by family in the order of each family's
// first launch, counting and adding up each family's launches.
func TestSumKernelTimes(t *testing.T) {
	fam := []string{"b", "a", "b", "c", "a", "b"}
	us := []float64{1, 2, 4, 8, 16, 32}
	got := runtime.SumKernelTimes(len(fam), func(i int) string { return fam[i] }, func(i int) float64 { return us[i] })
	require.Equal(t, []runtime.KernelTime{{Family: "b", Launches: 3, Micros: 37}, {Family: "a", Launches: 2, Micros: 18}, {Family: "c", Launches: 1, Micros: 8}}, got)
	require.Empty(t, runtime.SumKernelTimes(0, nil, nil))
}

// KernelTimesStep is token 1 at positions pos0..pos0+T-1, and refuses a
// call whose slot, runs or positions the program cannot take.
func TestKernelTimesStep(t *testing.T) {
	cfg := runtime.ProgramConfig{Context: 16, Slots: 2}
	tokens, pos, err := runtime.KernelTimesStep(cfg, 1, 13, 3, 1)
	require.NoError(t, err)
	require.Equal(t, []int32{1, 1, 1}, tokens)
	require.Equal(t, []int32{13, 14, 15}, pos)
	for _, c := range []struct{ slot, pos0, T, runs int }{
		{0, 0, 1, 0}, {2, 0, 1, 1}, {-1, 0, 1, 1}, {0, 0, 0, 1}, {0, -1, 1, 1}, {0, 14, 3, 1}, {0, 0, 1 << 62, 1},
	} {
		_, _, err := runtime.KernelTimesStep(cfg, c.slot, c.pos0, c.T, c.runs)
		require.Error(t, err, "%+v", c)
	}
}
