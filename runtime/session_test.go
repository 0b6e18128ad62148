package runtime_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/golden"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/runtime"
	_ "github.com/minerva-llm/minerva/runtime/cpu" // registers "goasm"
)

// Prefill of the whole prompt in one step and feeding it one token at a time
// must agree: the KV cache carries everything between steps.
func TestPrefillEqualsIncremental(t *testing.T) {
	m, tok := openModel(t, shared.Path(t, "models/gguf/synthetic/llama-p-Q4_K.gguf"))
	prompt := tok.Encode("The little dog ran to the park and saw a cat", true)
	a, err := runtime.NewSession(m.Graph, m.Weights, 64)
	require.NoError(t, err)
	batch, err := a.Eval(prompt)
	require.NoError(t, err)
	b, err := runtime.NewSession(m.Graph, m.Weights, 64)
	require.NoError(t, err)
	for i, id := range prompt {
		row, err := b.Eval([]int32{id})
		require.NoError(t, err)
		e := golden.RelErr(row[0], batch[i])
		require.LessOrEqual(t, e, 1e-5, "position %d: one-by-one vs batch error %.3g", i, e)
	}
	require.Equal(t, len(prompt), b.Pos())
	b.Reset()
	require.Equal(t, 0, b.Pos())
	again, err := b.Eval(prompt)
	require.NoError(t, err)
	require.Equal(t, batch[len(batch)-1], again[len(again)-1], "Reset starts a fresh sequence")
}

func TestGenerateStops(t *testing.T) {
	m, tok := openModel(t, shared.Path(t, "models/gguf/stories260K.gguf"))
	prompt := tok.Encode("Once upon a time", true)
	newSession := func(ctx int) *runtime.Session {
		s, err := runtime.NewSession(m.Graph, m.Weights, ctx)
		require.NoError(t, err)
		return s
	}
	greedy := runtime.DefaultSampler()

	// Treat the 3rd greedy token as EOS: generation stops right after it.
	full, err := runtime.Generate(context.Background(), newSession(64), prompt, runtime.GenerateOptions{MaxTokens: 8, Sampler: greedy, EOS: -1})
	require.NoError(t, err)
	require.Equal(t, runtime.StopLength, full.Stop)
	require.Len(t, full.Tokens, 8)
	res, err := runtime.Generate(context.Background(), newSession(64), prompt, runtime.GenerateOptions{MaxTokens: 8, Sampler: greedy, EOS: full.Tokens[2]})
	require.NoError(t, err)
	require.Equal(t, runtime.StopEOS, res.Stop)
	require.Equal(t, full.Tokens[:3], res.Tokens)
	res, err = runtime.Generate(context.Background(), newSession(64), prompt, runtime.GenerateOptions{MaxTokens: 8, Sampler: greedy, EOS: full.Tokens[2], IgnoreEOS: true})
	require.NoError(t, err)
	require.Equal(t, full.Tokens, res.Tokens)

	// EOG: a set of end tokens besides EOS (a chat model's end of turn)
	// stops the same way, and IgnoreEOS ignores it too.
	eog := func(id int32) bool { return id == full.Tokens[4] }
	res, err = runtime.Generate(context.Background(), newSession(64), prompt, runtime.GenerateOptions{MaxTokens: 8, Sampler: greedy, EOS: -1, EOG: eog})
	require.NoError(t, err)
	require.Equal(t, runtime.StopEOS, res.Stop)
	require.Equal(t, full.Tokens[:5], res.Tokens)
	res, err = runtime.Generate(context.Background(), newSession(64), prompt, runtime.GenerateOptions{MaxTokens: 8, Sampler: greedy, EOS: -1, EOG: eog, IgnoreEOS: true})
	require.NoError(t, err)
	require.Equal(t, full.Tokens, res.Tokens)

	// Context limit: a clean stop, not an error.
	res, err = runtime.Generate(context.Background(), newSession(len(prompt)+3), prompt, runtime.GenerateOptions{MaxTokens: 8, Sampler: greedy, EOS: -1})
	require.NoError(t, err)
	require.Equal(t, runtime.StopContext, res.Stop)
	require.Equal(t, full.Tokens[:4], res.Tokens)

	// A prompt longer than the context is an error naming the problem.
	_, err = runtime.Generate(context.Background(), newSession(3), prompt, runtime.GenerateOptions{MaxTokens: 8, Sampler: greedy, EOS: -1})
	require.ErrorIs(t, err, runtime.ErrContextFull)

	// Cancellation through the callback's context.
	ctx, cancel := context.WithCancel(context.Background())
	var seen []int32
	res, err = runtime.Generate(ctx, newSession(64), prompt, runtime.GenerateOptions{MaxTokens: 8, Sampler: greedy, EOS: -1,
		OnToken: func(id int32) error {
			seen = append(seen, id)
			if len(seen) == 2 {
				cancel()
			}
			return nil
		}})
	require.True(t, errors.Is(err, context.Canceled))
	require.Equal(t, full.Tokens[:2], res.Tokens)
	require.Equal(t, res.Tokens, seen)
}

// Truncate rewinds a sequence: after evaluating A and B, truncating into A
// and evaluating C gives the logits of a fresh sequence A[:k]+C, although
// the cache still holds rows of A's tail and of B past the new tokens
// (stale rows a backend must not attend to). gpt-oss adds a sliding window
// of 8 that the rewound rows cross.
func TestTruncateRewinds(t *testing.T) {
	for _, model := range []string{"models/gguf/stories260K.gguf", "models/gguf/synthetic/gptoss-g1-q8emb.gguf"} {
		m, tok := openModel(t, shared.Path(t, model))
		a := tok.Encode("Once upon a time there was a little dog", false)
		b := tok.Encode(" who ran to the park", false)
		c := tok.Encode(" and the cat followed", false)
		k := len(a) - 3
		require.Greater(t, len(b)+3, len(c), "C must leave stale rows of B behind")
		for _, backend := range []string{"reference", "goasm"} {
			t.Run(filepath.Base(model)+"/"+backend, func(t *testing.T) {
				be, ok := runtime.LookupBackend(backend)
				require.True(t, ok)
				session := func() *runtime.Session {
					p, err := be.Compile(m.Graph, m.Weights, runtime.ProgramConfig{Context: 64})
					require.NoError(t, err)
					t.Cleanup(func() { p.Close() })
					s, err := runtime.NewProgramSession(p, 0)
					require.NoError(t, err)
					return s
				}
				s := session()
				_, err := s.Eval(a)
				require.NoError(t, err)
				_, err = s.Eval(b)
				require.NoError(t, err)
				require.Error(t, s.Truncate(s.Pos()+1), "beyond the sequence")
				require.Error(t, s.Truncate(-1))
				require.NoError(t, s.Truncate(k))
				require.Equal(t, k, s.Pos())
				got, err := s.Eval(c)
				require.NoError(t, err)

				fresh := session()
				_, err = fresh.Eval(a[:k])
				require.NoError(t, err)
				want, err := fresh.Eval(c)
				require.NoError(t, err)
				for i := range want {
					require.LessOrEqual(t, golden.RelErr(got[i], want[i]), 1e-5, "row %d of C", i)
				}
			})
		}
	}
}
