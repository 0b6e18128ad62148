package serve_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/cpu"
	"github.com/minerva-llm/minerva/runtime/serve"
)

// benchModel is the model the serving benchmarks run: the file
// $MINERVA_SERVE_BENCH_MODEL names (TinyLlama-1.1B Q4_0 synth: `minervac
// synth --preset tinyllama-1.1b --quant q4_0 -o FILE`), else stories260K.
func benchModel(b *testing.B) storiesModel {
	if path := os.Getenv("MINERVA_SERVE_BENCH_MODEL"); path != "" {
		m, err := loadModel(path)
		require.NoError(b, err)
		return m
	}
	return loadStories(b)
}

// BenchmarkStepRows times a batched decode step of R rows, one per slot,
// on the CPU backend with 2 threads: how the step's cost grows with its
// rows (rows/s against R = 1 is the ceiling of the server's scaling).
func BenchmarkStepRows(b *testing.B) {
	m := benchModel(b)
	const slots, ctx, prompt = 8, 512, 16
	p, err := cpu.Backend{Threads: 2}.Compile(m.g, m.w, runtime.ProgramConfig{Context: ctx, Slots: slots})
	require.NoError(b, err)
	defer p.Close()
	for s := range slots {
		toks, pos := make([]int32, prompt), make([]int32, prompt)
		for i := range toks {
			toks[i], pos[i] = int32(1+(s*7+i)%100), int32(i)
		}
		_, err := p.Step(s, toks, pos)
		require.NoError(b, err)
	}
	for _, R := range []int{1, 4, 8} {
		b.Run(map[int]string{1: "rows=1", 4: "rows=4", 8: "rows=8"}[R], func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				var r runtime.Rows
				for s := range R {
					r.Add(s, int32(1+i%100), int32(prompt+i%(ctx-prompt)))
				}
				if _, err := runtime.StepRows(p, r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(R*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkScheduler runs C requests at once through the scheduler (no
// HTTP), each a 16-token prompt and 32 greedy tokens: output tokens/s at C
// against C = 1 is the server's scaling without the network, and the
// difference from BenchmarkStepRows is the scheduler's own cost.
func BenchmarkScheduler(b *testing.B) {
	m := benchModel(b)
	p, err := cpu.Backend{Threads: 2}.Compile(m.g, m.w, runtime.ProgramConfig{Context: 512, Slots: 8})
	require.NoError(b, err)
	defer p.Close()
	sched, err := serve.New(p, m.tok, serve.Config{})
	require.NoError(b, err)
	defer sched.Shutdown(context.Background())
	for _, C := range []int{1, 8} {
		b.Run(map[int]string{1: "clients=1", 8: "clients=8"}[C], func(b *testing.B) {
			tokens := 0
			for i := 0; b.Loop(); i++ {
				streams := make([]*serve.Stream, C)
				for c := range streams {
					prompt := make([]int32, 16)
					for j := range prompt {
						prompt[j] = int32(1 + (i*31+c*7+j)%100)
					}
					st, err := sched.Submit(context.Background(), &serve.Request{Prompt: prompt, MaxTokens: 32, IgnoreEOS: true})
					require.NoError(b, err)
					streams[c] = st
				}
				for _, st := range streams {
					for {
						ev, err := st.Next(context.Background())
						require.NoError(b, err)
						if ev.Done {
							tokens += ev.Tokens
							break
						}
					}
				}
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
