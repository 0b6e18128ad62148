package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime"
)

// greedyProgram stands in for a device that picks the greedy token itself:
// StepGreedy steps the wrapped program and returns the argmax of the last
// row, counting its calls; Step counts too, so the test sees which path
// Generate took.
type greedyProgram struct {
	runtime.Program
	steps, greedySteps int
}

func (g *greedyProgram) Step(slot int, tokens, pos []int32) ([][]float32, error) {
	g.steps++
	return g.Program.Step(slot, tokens, pos)
}

func (g *greedyProgram) StepGreedy(slot int, tokens, pos []int32) (int32, error) {
	g.greedySteps++
	rows, err := g.Program.Step(slot, tokens, pos)
	if err != nil {
		return 0, err
	}
	return runtime.Argmax(rows[len(rows)-1]), nil
}

// Generate with the greedy sampler on a GreedyProgram takes the device
// path for the prompt and every decode step and produces the same tokens
// as sampling from the logits; with KeepLogits or a non-greedy sampler it
// steps for logits.
func TestGenerateGreedyOnDevice(t *testing.T) {
	m, _ := loadCacheType(t, shared.Path(t, "models/gguf/stories260K.gguf"), ir.F32)
	prompt := []int32{1, 403, 407, 261, 378}
	run := func(opts runtime.GenerateOptions) (*runtime.Result, *greedyProgram) {
		gp := &greedyProgram{Program: compile(t, m.Graph, m.Weights, runtime.ProgramConfig{Context: 64})}
		s, err := runtime.NewProgramSession(gp, 0)
		require.NoError(t, err)
		res, err := runtime.Generate(context.Background(), s, prompt, opts)
		require.NoError(t, err)
		require.Equal(t, len(prompt)+len(res.Tokens)-1, s.Pos())
		return res, gp
	}
	base := runtime.GenerateOptions{MaxTokens: 20, Sampler: runtime.DefaultSampler(), EOS: -1, IgnoreEOS: true}

	dev, gp := run(base)
	require.Equal(t, 0, gp.steps, "the greedy path stepped for logits")
	require.Equal(t, 20, gp.greedySteps) // the prompt and 19 decode steps

	keep := base
	keep.KeepLogits = true
	host, gp := run(keep)
	require.Equal(t, 0, gp.greedySteps, "KeepLogits needs the logits")
	require.Equal(t, host.Tokens, dev.Tokens)
	for i, row := range host.GenLogits {
		require.Equal(t, runtime.Argmax(row), dev.Tokens[i])
	}

	hot := base
	hot.Sampler.Temperature = 0.8
	_, gp = run(hot)
	require.Equal(t, 0, gp.greedySteps, "a sampler with temperature needs the logits")
}
