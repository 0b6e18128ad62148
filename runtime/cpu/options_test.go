package cpu_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/golden"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/cpu"
	"github.com/minerva-llm/minerva/runtime/cpu/kern"
)

// Two programs with different Options — kernel variant and worker count —
// live in one process and step interleaved, each with its own settings, and
// both give the golden case's logits. Nothing is read from the environment.
func TestTwoProgramsWithOwnOptions(t *testing.T) {
	var c *golden.Case // Q4_0 weights: the variants' kernels differ
	for _, x := range golden.Cases(t, "index.json") {
		if x.Name == "llama-p-Q4_0__once_upon_a_time" {
			c = x
		}
	}
	require.NotNil(t, c)
	m := compiled(t, c.ModelPath)
	variants := kern.Variants() // sorted; "generic" is always there
	other := variants[0]
	for _, v := range variants {
		if v != "generic" {
			other = v
		}
	}
	b, ok := runtime.LookupBackend("goasm")
	require.True(t, ok)
	opts := []runtime.Options{{Threads: 1, CPUKernels: "generic"}, {Threads: 2, CPUKernels: other}}
	var sess []*runtime.Session
	for _, o := range opts {
		p, err := b.Compile(m.Graph, m.Weights, runtime.ProgramConfig{Context: len(c.PromptTokens) + 1, Options: o})
		require.NoError(t, err)
		t.Cleanup(func() { p.Close() })
		v, th, ok := cpu.ProgramSettings(p)
		require.True(t, ok)
		require.Equal(t, o.CPUKernels, v)
		require.Equal(t, o.Threads, th)
		s, err := runtime.NewProgramSession(p, 0)
		require.NoError(t, err)
		sess = append(sess, s)
	}
	tol := tolerance(c)
	for i, tok := range c.PromptTokens {
		for k, s := range sess {
			rows, err := s.Eval([]int32{tok})
			require.NoError(t, err)
			e := golden.RelErr(rows[0], c.LogitsAll[i])
			require.LessOrEqualf(t, e, tol, "program %d (%+v), token %d: logits error %.3g", k, opts[k], i, e)
		}
	}

	_, err := b.Compile(m.Graph, m.Weights, runtime.ProgramConfig{Context: 4, Options: runtime.Options{CPUKernels: "avx9000"}})
	require.ErrorContains(t, err, "avx9000")
}
