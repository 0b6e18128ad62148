package hf_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/hf"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/plan"
)

// variant copies a shared model directory and edits its config.json and
// generation_config.json (nil: unchanged).
func variant(t *testing.T, rel string, cfg, gen func(m map[string]any)) string {
	t.Helper()
	src := shared.Path(t, rel)
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	require.NoError(t, os.Mkdir(dst, 0o755))
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		edit := map[string]func(map[string]any){"config.json": cfg, "generation_config.json": gen}[e.Name()]
		if edit != nil {
			var m map[string]any
			require.NoError(t, json.Unmarshal(b, &m))
			edit(m)
			b, err = json.Marshal(m)
			require.NoError(t, err)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
	return dst
}

func build(t *testing.T, dir string) (*hf.Model, *arch.Model) {
	t.Helper()
	d, err := hf.Open(dir, os.Open)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	m, err := arch.LoadFile(d, arch.Options{})
	require.NoError(t, err)
	return d, m
}

// TestConfigKeys: the config.json keys that change the graph, each read
// the way transformers reads it.
func TestConfigKeys(t *testing.T) {
	const dir = "models/hf/stories260K"
	t.Run("architectures or model_type", func(t *testing.T) {
		_, m := build(t, variant(t, dir, func(m map[string]any) { delete(m, "architectures") }, nil))
		require.Equal(t, "llama", m.Config.Arch)
		d, m := build(t, variant(t, dir, func(m map[string]any) { m["architectures"] = []string{"MistralForCausalLM"} }, nil))
		require.Equal(t, "MistralForCausalLM", d.Class)
		require.Equal(t, "llama", m.Config.Arch)
	})
	t.Run("a sliding window caps the context", func(t *testing.T) {
		// Within the window a sliding and a full attention are the same.
		_, m := build(t, variant(t, dir, func(m map[string]any) {
			m["architectures"] = []string{"MistralForCausalLM"}
			m["sliding_window"] = 64
		}, nil))
		require.Equal(t, 64, m.Config.ContextLength)
		_, m = build(t, variant(t, dir, func(m map[string]any) { m["sliding_window"] = nil }, nil))
		require.Equal(t, 2048, m.Config.ContextLength)
		_, m = build(t, variant(t, "models/hf/qwen3-p-bf16", func(m map[string]any) { m["sliding_window"] = 128 }, nil))
		require.Equal(t, 40960, m.Config.ContextLength, "use_sliding_window false: no window")
		_, m = build(t, variant(t, "models/hf/qwen3-p-bf16", func(m map[string]any) {
			m["sliding_window"] = 128
			m["use_sliding_window"] = true
		}, nil))
		require.Equal(t, 128, m.Config.ContextLength)
	})
	t.Run("tied embeddings", func(t *testing.T) {
		// transformers ties lm_head to the embedding whatever the file
		// holds under the name.
		d, m := build(t, variant(t, dir, func(m map[string]any) { m["tie_word_embeddings"] = true }, nil))
		require.True(t, m.Config.TiedOutput)
		require.NotContains(t, d.TensorNames(), "output.weight")
		_, m = build(t, variant(t, dir, func(m map[string]any) { delete(m, "tie_word_embeddings") }, nil))
		require.False(t, m.Config.TiedOutput, "LlamaConfig's default")
	})
	t.Run("rope", func(t *testing.T) {
		_, m := build(t, variant(t, dir, func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"type": "linear", "factor": 4}
		}, nil))
		require.Equal(t, 0.25, m.Config.RopeFreqScale)
		_, m = build(t, variant(t, dir, func(m map[string]any) {
			delete(m, "rope_theta")
			m["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 500000.0}
		}, nil))
		require.Equal(t, 500000.0, m.Config.RopeBase)
		_, m = build(t, variant(t, dir, func(m map[string]any) { delete(m, "rope_theta") }, nil))
		require.Equal(t, 10000.0, m.Config.RopeBase)
		for _, v := range m.Graph.Values {
			if mode, ok := v.Attrs["mode"]; ok {
				require.Equal(t, "neox", mode, "rotate-half rows: NEOX RoPE")
			}
		}
	})
	t.Run("defaults", func(t *testing.T) {
		_, m := build(t, variant(t, "models/hf/qwen3-p-bf16", func(m map[string]any) {
			delete(m, "rms_norm_eps")
			delete(m, "max_position_embeddings")
		}, nil))
		require.InDelta(t, 1e-6, m.Config.RMSEps, 1e-12)
		require.Equal(t, 32768, m.Config.ContextLength)
	})
}

// TestGeneration: generation_config.json's ids and sampling defaults.
func TestGeneration(t *testing.T) {
	d, _ := build(t, shared.Path(t, "models/hf/llama-2-tiny-random"))
	g := d.Generation
	require.True(t, g.DoSample)
	require.Equal(t, []int32{2}, g.EOS)
	require.Equal(t, int32(1), g.BOS)
	require.Equal(t, int32(0), g.PAD)
	require.Equal(t, 4096, g.MaxLength)
	require.Equal(t, plan.Sampling{Temperature: 0.6, TopK: 50, TopP: 0.9, RepeatPenalty: 1}, g.Sampling())
	require.Contains(t, d.ChatTemplate(), "<|user|>")

	d, _ = build(t, variant(t, "models/hf/stories260K", nil, func(m map[string]any) {
		m["eos_token_id"] = []int{5, 7}
		m["do_sample"] = false
		m["temperature"] = 0.7
	}))
	require.Equal(t, []int32{5, 7}, d.Generation.EOS)
	require.Equal(t, []int32{5, 7, 2}, d.EOS(), "and the tokenizer's EOS")
	require.Equal(t, plan.Sampling{TopP: 1, RepeatPenalty: 1}, d.Generation.Sampling(), "greedy unless do_sample")

	// Without generation_config.json, config.json's eos_token_id.
	dir := variant(t, "models/hf/stories260K", func(m map[string]any) { m["eos_token_id"] = []int{3, 2} }, nil)
	require.NoError(t, os.Remove(filepath.Join(dir, "generation_config.json")))
	d, _ = build(t, dir)
	require.Equal(t, []int32{3, 2}, d.Generation.EOS)
	require.False(t, slices.Contains(d.EOS(), 4))
}

// TestWeightsInPlace: float matrices are served from the shard's mapping
// (no copy), 1-D gains widened to F32 exactly; MLX data at odd offsets
// comes out bytewise.
func TestWeightsInPlace(t *testing.T) {
	d, _ := build(t, shared.Path(t, "models/hf/stories260K-bf16"))
	q, err := d.WeightBytes("blk.0.attn_q.weight")
	require.NoError(t, err)
	tn, f, ok := d.Tensors.Tensor("model.layers.0.self_attn.q_proj.weight")
	require.True(t, ok)
	require.Same(t, &f.Data(tn)[0], &q[0], "the mapped bytes themselves")
	g, err := d.WeightBytes("blk.0.attn_norm.weight")
	require.NoError(t, err)
	tn, f, _ = d.Tensors.Tensor("model.layers.0.input_layernorm.weight")
	raw := f.Data(tn)
	require.Len(t, g, 2*len(raw))
	for i := 0; i < len(raw)/2; i++ {
		require.Equal(t, []byte{0, 0, raw[2*i], raw[2*i+1]}, g[4*i:4*i+4], "bf16 → f32 appends 16 zero bits")
	}
	_, err = d.WeightBytes("no.such.weight")
	require.ErrorContains(t, err, `tensor "no.such.weight" is not in the model directory`)
	require.NoError(t, d.Close())
	_, err = d.WeightBytes("blk.0.attn_q.weight")
	require.ErrorContains(t, err, "the model directory was closed")
}
