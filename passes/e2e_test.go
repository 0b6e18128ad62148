package passes

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/internal/golden"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/synth"
)

// e2eOpen loads a GGUF model file; the file stays mapped until the test ends.
func e2eOpen(t *testing.T, path string) *arch.Model {
	t.Helper()
	f, err := gguf.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	m, err := arch.Load(f, arch.Options{})
	require.NoError(t, err)
	return m
}

// TestGoldenE2EFused runs every llama case of ../shared/golden/e2e on the
// model's graph and on the fully fused graph: the prompt in one step, then
// greedy generation of n_gen tokens. The fused graph must choose exactly the
// same tokens, and its logits (every prompt position and the first 8
// generated steps) must be within 1e-5·max of the unfused graph's. The fused
// tokens are also held to the reference engine's, by the README's rule.
func TestGoldenE2EFused(t *testing.T) {
	list := testPipeline(t)
	worst := map[string]float64{}
	for _, c := range golden.Cases(t, "index.json") {
		t.Run(c.Name, func(t *testing.T) {
			m := e2eOpen(t, c.ModelPath)
			fused := cloneGraph(t, m.Graph)
			_, err := Run(fused, list, Options{VerifyEach: true})
			require.NoError(t, err)
			ctx := len(c.PromptTokens) + c.NGen
			generate := func(g *ir.Graph) *runtime.Result {
				s, err := runtime.NewSession(g, m.Weights, ctx)
				require.NoError(t, err)
				res, err := runtime.Generate(context.Background(), s, c.PromptTokens, runtime.GenerateOptions{
					MaxTokens: c.NGen, Sampler: runtime.DefaultSampler(), EOS: -1, IgnoreEOS: true, KeepLogits: true,
				})
				require.NoError(t, err)
				return res
			}
			ref, got := generate(m.Graph), generate(fused)
			require.Equal(t, ref.Tokens, got.Tokens, "greedy tokens of the fused graph")
			require.Len(t, got.PromptLogits, len(c.PromptTokens))
			e2eWorst := 0.0
			for i, r := range ref.PromptLogits {
				e := relErr(got.PromptLogits[i], r)
				require.LessOrEqualf(t, e, goldenTol, "prompt position %d: fused logits differ by %.3g·max", i, e)
				e2eWorst = max(e2eWorst, e)
			}
			for i := 0; i < min(8, len(ref.GenLogits)); i++ {
				e := relErr(got.GenLogits[i], ref.GenLogits[i])
				require.LessOrEqualf(t, e, goldenTol, "generated step %d: fused logits differ by %.3g·max", i, e)
				e2eWorst = max(e2eWorst, e)
			}
			_, err = c.CompareTokens(got.Tokens, c.Tolerance())
			require.NoError(t, err, "fused tokens against the reference engine")
			kind := strings.Join(c.ModelInfo.MatrixTypes, "+")
			worst[kind] = max(worst[kind], e2eWorst)
			t.Logf("%s: %d ops → %d ops, tokens equal, largest logits difference %.3g·max", c.Name,
				e2eOpCount(m.Graph), e2eOpCount(fused), e2eWorst)
		})
	}
	var summary []string
	for k, v := range worst {
		summary = append(summary, fmt.Sprintf("%s %.3g", k, v))
	}
	sort.Strings(summary)
	t.Logf("largest fused-vs-unfused logits difference by weight type: %s", strings.Join(summary, ", "))
}

func e2eOpCount(g *ir.Graph) int {
	n := 0
	for _, v := range g.Values {
		if !v.Op.IsLeaf() {
			n++
		}
	}
	return n
}

var e2eLayerName = regexp.MustCompile(`^(?:blk|cache)\.(\d+)\.`)

// e2eLayers assigns every compute op of a llama graph to a layer: the layer
// of a weight or cache it takes directly (blk.N.*, cache.N.*) or of a
// load-time constant made from such weights (a merged or rescaled weight);
// else -1 ("outside the layers") if it takes another weight or a constant
// made from one (token_embd, output_norm, output); else the latest layer
// among its operands. Constants count as ops of their layer.
func e2eLayers(g *ir.Graph) map[*ir.Value]int {
	consts := ir.ConstValues(g)
	layer := map[*ir.Value]int{}
	for _, v := range g.Values {
		if v.Op.IsLeaf() {
			if m := e2eLayerName.FindStringSubmatch(v.Name()); m != nil {
				layer[v], _ = strconv.Atoi(m[1])
			} else if v.Op == ir.OpWeight {
				layer[v] = -1
			}
			continue
		}
		own, global, latest := -1, false, -1
		for _, a := range v.Args {
			l, ok := layer[a]
			switch {
			case !ok:
			case (a.Op.IsLeaf() || consts[a]) && l >= 0:
				own = max(own, l)
			case a.Op.IsLeaf() || consts[a]:
				global = true
			default:
				latest = max(latest, l)
			}
		}
		switch {
		case own >= 0:
			layer[v] = own
		case global:
			layer[v] = -1
		default:
			layer[v] = latest
		}
	}
	for v := range layer {
		if v.Op.IsLeaf() {
			delete(layer, v)
		}
	}
	return layer
}

// e2eLayerCounts counts ops by layer (-1: outside the layers) with the same
// extra keys as fusedCounts, plus "const" for load-time constants.
func e2eLayerCounts(g *ir.Graph) map[int]map[string]int {
	consts := ir.ConstValues(g)
	out := map[int]map[string]int{}
	for v, l := range e2eLayers(g) {
		if out[l] == nil {
			out[l] = map[string]int{}
		}
		c := out[l]
		c["ops"]++
		c[string(v.Op)]++
		if consts[v] {
			c["const"]++
		}
		if v.Op == ir.OpFusedMatMul {
			if v.Attrs.Int("residual", 0) == 1 {
				c["fused_matmul+residual"]++
			}
			if v.Attrs.Int("norm", 0) == 1 {
				c["fused_matmul+norm"]++
			}
		}
		if v.Op == ir.OpSwiGLU && v.Attrs.Int("norm", 0) == 1 {
			c["swiglu+norm"]++
		}
		if v.Op == ir.OpQKVRoPE && v.Attrs.Int("norm", 0) == 1 {
			c["qkv_rope+norm"]++
		}
	}
	return out
}

// e2eOpList formats a layer's op counts without the bookkeeping keys.
func e2eOpList(c map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(c) {
		if k == "ops" || k == "const" || strings.Contains(k, "+") {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s×%d", k, c[k]))
	}
	return strings.Join(parts, " ")
}

func sortedKeys(c map[string]int) []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// tinyLlamaShape returns the graph of a TinyLlama-1.1B-shaped model written
// by package synth: 22 layers, width 2048, 32 heads over 4 KV heads, FFN
// 5632, Q4_0 matrices. Writing all 22 layers of random weights takes about a
// minute, so synth writes one layer and the file is extended to 22 by
// repeating that layer's tensors under each layer's names (block_count
// updated); every tensor, name, shape, dtype and metadata key is what synth
// writes for 22 layers, only the values repeat. The graph is compiled, not
// run.
func tinyLlamaShape(t *testing.T) *ir.Graph {
	t.Helper()
	tok, sc, ty := synth.Vocab()
	spec := synth.Llama{Name: "tinyllama-shape", NLayer: 1, NEmbd: 2048, NHead: 32, NHeadKV: 4, NFF: 5632,
		ContextLength: 2048, RopeBase: 10000, RMSEps: 1e-5, Matrix: ir.Q4_0, Tokens: tok, Scores: sc, Types: ty}
	const nLayer = 22
	var one bytes.Buffer
	_, err := spec.Write(&one)
	require.NoError(t, err)
	f1, err := gguf.Parse(one.Bytes())
	require.NoError(t, err)

	w := gguf.NewWriter(f1.Version)
	for _, kv := range f1.KV {
		if kv.Key == "llama.block_count" {
			w.AddKV(kv.Key, gguf.Uint32(nLayer))
			continue
		}
		w.AddKV(kv.Key, kv.Value)
	}
	for i := range f1.Tensors {
		ti := &f1.Tensors[i]
		if !strings.HasPrefix(ti.Name, "blk.0.") {
			require.NoError(t, w.AddTensor(ti.Name, ti.Type, ti.Dims, f1.TensorData(ti)))
			continue
		}
		for l := 0; l < nLayer; l++ {
			name := fmt.Sprintf("blk.%d.%s", l, strings.TrimPrefix(ti.Name, "blk.0."))
			require.NoError(t, w.AddTensor(name, ti.Type, ti.Dims, f1.TensorData(ti)))
		}
	}
	path := filepath.Join(t.TempDir(), "tinyllama-shape.gguf")
	out, err := os.Create(path)
	require.NoError(t, err)
	bw := bufio.NewWriterSize(out, 1<<20)
	_, err = w.WriteTo(bw)
	require.NoError(t, err)
	require.NoError(t, bw.Flush())
	require.NoError(t, out.Close())
	m := e2eOpen(t, path)
	require.Equal(t, nLayer, m.Config.NLayer)
	require.Equal(t, 64, m.Config.HeadDim)
	return m.Graph
}

// TestFusionCounts compiles stories260K and a TinyLlama-shaped graph and
// logs, per layer, the ops before and after the pipeline and the memory
// plan's arena against the naive sum of intermediates. Every layer must
// fuse to one qkv_rope, one swiglu, one flash_attention and two residual
// fused_matmuls (attention output and FFN down), with no rmsnorm left.
func TestFusionCounts(t *testing.T) {
	models := []struct {
		name  string
		graph func(t *testing.T) *ir.Graph
	}{
		{"stories260K", func(t *testing.T) *ir.Graph {
			return e2eOpen(t, shared.Path(t, "models/gguf/stories260K.gguf")).Graph
		}},
		{"tinyllama-shape", tinyLlamaShape},
	}
	list := testPipeline(t)
	for _, model := range models {
		t.Run(model.name, func(t *testing.T) {
			g := model.graph(t)
			before := e2eLayerCounts(g)
			fused := cloneGraph(t, g)
			_, err := Run(fused, list, Options{VerifyEach: true})
			require.NoError(t, err)
			after := e2eLayerCounts(fused)
			nLayer := len(before) - 1
			require.Positive(t, nLayer)
			for l := -1; l < nLayer; l++ {
				b, a := before[l], after[l]
				what := fmt.Sprintf("layer %d", l)
				if l < 0 {
					what = "outside the layers"
				}
				t.Logf("%s %s: %d ops → %d ops (%d per step + %d load-time constants)",
					model.name, what, b["ops"], a["ops"], a["ops"]-a["const"], a["const"])
				if l <= 0 {
					t.Logf("    before: %s\n    after:  %s", e2eOpList(b), e2eOpList(a))
				}
				if l < 0 {
					continue
				}
				require.Equal(t, 1, a["qkv_rope"], "%s: qkv_rope", what)
				require.Equal(t, 1, a["qkv_rope+norm"], "%s: qkv_rope with the attention norm", what)
				require.Equal(t, 1, a["swiglu"], "%s: swiglu", what)
				require.Equal(t, 1, a["swiglu+norm"], "%s: swiglu with the FFN norm", what)
				require.Equal(t, 1, a["flash_attention"], "%s: flash_attention", what)
				require.Equal(t, 2, a["fused_matmul"], "%s: fused_matmul", what)
				require.Equal(t, 2, a["fused_matmul+residual"], "%s: residual fused_matmul", what)
				for _, op := range []string{"rmsnorm", "matmul", "rope", "kvwrite", "attention", "silu", "add"} {
					require.Zero(t, a[op], "%s: %s left", what, op)
				}
				if l > 0 {
					require.Equal(t, after[0], a, "%s fuses unlike layer 0", what)
				}
			}
			t.Logf("%s: %d layers, %d ops → %d ops in all", model.name, nLayer, e2eOpCount(g), e2eOpCount(fused))
			arena, naive := fused.Attrs.Int("arena_bytes_per_token", -1), fused.Attrs.Int("naive_bytes_per_token", -1)
			require.Positive(t, arena)
			require.LessOrEqual(t, arena, naive)
			t.Logf("%s: activation arena %d bytes per token, naive sum of intermediates %d bytes per token (%.1f×)",
				model.name, arena, naive, float64(naive)/float64(arena))
			require.NoError(t, CheckMemoryPlan(fused))
		})
	}
}
