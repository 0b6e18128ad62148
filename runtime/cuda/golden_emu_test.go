//go:build linux

package cuda

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	cudagen "github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/internal/golden"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime"
)

// The golden end-to-end cases through the whole CUDA runtime — NVRTC
// compile, module load, weight upload, prefill launches, the decode CUDA
// graph, logits copies — against the emulated driver (emuDriver), whose
// kernels run on the CPU. CI runs emuGoldenDefault (one case per kernel
// path: F32 and Q4_0 llama, both gpt-oss fixtures, qwen3's head norms and
// phi3's fused weights and window);
// MINERVA_CUDAEMU_GOLDEN=all runs every case.
var emuGoldenDefault = []string{
	"stories260K__once_upon_a_time",
	"llama-p-Q4_0__once_upon_a_time",
	"llama-p-Q5_0__once_upon_a_time",
	"gptoss-g1-mxfp4__once_upon_a_time",
	"gptoss-g1-q8emb__once_upon_a_time",
	"qwen3-p-mix__once_upon_a_time",
	"phi3-p-mix__once_upon_a_time",
}

func TestGoldenE2EEmulated(t *testing.T) {
	opts := emuDriver(t)
	all := os.Getenv("MINERVA_CUDAEMU_GOLDEN") == "all"
	goldenE2E(t, opts, goldenIndexes, func(c *golden.Case) bool { return all || contains(emuGoldenDefault, c.Name) })
}

// goldenIndexes are the golden e2e indexes the CUDA program is checked
// against, emulated and on a device.
var goldenIndexes = []string{"index.json", "index-gptoss.json", "index-archs.json"}

// goldenE2E runs the golden cases that want accepts through the CUDA
// program on whichever driver the environment loads, from the indexes
// (index.json, index-gptoss.json, index-archs.json) named.
func goldenE2E(t *testing.T, opts runtime.Options, indexes []string, want func(*golden.Case) bool) {
	for _, index := range indexes {
		for _, c := range golden.Cases(t, index) {
			if !want(c) {
				continue
			}
			t.Run(c.Name, func(t *testing.T) {
				// The README's bounds. Only the Q4_0, Q5_0 and Q8_0 products
				// round their activations to 8 bits as the reference engine
				// does before every quantized product (and with Q8_0's recipe
				// where gpt-oss's reference uses Q8_2's); the others multiply
				// float32 activations, so those cases sit near the
				// interpreter's error, not at the CPU backend's. A llama
				// fixture whose every quantized weight rounds is held to 1e-3
				// (issue 20 asks 1e-2; measured ≤ 2.1e-7, emulated and on an
				// H200).
				tol := c.Tolerance()
				m := fusedModel(t, c.ModelPath)
				switch index {
				case "index-gptoss.json":
					tol = c.GPTOSSTolerance(false) // float activations, as the reference interpreter
				case "index-archs.json":
					tol = c.ArchsTolerance()
				default:
					if allProductsRound(m.Graph) {
						tol = min(tol, 1e-3)
					}
				}
				ctx := len(c.PromptTokens) + c.NGen + 1
				p, err := backend{}.Compile(m.Graph, m.Weights, runtime.ProgramConfig{Context: ctx, Options: opts})
				require.NoError(t, err)
				defer p.Close()

				s, err := runtime.NewProgramSession(p, 0)
				require.NoError(t, err)
				worst := c.RequireTeacherForced(t, s, tol)
				t.Logf("%s: worst logits error %.3g (tolerance %.0e)", c.Name, worst, tol)

				s.Reset()
				res, err := runtime.Generate(context.Background(), s, c.PromptTokens, runtime.GenerateOptions{
					MaxTokens: c.NGen, Sampler: runtime.DefaultSampler(), EOS: -1, IgnoreEOS: true,
				})
				require.NoError(t, err)
				n, err := c.CompareTokens(res.Tokens, tol)
				require.NoError(t, err)
				t.Logf("%s: %d/%d greedy tokens equal", c.Name, n, c.NGen)
			})
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// allProductsRound reports whether every quantized weight of g is of a dtype
// whose products round their activations as the reference engine does
// (codegen/cuda RoundsActivations), so that the CUDA program should match
// the reference to float rounding.
func allProductsRound(g *ir.Graph) bool {
	found := false
	for _, v := range g.Values {
		if v.Op != ir.OpWeight || !v.Type.DType.Quantized() {
			continue
		}
		if !cudagen.RoundsActivations(v.Type.DType) {
			return false
		}
		found = true
	}
	return found
}
