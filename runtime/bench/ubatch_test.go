package bench_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/bench"
)

// countSteps counts a program's steps and their sizes.
type countSteps struct {
	runtime.Program
	sizes []int
}

func (c *countSteps) Step(slot int, tokens, pos []int32) ([][]float32, error) {
	c.sizes = append(c.sizes, len(tokens))
	return c.Program.Step(slot, tokens, pos)
}

// With UBatch the prompt runs in steps of at most that many tokens (the last
// one shorter), and decode then starts at the prompt's depth.
func TestRunUBatch(t *testing.T) {
	src, err := frontend.Open(shared.Path(t, "models/gguf/stories260K.gguf"))
	require.NoError(t, err)
	defer src.Close()
	m, err := src.Build(arch.Options{})
	require.NoError(t, err)
	b, _ := runtime.LookupBackend("reference")
	p, err := b.Compile(m.Graph, m.Weights, runtime.ProgramConfig{Context: 64})
	require.NoError(t, err)
	defer p.Close()
	c := &countSteps{Program: p}
	s, err := runtime.NewProgramSession(c, 0)
	require.NoError(t, err)
	r, err := bench.Run(s, bench.Options{Prompt: 40, UBatch: 16, Decode: 3, Vocab: 500, Seed: 1})
	require.NoError(t, err)
	require.Equal(t, []int{16, 16, 8, 1, 1, 1}, c.sizes)
	require.Equal(t, 43, s.Pos())
	require.Equal(t, 40, r.PromptTokens)
}
