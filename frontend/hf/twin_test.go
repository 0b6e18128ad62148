package hf_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/frontend/hf"
	"github.com/minerva-llm/minerva/frontend/safetensors"
	"github.com/minerva-llm/minerva/internal/golden"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
	"github.com/minerva-llm/minerva/runtime"
)

// hfNames maps a GGUF tensor name (after "blk.N.") to its Hugging Face
// name (after "model.layers.N.").
var hfNames = map[string]string{
	"attn_norm.weight":   "input_layernorm.weight",
	"ffn_norm.weight":    "post_attention_layernorm.weight",
	"attn_q.weight":      "self_attn.q_proj.weight",
	"attn_k.weight":      "self_attn.k_proj.weight",
	"attn_v.weight":      "self_attn.v_proj.weight",
	"attn_q.bias":        "self_attn.q_proj.bias",
	"attn_k.bias":        "self_attn.k_proj.bias",
	"attn_v.bias":        "self_attn.v_proj.bias",
	"attn_output.weight": "self_attn.o_proj.weight",
	"attn_q_norm.weight": "self_attn.q_norm.weight",
	"attn_k_norm.weight": "self_attn.k_norm.weight",
	"attn_qkv.weight":    "self_attn.qkv_proj.weight",
	"ffn_gate.weight":    "mlp.gate_proj.weight",
	"ffn_down.weight":    "mlp.down_proj.weight",
}

var classes = map[string]string{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "phi3": "Phi3ForCausalLM"}

// writeTwin writes the Hugging Face directory of a GGUF model, as
// convert_hf_to_gguf.py's inverse: config.json from the metadata, every
// tensor dequantized to F32 under its HF name with HF's [out, in] shape,
// and a llama's q/k rows un-permuted to rotate-half order (README-hf.md).
// rope_freqs.weight is not written: config.json's rope_scaling makes it.
func writeTwin(t *testing.T, path string, ropeScaling map[string]any) string {
	t.Helper()
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	a := f.Architecture()
	u := func(k string) uint64 { v, ok := f.Uint(a + "." + k); require.True(t, ok, k); return v }
	fl := func(k string, def float64) float64 {
		if v, ok := f.Float(a + "." + k); ok {
			return v
		}
		return def
	}
	heads, kv, emb := u("attention.head_count"), u("attention.head_count_kv"), u("embedding_length")
	hd := emb / heads
	if v, ok := f.Uint(a + ".attention.key_length"); ok {
		hd = v
	}
	embd, _ := f.Tensor("token_embd.weight")
	_, untied := f.Tensor("output.weight")
	cfg := map[string]any{
		"architectures": []string{classes[a]}, "model_type": a,
		"hidden_size": emb, "intermediate_size": u("feed_forward_length"), "num_hidden_layers": u("block_count"),
		"num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hd,
		"rms_norm_eps": fl("attention.layer_norm_rms_epsilon", 1e-5), "rope_theta": fl("rope.freq_base", 10000),
		"max_position_embeddings": u("context_length"), "vocab_size": embd.Dims[1],
		"tie_word_embeddings": !untied, "hidden_act": "silu", "torch_dtype": "float32",
	}
	if a == "phi3" {
		cfg["sliding_window"] = u("attention.sliding_window")
	}
	if ropeScaling != nil {
		cfg["rope_scaling"] = ropeScaling
	}
	var ts []safetensors.WriteTensor
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if ti.Name == "rope_freqs.weight" {
			continue
		}
		vals := make([]float32, ti.Elements())
		require.NoError(t, quant.Dequantize(ti.Type, f.TensorData(ti), vals))
		shape := make([]uint64, len(ti.Dims))
		for j, d := range ti.Dims {
			shape[len(shape)-1-j] = d
		}
		name := ti.Name
		switch {
		case name == "token_embd.weight":
			name = "model.embed_tokens.weight"
		case name == "output_norm.weight":
			name = "model.norm.weight"
		case name == "output.weight":
			name = "lm_head.weight"
		case strings.HasPrefix(name, "blk."):
			rest := name[len("blk."):]
			dot := strings.IndexByte(rest, '.')
			layer, sub := rest[:dot], rest[dot+1:]
			hfSub, ok := hfNames[sub]
			if sub == "ffn_up.weight" {
				hfSub, ok = "mlp.up_proj.weight", true
				if a == "phi3" {
					hfSub = "mlp.gate_up_proj.weight"
				}
			}
			require.True(t, ok, "no HF name for %s", name)
			if a == "llama" && (sub == "attn_q.weight" || sub == "attn_k.weight") {
				n := heads
				if sub == "attn_k.weight" {
					n = kv
				}
				vals = unpermute(vals, int(n), int(hd), int(shape[1]))
			}
			name = "model.layers." + layer + "." + hfSub
		}
		data := make([]byte, 4*len(vals))
		for j, v := range vals {
			binary.LittleEndian.PutUint32(data[4*j:], math.Float32bits(v))
		}
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: shape, Data: data})
	}
	dir := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(path), ".gguf"))
	require.NoError(t, os.Mkdir(dir, 0o755))
	cj, err := json.MarshalIndent(cfg, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), cj, 0o644))
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, map[string]string{"format": "pt"}, ts, 8))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), buf.Bytes(), 0o644))
	return dir
}

// unpermute is README-hf.md's GGUF → HF row order for a q/k matrix of n
// heads of d rows: W.reshape(n, d/2, 2, in).swapaxes(1, 2).
func unpermute(w []float32, n, d, in int) []float32 {
	out := make([]float32, len(w))
	for h := 0; h < n; h++ {
		for i := 0; i < d/2; i++ {
			for j := 0; j < 2; j++ {
				src := h*d + 2*i + j
				dst := h*d + j*(d/2) + i
				copy(out[dst*in:(dst+1)*in], w[src*in:(src+1)*in])
			}
		}
	}
	return out
}

// logits runs tokens through a model's graph on the interpreter.
func logits(t *testing.T, m *arch.Model, tokens []int32) [][]float32 {
	t.Helper()
	s, err := runtime.NewSession(m.Graph, m.Weights, len(tokens))
	require.NoError(t, err)
	rows, err := s.Eval(tokens)
	require.NoError(t, err)
	return rows
}

// TestTwinsOfEveryFamily: a directory holding a GGUF fixture's weights as
// F32 under HF names (q/k un-permuted for llama) builds the graph the GGUF
// builds, and gives the GGUF's logits on the interpreter, for each family:
// llama with Llama 3.1 rope_scaling (the factors made from config.json) and
// tied embeddings, qwen2 (biases, tied), qwen3 (q/k norms, head_dim ≠
// hidden/heads) and phi3 (fused qkv and gate/up, sliding window). The
// quantized GGUF weights dequantize exactly to the twin's F32 values, so
// the products are the same; only the order of the sums within a llama
// head differs.
func TestTwinsOfEveryFamily(t *testing.T) {
	llama3 := map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
	for _, c := range []struct {
		file    string
		scaling map[string]any
	}{
		{"models/gguf/synthetic/llama31-p-mix.gguf", llama3},
		{"models/gguf/synthetic/qwen2-p-mix.gguf", nil},
		{"models/gguf/synthetic/qwen3-p-mix.gguf", nil},
		{"models/gguf/synthetic/phi3-p-mix.gguf", nil},
		{"models/gguf/stories260K.gguf", nil},
	} {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			path := shared.Path(t, c.file)
			dir := writeTwin(t, path, c.scaling)
			f, err := gguf.Open(path)
			require.NoError(t, err)
			defer f.Close()
			want, err := arch.Load(f, arch.Options{})
			require.NoError(t, err)
			d, err := hf.Open(dir, os.Open)
			require.NoError(t, err)
			defer d.Close()
			got, err := arch.LoadFile(d, arch.Options{})
			require.NoError(t, err)
			wc, gc := want.Config, got.Config
			wc.RopeBase, gc.RopeBase = 0, 0 // f32 in GGUF, f64 from JSON: same value
			require.Equal(t, wc, gc)
			require.Empty(t, got.Vocab.Tokens, "no tokenizer.json: token ids only")

			// The rope factors made from config.json are the file's.
			ff := func(m *arch.Model) []float64 {
				for _, v := range m.Graph.Values {
					if x := v.Attrs.Floats("freq_factors"); x != nil {
						return x
					}
				}
				return nil
			}
			if c.scaling != nil {
				require.NotNil(t, ff(want))
				require.InDeltaSlice(t, ff(want), ff(got), 1e-6)
			} else {
				require.Nil(t, ff(got))
			}

			tokens := []int32{1, 5, 20, 100, 7, 3, 42, 9, 11, 13, 200, 300}
			a, b := logits(t, want, tokens), logits(t, got, tokens)
			worst := 0.0
			for i := range a {
				worst = max(worst, golden.RelErr(b[i], a[i]))
			}
			t.Logf("%s: directory vs GGUF, max relative logits difference %.3g (tied output %v, %s)", filepath.Base(c.file), worst, gc.TiedOutput, gc.Arch)
			require.LessOrEqual(t, worst, 1e-6)
		})
	}
}

// TestLlama3Factors: the factors for README-archs.md's llama31 fixture
// (base 5e5, head_dim 32, factor 8, low 1, high 4, original context 64).
func TestLlama3Factors(t *testing.T) {
	dir := writeTwin(t, shared.Path(t, "models/gguf/synthetic/llama31-p-mix.gguf"),
		map[string]any{"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 64})
	d, err := hf.Open(dir, os.Open)
	require.NoError(t, err)
	defer d.Close()
	b, err := d.WeightBytes("rope_freqs.weight")
	require.NoError(t, err)
	var got []string
	for i := 0; i < len(b); i += 4 {
		got = append(got, fmt.Sprintf("%.5g", math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))))
	}
	require.Equal(t, "1 1 2.4423 8 8 8 8 8 8 8 8 8 8 8 8 8", strings.Join(got, " "))
	ti, ok := d.Tensor("rope_freqs.weight")
	require.True(t, ok)
	require.Equal(t, ir.F32, ti.Type)
}
