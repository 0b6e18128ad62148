package cpu_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/cpu"
	"github.com/minerva-llm/minerva/synth"
)

// TestKernelTimes: the CPU program times its ops by family for `bench
// --kernel-times`. Every op of the step is counted once, in its family (the
// matmul ops by weight type, one per layer for SwiGLU and QKV in the fused
// synthetic llama), every family took time, and bad arguments are errors.
// Timing does not change what the program computes: a prompt stepped
// afterwards gives a fresh program's logits; and a step timed at depth
// pos0 is the step of token 1 at that position after the cache's rows
// before it, as the next step's logits show.
func TestKernelTimes(t *testing.T) {
	m := synth.Default()
	am := synthModel(t, m)
	fuse(t, am.Graph)
	cfg := runtime.ProgramConfig{Context: 16}
	p, err := cpu.Backend{Threads: 2}.Compile(am.Graph, am.Weights, cfg)
	require.NoError(t, err)
	defer p.Close()
	kt, ok := p.(runtime.KernelTimer)
	require.True(t, ok, "the CPU program is a runtime.KernelTimer")

	for _, T := range []int{1, 5} {
		times, err := kt.KernelTimes(0, 0, T, 2)
		require.NoError(t, err)
		launches := map[string]int{}
		total := 0
		for _, k := range times {
			require.NotContains(t, launches, k.Family, "each family once")
			require.Positive(t, k.Micros, "%s took time", k.Family)
			launches[k.Family] = k.Launches
			total += k.Launches
		}
		require.Equal(t, cpu.Nodes(p), total, "T=%d: every op counted once", T)
		require.Equal(t, m.NLayer, launches["swiglu/f32"], "T=%d", T)
		require.Equal(t, m.NLayer, launches["qkv_rope/f32"], "T=%d", T)
		require.Equal(t, 1, launches["embed"], "T=%d", T)
	}

	for _, c := range []struct{ slot, pos0, T, runs int }{
		{0, 0, 1, 0}, {0, 0, 0, 1}, {0, 0, 17, 1}, {1, 0, 1, 1}, {-1, 0, 1, 1},
		{0, -1, 1, 1}, {0, 16, 1, 1}, {0, 12, 5, 1},
	} {
		_, err := kt.KernelTimes(c.slot, c.pos0, c.T, c.runs)
		require.Error(t, err, "slot %d, %d tokens at %d, %d runs", c.slot, c.T, c.pos0, c.runs)
	}

	prompt := []int32{1, 5, 9, 4, 7}
	pos := []int32{0, 1, 2, 3, 4}
	got, err := p.Step(0, prompt, pos)
	require.NoError(t, err)
	fresh, err := cpu.Backend{Threads: 2}.Compile(am.Graph, am.Weights, cfg)
	require.NoError(t, err)
	defer fresh.Close()
	want, err := fresh.Step(0, prompt, pos)
	require.NoError(t, err)
	require.Equal(t, want, got)

	// At depth 5: token 1 at position 5, then token 3 at 6.
	_, err = kt.KernelTimes(0, 5, 1, 1)
	require.NoError(t, err)
	got, err = p.Step(0, []int32{3}, []int32{6})
	require.NoError(t, err)
	_, err = fresh.Step(0, []int32{1}, []int32{5})
	require.NoError(t, err)
	want, err = fresh.Step(0, []int32{3}, []int32{6})
	require.NoError(t, err)
	require.Equal(t, want, got)

	require.NoError(t, p.Close())
	_, err = kt.KernelTimes(0, 0, 1, 1)
	require.ErrorIs(t, err, runtime.ErrClosed)
}
