package bench_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/bench"
)

// countSteps counts a program's steps and their sizes, and keeps a copy of
// each single-token step's position and logits.
type countSteps struct {
	runtime.Program
	sizes  []int
	pos    []int32
	logits [][]float32
}

func (c *countSteps) Step(slot int, tokens, pos []int32) ([][]float32, error) {
	c.sizes = append(c.sizes, len(tokens))
	out, err := c.Program.Step(slot, tokens, pos)
	if err == nil && len(tokens) == 1 {
		c.pos = append(c.pos, pos[0])
		c.logits = append(c.logits, slices.Clone(out[len(out)-1]))
	}
	return out, err
}

// storiesProgram compiles stories260K for the reference interpreter with a
// 64-token context, closed when the test ends.
func storiesProgram(t *testing.T) runtime.Program {
	src, err := frontend.Open(shared.Path(t, "models/gguf/stories260K.gguf"))
	require.NoError(t, err)
	defer src.Close()
	m, err := src.Build(arch.Options{})
	require.NoError(t, err)
	b, _ := runtime.LookupBackend("reference")
	p, err := b.Compile(m.Graph, m.Weights, runtime.ProgramConfig{Context: 64})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// With UBatch the prompt runs in steps of at most that many tokens (the last
// one shorter), and decode then starts at the prompt's depth.
func TestRunUBatch(t *testing.T) {
	p := storiesProgram(t)
	c := &countSteps{Program: p}
	s, err := runtime.NewProgramSession(c, 0)
	require.NoError(t, err)
	r, err := bench.Run(s, bench.Options{Prompt: 40, UBatch: 16, Decode: 3, Vocab: 500, Seed: 1})
	require.NoError(t, err)
	require.Equal(t, []int{16, 16, 8, 1, 1, 1}, c.sizes)
	require.Equal(t, 43, s.Pos())
	require.Equal(t, 40, r.PromptTokens)
}

// With ProbeBytes, Run samples the bandwidth before the first decode step,
// after every ProbeEvery-th and after the last, and keeps the probe's
// buffer out of PeakRSS.
func TestRunProbe(t *testing.T) {
	p := storiesProgram(t)
	const probe = 256 << 20
	for i, tc := range []struct{ decode, every, samples int }{
		{5, 2, 4}, // before steps 0, 2, 4, then after the last
		{8, 4, 3}, // before 0 and 4, after the last
		{3, 0, 2}, // default every 8: before 0, after the last
		{1, 1, 2}, // before 0, after the last
		{9, 8, 3}, // before 0 and 8, after the last
	} {
		s, err := runtime.NewProgramSession(p, 0)
		require.NoError(t, err)
		r, err := bench.Run(s, bench.Options{Prompt: 4, Decode: tc.decode, Vocab: 500, Seed: 1,
			ProbeBytes: probe, ProbeThreads: 2, ProbeEvery: tc.every})
		require.NoError(t, err)
		require.Len(t, r.ProbeSamples, tc.samples, "decode %d every %d", tc.decode, tc.every)
		require.Equal(t, 0, r.ProbeSamples[0].After)
		require.Equal(t, tc.decode, r.ProbeSamples[tc.samples-1].After)
		require.Greater(t, r.DecodeBandwidth, 0.0)
		require.Less(t, r.DecodeBandwidth, 1e5) // no machine reads 100 TB/s
		require.Greater(t, r.DecodeArith, 0.0)
		require.Less(t, r.DecodeArith, 1e4) // nor multiply-adds 10 T a second on two threads
		if rss := bench.ResidentSet(); rss > 0 && i == 0 {
			// The probe's 256 MiB were resident at the end; the
			// model's peak leaves them out (the first run's: the
			// process's peak then holds a probe for later ones).
			require.Positive(t, r.PeakRSS)
			require.Less(t, r.PeakRSS, bench.PeakRSS()-probe/2)
		}
	}
	// Without a probe there are no samples, and no settling steps.
	s, err := runtime.NewProgramSession(p, 0)
	require.NoError(t, err)
	r, err := bench.Run(s, bench.Options{Prompt: 4, Decode: 2, Vocab: 500, Seed: 1})
	require.NoError(t, err)
	require.Empty(t, r.ProbeSamples)
	require.Zero(t, r.DecodeBandwidth)
	require.Zero(t, r.DecodeArith)
	require.Zero(t, r.SettleSteps)
}

// slowSteps is a program whose single-token steps take at least pause.
type slowSteps struct {
	runtime.Program
	pause time.Duration
}

func (s slowSteps) Step(slot int, tokens, pos []int32) ([][]float32, error) {
	if len(tokens) == 1 {
		time.Sleep(s.pause)
	}
	return s.Program.Step(slot, tokens, pos)
}

// Steps that take longer than ProbeEvery of the probe's passes are sampled
// sooner than every ProbeEvery-th: after each step here, where a pass over
// 1 MiB takes well under the 5 ms (20 ms over 4) a step sleeps. Quick steps
// (the interpreter's on stories260K, against passes over 256 MiB) keep the
// count rule: before steps 0 and 4, then after the last.
func TestRunProbeTime(t *testing.T) {
	p := storiesProgram(t)
	for _, tc := range []struct {
		pause time.Duration
		probe int64
		after []int
	}{
		{20 * time.Millisecond, 1 << 20, []int{0, 1, 2, 3, 4, 5}},
		{0, 256 << 20, []int{0, 4, 5}},
	} {
		s, err := runtime.NewProgramSession(slowSteps{p, tc.pause}, 0)
		require.NoError(t, err)
		r, err := bench.Run(s, bench.Options{Prompt: 4, Decode: 5, Vocab: 500, Seed: 1,
			ProbeBytes: tc.probe, ProbeThreads: 2, ProbeEvery: 4})
		require.NoError(t, err)
		var after []int
		for _, ps := range r.ProbeSamples {
			require.Positive(t, ps.GBs)
			require.Positive(t, ps.Arith)
			require.GreaterOrEqual(t, ps.Steal, -time.Duration(1))
			after = append(after, ps.After)
		}
		require.Equal(t, tc.after, after, "steps of at least %v", tc.pause)
		require.Equal(t, len(tc.after)-1, r.SettleSteps)
	}
}

// After each probe sample the next decode step runs once untimed and is
// rewound, then runs again: the timed steps are the same steps at the same
// positions, with the same logits, as in a run without the probe.
func TestRunProbeSettles(t *testing.T) {
	p := storiesProgram(t)
	run := func(probe int64) (*countSteps, *bench.Result) {
		c := &countSteps{Program: p}
		s, err := runtime.NewProgramSession(c, 0)
		require.NoError(t, err)
		r, err := bench.Run(s, bench.Options{Prompt: 6, Decode: 5, Vocab: 500, Seed: 3,
			ProbeBytes: probe, ProbeThreads: 2, ProbeEvery: 2})
		require.NoError(t, err)
		require.Equal(t, 6+5, s.Pos())
		require.Len(t, r.DecodeSteps, 5)
		return c, r
	}
	plain, r := run(0)
	require.Zero(t, r.SettleSteps)
	require.Equal(t, []int32{6, 7, 8, 9, 10}, plain.pos)
	probed, r := run(256 << 20)
	require.Equal(t, 3, r.SettleSteps) // before steps 0, 2 and 4
	require.Equal(t, []int{6, 1, 1, 1, 1, 1, 1, 1, 1}, probed.sizes)
	require.Equal(t, []int32{6, 6, 7, 8, 8, 9, 10, 10}, probed.pos)
	// Each settling step and its timed rerun give the plain run's logits.
	for i, j := range []int{0, 0, 1, 2, 2, 3, 4, 4} {
		require.Equal(t, plain.logits[j], probed.logits[i], "step %d", i)
	}
}
