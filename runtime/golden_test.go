package runtime_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/internal/golden"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/tokenizer"
)

// openModel loads a golden case's model and tokenizer.
func openModel(t *testing.T, path string) (*arch.Model, *tokenizer.Tokenizer) {
	t.Helper()
	f, err := gguf.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	m, err := arch.Load(f, arch.Options{})
	require.NoError(t, err)
	tok, err := tokenizer.New(m.Vocab)
	require.NoError(t, err)
	return m, tok
}

// TestGoldenE2E runs every llama case of ../shared/golden/e2e on the
// reference interpreter: the prompt tokenizes to the golden ids, the logits
// of every prompt position and of the first generated steps (teacher forced
// with the golden tokens) are within the README's tolerance for the model's
// weight type, and free-running greedy generation gives the golden tokens
// (with the near-tie rule for F16 and quantized weights).
func TestGoldenE2E(t *testing.T) {
	errs := map[string]float64{} // worst relative logits error per weight type, for the log
	for _, c := range golden.Cases(t, "index.json") {
		t.Run(c.Name, func(t *testing.T) {
			m, tok := openModel(t, c.ModelPath)
			tol := c.Tolerance()
			if c.PromptText != nil {
				require.Equal(t, c.PromptTokens, tok.Encode(*c.PromptText, c.AddBOS), "prompt tokenization")
			}

			// Teacher forcing: prompt in one step, then the golden tokens one by one.
			s, err := runtime.NewSession(m.Graph, m.Weights, len(c.PromptTokens)+c.NGen)
			require.NoError(t, err)
			worst := c.RequireTeacherForced(t, s, tol)
			kind := strings.Join(c.ModelInfo.MatrixTypes, "+")
			errs[kind] = max(errs[kind], worst)
			t.Logf("%s: worst logits error %.3g (tolerance %.0e)", c.Name, worst, tol)

			// Free-running greedy generation.
			s, err = runtime.NewSession(m.Graph, m.Weights, len(c.PromptTokens)+c.NGen)
			require.NoError(t, err)
			res, err := runtime.Generate(context.Background(), s, c.PromptTokens, runtime.GenerateOptions{
				MaxTokens: c.NGen, Sampler: runtime.DefaultSampler(), EOS: tok.EOS(), IgnoreEOS: true,
			})
			require.NoError(t, err)
			n, err := c.CompareTokens(res.Tokens, tol)
			require.NoError(t, err)
			if n == len(c.GenTokens) {
				want, err := hex.DecodeString(c.GenTextHex)
				require.NoError(t, err)
				require.Equal(t, string(want), tok.Decode(res.Tokens), "generated text")
			}
		})
	}
	var summary []string
	for k, v := range errs {
		summary = append(summary, fmt.Sprintf("%s %.3g", k, v))
	}
	t.Logf("worst logits error by weight type: %s", strings.Join(summary, ", "))
}
