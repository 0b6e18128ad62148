package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/internal/golden"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/tokenizer"
)

// loadStories opens stories260K through the one open path and makes a
// runtime.Model of its graph, built with opts.
func loadStories(t *testing.T, opts arch.Options) *runtime.Model {
	t.Helper()
	src, err := frontend.Open(shared.Path(t, "models/gguf/stories260K.gguf"))
	require.NoError(t, err)
	t.Cleanup(func() { src.Close() })
	built, err := src.Build(opts)
	require.NoError(t, err)
	m, err := runtime.NewModel(built.Graph, built.Weights, built.Vocab, built.Config.ContextLength)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

func newEngine(t *testing.T, m *runtime.Model, opts runtime.EngineOptions) *runtime.Engine {
	t.Helper()
	e, err := m.NewEngine(opts)
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	return e
}

// generateText runs GenerateText in a fresh session, collecting the
// streamed text.
func generateText(t *testing.T, e *runtime.Engine, prompt string, opts runtime.GenerateOptions) (*runtime.Result, []string, error) {
	t.Helper()
	s, err := e.NewSession()
	require.NoError(t, err)
	defer s.Close()
	var pieces []string
	opts.OnText = func(text string) error {
		require.NotEmpty(t, text)
		pieces = append(pieces, text)
		return nil
	}
	res, err := s.GenerateText(context.Background(), prompt, opts)
	return res, pieces, err
}

const storiesGreedy = ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball."

func TestStopStrings(t *testing.T) {
	m := loadStories(t, arch.Options{})
	e := newEngine(t, m, runtime.EngineOptions{Context: 128})
	greedy := runtime.DefaultSampler()
	full, pieces, err := generateText(t, e, "Once upon a time", runtime.GenerateOptions{MaxTokens: 40, Sampler: greedy})
	require.NoError(t, err)
	require.Equal(t, runtime.StopLength, full.Stop)
	require.Equal(t, storiesGreedy, full.Text)
	require.Equal(t, full.Text, strings.Join(pieces, ""))
	require.Len(t, pieces, 40, "without stop strings every token streams at once")
	// The tokens: "," " there" " was" " a" " little" " g" "ir" "l" " named" " Lily" ...
	require.Equal(t, " g", m.Tokenizer.Decode(full.Tokens[5:6]))

	for _, c := range []struct {
		name   string
		stop   []string
		text   string // before the stop string
		match  string
		tokens int // generated, the one completing the stop string included
	}{
		{"spans three tokens", []string{"girl"}, ", there was a little ", "girl", 8},
		{"spans two tokens, starts inside one", []string{"e g"}, ", there was a littl", "e g", 6},
		{"inside one token", []string{"her"}, ", t", "her", 2},
		{"the earliest of several", []string{"Lily", "little", "park"}, ", there was a ", "little", 5},
		{"at the very start", []string{", the"}, "", ", the", 2},
		{"a prefix appears first", []string{"a lit", "a big"}, ", there was ", "a lit", 5},
		{"after a near miss", []string{"ball."}, strings.TrimSuffix(storiesGreedy, "ball."), "ball.", 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, pieces, err := generateText(t, e, "Once upon a time", runtime.GenerateOptions{MaxTokens: 40, Sampler: greedy, Stop: c.stop})
			require.NoError(t, err)
			require.Equal(t, runtime.StopString, res.Stop)
			require.Equal(t, c.match, res.StopMatch)
			require.Equal(t, c.text, res.Text)
			require.Equal(t, full.Tokens[:c.tokens], res.Tokens)
			require.Equal(t, res.Text, strings.Join(pieces, ""), "the streamed text is the result's")
			for _, p := range pieces {
				for _, s := range c.stop {
					require.NotContains(t, p, s)
				}
			}
		})
	}

	// A stop string never produced: generation runs to MaxTokens, and text
	// held back for a partial match ("girl" vs " g", "gir") is streamed.
	res, pieces, err := generateText(t, e, "Once upon a time", runtime.GenerateOptions{MaxTokens: 40, Sampler: greedy, Stop: []string{"girls", "Tom", "d, she"}})
	require.NoError(t, err)
	require.Equal(t, runtime.StopLength, res.Stop)
	require.Empty(t, res.StopMatch)
	require.Equal(t, full.Tokens, res.Tokens)
	require.Equal(t, full.Text, res.Text)
	require.Equal(t, full.Text, strings.Join(pieces, ""))
	require.Less(t, len(pieces), 40, "partial matches were held back")

	// Stop strings need a decoder.
	s, err := e.NewSession()
	require.NoError(t, err)
	defer s.Close()
	_, err = runtime.Generate(context.Background(), s, []int32{1}, runtime.GenerateOptions{MaxTokens: 4, Stop: []string{"x"}, Sampler: greedy})
	require.ErrorContains(t, err, "need a Decode function")
	_, err = runtime.Generate(context.Background(), s, []int32{1}, runtime.GenerateOptions{MaxTokens: 4, Stop: []string{""}, Decode: m.Tokenizer.Decode, Sampler: greedy})
	require.ErrorContains(t, err, "stop string is empty")
}

// EOS ends generation; the text leaves it out. The context limit stops
// with StopContext and the text so far.
func TestGenerateTextStops(t *testing.T) {
	m := loadStories(t, arch.Options{})
	greedy := runtime.DefaultSampler()
	e := newEngine(t, m, runtime.EngineOptions{Context: 12})
	res, pieces, err := generateText(t, e, "Once upon a time", runtime.GenerateOptions{MaxTokens: 40, Sampler: greedy})
	require.NoError(t, err)
	require.Equal(t, runtime.StopContext, res.Stop)
	require.Len(t, res.Tokens, 12-5+1, "5 prompt tokens, 7 evaluated generated ones and the last sampled")
	require.Equal(t, ", there was a little girl", res.Text)
	require.Equal(t, res.Text, strings.Join(pieces, ""))

	// Decode turning token 421 (" named") into EOS text: Generate stops on
	// EOS and the text has everything before it.
	s, err := e.NewSession()
	require.NoError(t, err)
	defer s.Close()
	prompt := m.Tokenizer.Encode("Once upon a time", true)
	res, err = runtime.Generate(context.Background(), s, prompt[:4], runtime.GenerateOptions{
		MaxTokens: 40, Sampler: greedy, EOS: 298, Decode: m.Tokenizer.Decode,
	})
	require.NoError(t, err)
	require.Equal(t, runtime.StopEOS, res.Stop)
	require.Equal(t, int32(298), res.Tokens[len(res.Tokens)-1])
	require.Equal(t, m.Tokenizer.Decode(res.Tokens[:len(res.Tokens)-1]), res.Text)
}

// Partial UTF-8 is held back until the character is complete, and a stop
// string is found across the bytes of split characters.
func TestStreamUTF8(t *testing.T) {
	m := loadStories(t, arch.Options{})
	e := newEngine(t, m, runtime.EngineOptions{Context: 64})
	// A decoder that gives one byte of text per token, whatever the token.
	const text = "¡hé, wörld! ☃ ok"
	decode := func(ids []int32) string { return text[:min(len(ids), len(text))] }
	run := func(stop ...string) (*runtime.Result, []string) {
		s, err := e.NewSession()
		require.NoError(t, err)
		defer s.Close()
		var pieces []string
		res, err := runtime.Generate(context.Background(), s, []int32{1}, runtime.GenerateOptions{
			MaxTokens: len(text), Sampler: runtime.DefaultSampler(), EOS: -1, Decode: decode, Stop: stop,
			OnText: func(p string) error { pieces = append(pieces, p); return nil },
		})
		require.NoError(t, err)
		return res, pieces
	}
	res, pieces := run()
	require.Equal(t, text, res.Text)
	require.Equal(t, []string{"¡", "h", "é", ",", " ", "w", "ö", "r", "l", "d", "!", " ", "☃", " ", "o", "k"}, pieces)
	res, pieces = run("☃ o")
	require.Equal(t, runtime.StopString, res.Stop)
	require.Equal(t, "¡hé, wörld! ", res.Text)
	require.Equal(t, res.Text, strings.Join(pieces, ""))
}

func TestCancel(t *testing.T) {
	m := loadStories(t, arch.Options{})
	e := newEngine(t, m, runtime.EngineOptions{Context: 128})
	s, err := e.NewSession()
	require.NoError(t, err)
	defer s.Close()

	// Cancelled before it starts: nothing runs.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := s.GenerateText(ctx, "Once upon a time", runtime.GenerateOptions{MaxTokens: 8, Sampler: runtime.DefaultSampler()})
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, res)
	require.Equal(t, 0, s.Pos())

	// Cancelled while streaming: the result so far comes back with the error.
	ctx, cancel = context.WithCancel(context.Background())
	var streamed strings.Builder
	res, err = s.GenerateText(ctx, "Once upon a time", runtime.GenerateOptions{MaxTokens: 40, Sampler: runtime.DefaultSampler(),
		OnText: func(text string) error {
			streamed.WriteString(text)
			if strings.Contains(streamed.String(), "little") {
				cancel()
			}
			return nil
		}})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, ", there was a little", res.Text)
	require.Len(t, res.Tokens, 5)

	// A deadline from another goroutine's point of view.
	s.Reset()
	ctx, cancel = context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, err = s.GenerateText(ctx, "Once upon a time", runtime.GenerateOptions{MaxTokens: 40, Sampler: runtime.DefaultSampler()})
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// An error from a callback stops generation with that error.
	s.Reset()
	stop := errors.New("enough")
	res, err = s.GenerateText(context.Background(), "Once upon a time", runtime.GenerateOptions{MaxTokens: 40, Sampler: runtime.DefaultSampler(),
		OnText: func(text string) error { return stop }})
	require.ErrorIs(t, err, stop)
	require.Len(t, res.Tokens, 1)
}

// Sessions of one engine take slots; several generate at once (from
// goroutines) exactly as each would alone.
func TestEngineSessions(t *testing.T) {
	m := loadStories(t, arch.Options{})
	require.Equal(t, 2048, m.ContextLength)
	e := newEngine(t, m, runtime.EngineOptions{Slots: 3, Context: 96})
	require.Equal(t, "reference", e.Backend())
	require.Equal(t, runtime.ProgramConfig{Context: 96, Slots: 3}, e.Program().Config())

	prompts := []string{"Once upon a time", "Tom had a red ball", "The sun was", "Lily"}
	sampler := runtime.SamplerConfig{Temperature: 0.8, TopK: 40, TopP: 0.95, RepeatPenalty: 1.1, Seed: 7}
	solo := make([]*runtime.Result, len(prompts))
	for i, p := range prompts {
		alone := newEngine(t, m, runtime.EngineOptions{Context: 96})
		s, err := alone.NewSession()
		require.NoError(t, err)
		solo[i], err = s.GenerateText(context.Background(), p, runtime.GenerateOptions{MaxTokens: 48, Sampler: sampler, KeepLogits: true})
		require.NoError(t, err)
	}

	var sessions []*runtime.Session
	for range 3 {
		s, err := e.NewSession()
		require.NoError(t, err)
		sessions = append(sessions, s)
	}
	_, err := e.NewSession()
	require.ErrorIs(t, err, runtime.ErrNoFreeSlot)
	require.Equal(t, []int{0, 1, 2}, []int{sessions[0].Slot(), sessions[1].Slot(), sessions[2].Slot()})
	require.NoError(t, sessions[1].Close())
	_, err = sessions[1].Eval([]int32{1})
	require.ErrorIs(t, err, runtime.ErrClosed)
	s, err := e.NewSession()
	require.NoError(t, err)
	require.Equal(t, 1, s.Slot(), "a closed session's slot is reused")
	sessions[1] = s

	// Slot 1 is reused: what the last sequence left there must not matter.
	_, err = sessions[1].Eval([]int32{1, 2, 3})
	require.NoError(t, err)
	sessions[1].Reset()

	var wg sync.WaitGroup
	got := make([]*runtime.Result, len(prompts))
	errs := make([]error, len(prompts))
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = sessions[i].GenerateText(context.Background(), prompts[i], runtime.GenerateOptions{MaxTokens: 48, Sampler: sampler, KeepLogits: true})
		}()
	}
	wg.Wait()
	// The fourth prompt continues in slot 0 after a reset.
	sessions[0].Reset()
	got[3], errs[3] = sessions[0].GenerateText(context.Background(), prompts[3], runtime.GenerateOptions{MaxTokens: 48, Sampler: sampler, KeepLogits: true})
	for i := range prompts {
		require.NoError(t, errs[i])
		require.Equal(t, solo[i].Tokens, got[i].Tokens, "prompt %q", prompts[i])
		require.Equal(t, solo[i].Text, got[i].Text)
		require.Equal(t, solo[i].PromptLogits, got[i].PromptLogits)
		require.Equal(t, solo[i].GenLogits, got[i].GenLogits)
	}

	require.NoError(t, e.Close())
	_, err = e.NewSession()
	require.ErrorIs(t, err, runtime.ErrClosed)
	_, err = sessions[2].Eval([]int32{1})
	require.ErrorIs(t, err, runtime.ErrClosed)

	_, err = m.NewEngine(runtime.EngineOptions{Backend: "nope"})
	require.ErrorContains(t, err, `unknown backend "nope" (available: [goasm reference])`)
}

// A model built with f16 caches runs; NewModel refuses a vocabulary the
// tokenizer cannot use.
func TestNewModel(t *testing.T) {
	m16 := loadStories(t, arch.Options{CacheType: ir.F16})
	dt, err := runtime.CacheTypeOf(m16.Graph)
	require.NoError(t, err)
	require.Equal(t, ir.F16, dt)
	res, _, err := generateText(t, newEngine(t, m16, runtime.EngineOptions{Context: 64}), "Once upon a time", runtime.GenerateOptions{MaxTokens: 10, Sampler: runtime.DefaultSampler()})
	require.NoError(t, err)
	require.Equal(t, ", there was a little girl named Lily", res.Text)
	require.Equal(t, 2048, m16.ContextLength, "llama.context_length of stories260K")

	_, err = runtime.NewModel(m16.Graph, m16.Weights, tokenizer.Vocab{Model: "nope"}, 128)
	require.ErrorContains(t, err, "tokenizer: ")
}

// A prompt longer than UBatch runs as several steps and gives the tokens and
// logits of one whole-prompt step (the CPU backend, stories260K): the
// prompt's logits within 1e-5 of max |logit| (later steps attend over the
// cache in other tile splits), every greedy token equal, also when only the
// last row of each step is computed (no KeepLogits: Session.EvalLast).
func TestGenerateUBatch(t *testing.T) {
	m := loadStories(t, arch.Options{})
	prompt := make([]int32, 45)
	for i := range prompt {
		prompt[i] = int32(1 + (i*37)%500)
	}
	run := func(ub int, keep bool) *runtime.Result {
		e := newEngine(t, m, runtime.EngineOptions{Backend: "goasm", Context: 128})
		s, err := e.NewSession()
		require.NoError(t, err)
		defer s.Close()
		res, err := runtime.Generate(context.Background(), s, prompt, runtime.GenerateOptions{MaxTokens: 16, EOS: -1, Sampler: runtime.DefaultSampler(), KeepLogits: keep, UBatch: ub})
		require.NoError(t, err)
		return res
	}
	whole, chunked := run(len(prompt), true), run(16, true)
	require.Equal(t, whole.Tokens, chunked.Tokens)
	require.Equal(t, whole.Tokens, run(16, false).Tokens)
	require.Len(t, chunked.PromptLogits, len(prompt))
	for i := range whole.PromptLogits {
		require.LessOrEqual(t, golden.RelErr(chunked.PromptLogits[i], whole.PromptLogits[i]), 1e-5, "prompt row %d", i)
	}
}
