package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/internal/golden"
	"github.com/minerva-llm/minerva/passes"
	"github.com/minerva-llm/minerva/runtime"
)

// TestGoldenHFGPTOSS runs the gpt-oss cases of ../shared/golden/e2e-hf
// (index-gptoss.json: G1 as openai's layout, MXFP4 experts with gate and up
// interleaved and BF16 rest, and as mlx-lm's MXFP4-Q8 layout, experts
// stacked per projection and 8-bit affine attention, router, embedding and
// output) from their directories on every backend of gptossBackends, as
// TestGoldenGPTOSS runs the GGUF cases: logits within README-gptoss.md's
// bound, row by row the README's float64 implementation with the same
// settings (its validation record), and greedy tokens up to the near-tie
// rule. The directories have no tokenizer: the cases' prompt ids are used.
func TestGoldenHFGPTOSS(t *testing.T) {
	cases := golden.HFCases(t, "index-gptoss.json")
	for _, be := range gptossBackends {
		t.Run(be.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.Name, func(t *testing.T) {
					tol := c.GPTOSSTolerance(be.emulating)
					require.NotZero(t, tol, "no tolerance for the fixture of %s", c.Name)
					src, err := frontend.Open(c.Dir)
					require.NoError(t, err)
					t.Cleanup(func() { src.Close() })
					require.Equal(t, frontend.FormatHF, src.Format)
					m, err := src.Build(arch.Options{VCacheType: be.vcache})
					require.NoError(t, err)
					require.Equal(t, "gpt-oss", m.Config.Arch)
					if be.fused {
						list, err := passes.Pipeline()
						require.NoError(t, err)
						_, err = passes.Run(m.Graph, list, passes.Options{VerifyEach: true})
						require.NoError(t, err)
					}
					model := &runtime.Model{Graph: m.Graph, Weights: m.Weights, ContextLength: m.Config.ContextLength}
					ctx := len(c.PromptTokens) + c.NGen

					worst := c.RequireTeacherForced(t, newSession(t, model, be.backend, ctx), tol)
					t.Logf("%s on %s: worst logits error %.3g (tolerance %.0e)", c.Name, be.name, worst, tol)
					requireSameAsPlainFloat(t, c.Case, be.validation, newSession(t, model, be.backend, ctx))

					res, err := runtime.Generate(context.Background(), newSession(t, model, be.backend, ctx), c.PromptTokens, runtime.GenerateOptions{
						MaxTokens: c.NGen, Sampler: runtime.DefaultSampler(), EOS: -1, IgnoreEOS: true,
					})
					require.NoError(t, err)
					n, err := c.CompareTokens(res.Tokens, tol)
					require.NoError(t, err)
					t.Logf("%s on %s: greedy tokens equal for %d of %d steps", c.Name, be.name, n, len(c.GenTokens))
				})
			}
		})
	}
}
