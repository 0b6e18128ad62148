package frontend_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/internal/shared"
)

// copyModelDir copies a shared model directory's files into a fresh one.
func copyModelDir(t *testing.T, rel string) string {
	t.Helper()
	src := shared.Path(t, rel)
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	require.NoError(t, os.Mkdir(dst, 0o755))
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		copyFile(t, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
	}
	return dst
}

// editJSON rewrites a JSON file of the directory through edit.
func editJSON(t *testing.T, path string, edit func(m map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	edit(m)
	b, err = json.MarshalIndent(m, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// editHeader rewrites a safetensors file's header through edit, keeping
// its data bytes as they are (data_offsets are relative to the data).
func editHeader(t *testing.T, path string, edit func(h map[string]map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	n := binary.LittleEndian.Uint64(b)
	var h map[string]map[string]any
	require.NoError(t, json.Unmarshal(b[8:8+n], &h))
	edit(h)
	hb, err := json.Marshal(h)
	require.NoError(t, err)
	var out bytes.Buffer
	var l [8]byte
	binary.LittleEndian.PutUint64(l[:], uint64(len(hb)))
	out.Write(l[:])
	out.Write(hb)
	out.Write(b[8+n:])
	require.NoError(t, os.WriteFile(path, out.Bytes(), 0o644))
}

// TestCorruptDirectories: each damaged or inconsistent model directory,
// built from a real one, is one line naming the file at fault (and, where
// there is one, the tensor and byte offset), never a panic; Open of the
// directory fails, or (for what only the graph can tell) Build does.
func TestCorruptDirectories(t *testing.T) {
	const (
		sharded   = "models/hf/stories260K-bf16"
		single    = "models/hf/stories260K"
		qwen      = "models/hf/qwen3-p-bf16"
		mlx       = "models/hf/tiny_qwen3_sharded"
		gptoss    = "models/hf/gptoss-g1-hf"
		gptossMLX = "models/hf/gptoss-g1-mlx"
		shard1    = "model-00001-of-00002.safetensors"
		shard2    = "model-00002-of-00002.safetensors"
		index     = "model.safetensors.index.json"
	)
	for _, tc := range []struct {
		name    string
		from    string
		breakIt func(t *testing.T, dir string)
		file    string // the file the message must name ("" : the directory)
		want    string
	}{
		{"truncated shard", sharded, func(t *testing.T, dir string) {
			p := filepath.Join(dir, shard2)
			b, _ := os.ReadFile(p)
			require.NoError(t, os.WriteFile(p, b[:len(b)-100], 0o644))
		}, shard2, `tensor "model.norm.weight": data_offsets [291328, 291456) run past the end of the file`},
		{"header length 2^63", sharded, func(t *testing.T, dir string) {
			p := filepath.Join(dir, shard1)
			b, _ := os.ReadFile(p)
			binary.LittleEndian.PutUint64(b, 1<<63)
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}, shard1, "header length 9223372036854775808 runs past the end of the file (296880 bytes: at most 296872) (at byte 0)"},
		{"empty shard", sharded, func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, shard1), nil, 0o644))
		}, shard1, "the file is 0 bytes, shorter than the 8-byte header length"},
		{"shard is not safetensors", single, func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("GGUF\x03\x00\x00\x00 and more bytes"), 0o644))
		}, "model.safetensors", "runs past the end of the file"},
		{"overlapping offsets", single, func(t *testing.T, dir string) {
			editHeader(t, filepath.Join(dir, "model.safetensors"), func(h map[string]map[string]any) {
				h["model.norm.weight"]["data_offsets"] = h["model.layers.0.input_layernorm.weight"]["data_offsets"]
			})
		}, "model.safetensors", "overlaps tensor"},
		{"offsets out of the file", single, func(t *testing.T, dir string) {
			editHeader(t, filepath.Join(dir, "model.safetensors"), func(h map[string]map[string]any) {
				h["model.norm.weight"]["data_offsets"] = []uint64{1 << 40, 1<<40 + 256}
			})
		}, "model.safetensors", `tensor "model.norm.weight": data_offsets [1099511627776, 1099511628032) run past the end of the file`},
		{"header not valid JSON", single, func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.safetensors")
			b, _ := os.ReadFile(p)
			require.Equal(t, `{"__metadata__":`, string(b[8:8+16]))
			b[8+15] = ';'
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}, "model.safetensors", "invalid JSON"},
		{"missing shard", sharded, func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, shard2)))
		}, index, `weight_map puts it in shard "model-00002-of-00002.safetensors", which is missing from`},
		{"weight_map names an absent tensor", sharded, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, index), func(m map[string]any) {
				m["weight_map"].(map[string]any)["model.layers.0.self_attn.q_proj.bias"] = shard1
			})
		}, index, `tensor "model.layers.0.self_attn.q_proj.bias": weight_map puts it in "model-00001-of-00002.safetensors", which has no such tensor`},
		{"shard tensor missing from weight_map", sharded, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, index), func(m map[string]any) {
				delete(m["weight_map"].(map[string]any), "lm_head.weight")
			})
		}, shard2, `tensor "lm_head.weight": the shard holds it but model.safetensors.index.json does not list it`},
		{"weight_map puts a tensor in the other shard", sharded, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, index), func(m map[string]any) {
				m["weight_map"].(map[string]any)["lm_head.weight"] = shard1
			})
		}, index, `tensor "lm_head.weight": weight_map puts it in "model-00001-of-00002.safetensors", which has no such tensor`},
		{"weight_map escapes the directory", sharded, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, index), func(m map[string]any) {
				m["weight_map"].(map[string]any)["lm_head.weight"] = "../" + shard2
			})
		}, index, `weight_map shard "../model-00002-of-00002.safetensors" is not a plain file name in the model's directory`},
		{"index not JSON", sharded, func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, index), []byte(`{"weight_map": {`), 0o644))
		}, index, "the JSON ends early"},
		{"dtype disagrees with config.json", single, func(t *testing.T, dir string) {
			editHeader(t, filepath.Join(dir, "model.safetensors"), func(h map[string]map[string]any) {
				h["model.layers.1.mlp.up_proj.weight"]["dtype"] = "I32"
			})
		}, "model.safetensors", `tensor "model.layers.1.mlp.up_proj.weight": has dtype I32: a weight must be F32, F16 or BF16`},
		{"shape disagrees with config.json", single, func(t *testing.T, dir string) {
			editHeader(t, filepath.Join(dir, "model.safetensors"), func(h map[string]map[string]any) {
				h["model.layers.2.mlp.gate_proj.weight"]["shape"] = []int{64, 172}
			})
		}, "model.safetensors", `tensor "model.layers.2.mlp.gate_proj.weight": is F32 [64 172], but config.json makes it [172 (intermediate_size), 64 (hidden_size)]`},
		{"config.json sizes disagree with the tensors", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["num_key_value_heads"] = 2 })
		}, "model.safetensors", `tensor "model.layers.0.self_attn.k_proj.weight": is F32 [32 64], but config.json makes it [16 (num_key_value_heads×head_dim), 64 (hidden_size)]`},
		{"vocab_size disagrees with the embedding", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["vocab_size"] = 500 })
		}, "model.safetensors", `is F32 [512 64], but config.json makes it [500 (vocab_size), 64 (hidden_size)]`},
		{"config.json not JSON", single, func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architectures": [`), 0o644))
		}, "config.json", "not a JSON object: unexpected EOF"},
		{"unknown architecture", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["architectures"] = []string{"GemmaForCausalLM"} })
		}, "config.json", "unsupported architecture GemmaForCausalLM (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, GptOssForCausalLM)"},
		{"no architecture at all", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { delete(m, "architectures"); delete(m, "model_type") })
		}, "config.json", "neither architectures nor model_type says what model this is"},
		{"gpt-oss config on llama weights", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["architectures"] = []string{"GptOssForCausalLM"} })
		}, "config.json", "num_local_experts is missing"},
		{"gpt-oss SwiGLU limit", gptoss, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["swiglu_limit"] = 8 })
		}, "config.json", "swiglu_limit 8 is not supported (the gpt-oss graph clamps at 7, as the reference engine does)"},
		{"gpt-oss layer types", gptoss, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["layer_types"] = []string{"full_attention", "sliding_attention"} })
		}, "config.json", `layer_types[0] is "full_attention": the gpt-oss graph has sliding attention on the even layers`},
		{"gpt-oss YaRN betas", gptoss, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["rope_scaling"].(map[string]any)["beta_fast"] = 16 })
		}, "config.json", "rope_scaling: beta_fast 16, beta_slow 1 are not supported (the reference engine fixes 32 and 1)"},
		{"gpt-oss experts per token", gptoss, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["num_experts_per_tok"] = 9; m["experts_per_token"] = 9 })
		}, "config.json", "num_experts_per_tok 9 exceeds num_local_experts 8"},
		{"gpt-oss blocks without quantization_config", gptoss, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { delete(m, "quantization_config") })
		}, "model.safetensors", `tensor "model.layers.0.mlp.experts.gate_up_proj_blocks": is MXFP4 blocks, but config.json has no quantization_config with quant_method mxfp4`},
		{"gpt-oss blocks of another shape", gptoss, func(t *testing.T, dir string) {
			editHeader(t, filepath.Join(dir, "model.safetensors"), func(h map[string]map[string]any) {
				h["model.layers.1.mlp.experts.gate_up_proj_blocks"]["shape"] = []int{8, 512, 2, 32}
			})
		}, "model.safetensors", `tensor "model.layers.1.mlp.experts.gate_up_proj_blocks": is U8 [8 512 2 32], but config.json makes it U8 [8 512 4 16]`},
		{"gpt-oss without expert scales", gptoss, func(t *testing.T, dir string) {
			editHeader(t, filepath.Join(dir, "model.safetensors"), func(h map[string]map[string]any) {
				h["model.layers.0.mlp.experts.down_proj_exponents"] = h["model.layers.0.mlp.experts.down_proj_scales"]
				delete(h, "model.layers.0.mlp.experts.down_proj_scales")
			})
		}, "", `no tensor "model.layers.0.mlp.experts.down_proj_scales", which GptOssForCausalLM's MXFP4 experts need beside model.layers.0.mlp.experts.down_proj_blocks`},
		{"gpt-oss without experts", gptoss, func(t *testing.T, dir string) {
			editHeader(t, filepath.Join(dir, "model.safetensors"), func(h map[string]map[string]any) {
				h["model.layers.1.mlp.experts.gate_up_proj_packed"] = h["model.layers.1.mlp.experts.gate_up_proj_blocks"]
				delete(h, "model.layers.1.mlp.experts.gate_up_proj_blocks")
			})
		}, "", `no tensor "model.layers.1.mlp.experts.gate_up_proj_blocks" (openai's MXFP4 layout) or "model.layers.1.mlp.experts.gate_proj.weight" (mlx-lm's), which GptOssForCausalLM needs`},
		{"gpt-oss MLX experts' bits", gptossMLX, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["quantization"].(map[string]any)["bits"] = 8 })
		}, shard1, `tensor "model.layers.0.mlp.experts.down_proj.weight": is quantized with 4 bits in groups of 32 (U32 [8 128 32], scales [8 128 8], rows of 256 (intermediate_size)), but config.json quantization gives mxfp4, 8 bits, group 32`},
		{"gpt-oss MLX attention override", gptossMLX, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) {
				m["quantization"].(map[string]any)["model.layers.1.self_attn.k_proj"] = map[string]any{"group_size": 32, "bits": 8}
			})
		}, shard2, `tensor "model.layers.1.self_attn.k_proj.weight": is quantized with 8 bits in groups of 64 (U32 [128 32], scales [128 2], rows of 128 (hidden_size)), but config.json quantization gives affine, 8 bits, group 32`},
		{"missing config key", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { delete(m, "hidden_size") })
		}, "config.json", "hidden_size is missing"},
		{"config key of the wrong type", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["num_hidden_layers"] = "5" })
		}, "config.json", `num_hidden_layers is the string "5", not a number`},
		{"config key out of range", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["num_attention_heads"] = -8 })
		}, "config.json", "num_attention_heads = -8 is not a positive integer below 2^31"},
		{"heads not a multiple of kv heads", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["num_key_value_heads"] = 3 })
		}, "config.json", "num_attention_heads 8 is not a multiple of num_key_value_heads 3"},
		{"unsupported activation", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["hidden_act"] = "gelu" })
		}, "config.json", `hidden_act "gelu" is not supported (LlamaForCausalLM uses silu)`},
		{"unsupported rope scaling", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) {
				m["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 4}
			})
		}, "config.json", `rope_scaling "yarn" is not supported (default, linear, llama3)`},
		{"rope scaling on a family without it", qwen, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) {
				m["rope_scaling"] = map[string]any{"type": "linear", "factor": 2}
			})
		}, "config.json", `rope_scaling "linear" is not supported for Qwen3ForCausalLM`},
		{"mlp biases", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["mlp_bias"] = true })
		}, "config.json", "mlp_bias true is not supported"},
		{"GPTQ quantization", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) {
				m["quantization_config"] = map[string]any{"quant_method": "gptq", "bits": 4}
			})
		}, "config.json", `quantization_config quant_method "gptq" is not supported`},
		{"config quantizes what is stored float", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) {
				m["quantization"] = map[string]any{"bits": 4, "group_size": 64}
			})
		}, "model.safetensors", `tensor "lm_head.weight": is F32 [512 64] without .scales, but config.json quantization quantizes it (affine, 4 bits, group 64)`},
		{"MLX bits disagree with config.json", mlx, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["quantization"].(map[string]any)["bits"] = 8 })
		}, shard1, `tensor "lm_head.weight": is quantized with 4 bits in groups of 32 (U32 [256 8], scales [256 2], rows of 64 (hidden_size)), but config.json quantization gives affine, 8 bits, group 32`},
		{"MLX group size disagrees with config.json", mlx, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["quantization"].(map[string]any)["group_size"] = 64 })
		}, shard1, `tensor "lm_head.weight": is quantized with 4 bits in groups of 32`},
		{"MLX module override disagrees", mlx, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) {
				m["quantization"].(map[string]any)["model.layers.1.mlp.up_proj"] = map[string]any{"bits": 8, "group_size": 32}
			})
		}, shard1, `tensor "model.layers.1.mlp.up_proj.weight": is quantized with 4 bits in groups of 32 (U32 [128 8], scales [128 2], rows of 64 (hidden_size)), but config.json quantization gives affine, 8 bits, group 32`},
		{"MLX module the config leaves float", mlx, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["quantization"].(map[string]any)["lm_head"] = false })
		}, shard1, "has lm_head.scales beside it but config.json has no quantization for it"},
		{"MLX unknown mode", mlx, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["quantization"].(map[string]any)["mode"] = "nvfp4" })
		}, shard1, `tensor "lm_head.weight": config.json quantization gives quantization mode "nvfp4", which is not supported (affine, mxfp4)`},
		{"MLX weight not U32", mlx, func(t *testing.T, dir string) {
			editHeader(t, filepath.Join(dir, shard1), func(h map[string]map[string]any) { h["lm_head.weight"]["dtype"] = "I32" })
		}, shard1, `tensor "lm_head.weight": is I32 [256 8] beside lm_head.scales: a quantized weight is U32 words of packed values`},
		{"MLX scales of another type", mlx, func(t *testing.T, dir string) {
			editHeader(t, filepath.Join(dir, shard2), func(h map[string]map[string]any) { h["lm_head.scales"]["dtype"] = "I32" })
		}, shard2, `tensor "lm_head.scales": has dtype I32: MLX scales and biases are F32, F16 or BF16`},
		{"MLX scales of another shape", mlx, func(t *testing.T, dir string) {
			editHeader(t, filepath.Join(dir, shard2), func(h map[string]map[string]any) { h["lm_head.scales"]["shape"] = []int{128, 4} })
		}, shard2, `tensor "lm_head.scales": is F32 [128 4], but lm_head.weight is U32 [256 8]: not one scale per group of each row`},
		{"MLX without biases", mlx, func(t *testing.T, dir string) {
			editHeader(t, filepath.Join(dir, shard1), func(h map[string]map[string]any) {
				h["lm_head.offsets"] = h["lm_head.biases"]
				delete(h, "lm_head.biases")
			})
			editJSON(t, filepath.Join(dir, index), func(m map[string]any) {
				wm := m["weight_map"].(map[string]any)
				wm["lm_head.offsets"] = wm["lm_head.biases"]
				delete(wm, "lm_head.biases")
			})
		}, shard1, "has lm_head.scales but no lm_head.biases, which MLX affine quantization (config.json quantization: affine, 4 bits, group 32) needs"},
		{"quantized weights, config without quantization", mlx, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { delete(m, "quantization") })
		}, shard1, "has lm_head.scales beside it but config.json has no quantization for it"},
		{"missing tensor", single, func(t *testing.T, dir string) {
			editHeader(t, filepath.Join(dir, "model.safetensors"), func(h map[string]map[string]any) {
				// Renamed: the bytes stay covered, the name is unknown.
				h["model.layers.3.mlp.weird.weight"] = h["model.layers.3.mlp.down_proj.weight"]
				delete(h, "model.layers.3.mlp.down_proj.weight")
			})
		}, "", `no tensor "model.layers.3.mlp.down_proj.weight", which LlamaForCausalLM needs (config.json: 5 layers, hidden_size 64, 8 heads)`},
		{"layers beyond num_hidden_layers", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["num_hidden_layers"] = 4 })
		}, "model.safetensors", `tensor "model.layers.4.input_layernorm.weight": is not part of a LlamaForCausalLM model as config.json describes it`},
		{"extra tensor", single, func(t *testing.T, dir string) {
			editHeader(t, filepath.Join(dir, "model.safetensors"), func(h map[string]map[string]any) {
				h["model.layers.0.self_attn.q_proj.bias"] = map[string]any{"dtype": "F32", "shape": []int{0}, "data_offsets": []int{0, 0}}
			})
		}, "model.safetensors", `tensor "model.layers.0.self_attn.q_proj.bias": is not part of a LlamaForCausalLM model as config.json describes it (it may change the math, so the model is refused)`},
		{"no config.json", single, func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "config.json")))
		}, "", "has no config.json: not a Hugging Face model directory"},
		{"no weights", single, func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "model.safetensors")))
		}, "", "has no weights (model.safetensors or model.safetensors.index.json)"},
		{"shards without an index", sharded, func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, index)))
		}, "", "has 2 .safetensors files but no model.safetensors.index.json to say which tensors each holds"},
		{"eos id outside the vocabulary", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "generation_config.json"), func(m map[string]any) { m["eos_token_id"] = []int{2, 99999} })
		}, "generation_config.json", "eos_token_id 99999 is outside the vocabulary (vocab_size 512)"},
		{"bad sampling default", single, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "generation_config.json"), func(m map[string]any) { m["top_p"] = 1.5 })
		}, "generation_config.json", "top_p 1.5 is not in (0, 1]"},
		{"broken tokenizer.json", single, func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{"model": {"type": "Unigram"}}`), 0o644))
		}, "tokenizer.json", "tokenizer.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyModelDir(t, tc.from)
			tc.breakIt(t, dir)
			src, err := frontend.Open(dir)
			if err == nil {
				_, err = src.Build(arch.Options{})
				src.Close()
			}
			require.Error(t, err)
			msg := err.Error()
			t.Log(msg)
			require.NotContains(t, msg, "\n")
			require.Contains(t, msg, tc.want)
			require.Contains(t, msg, filepath.Join(dir, tc.file), "names the file")
		})
	}
}

// TestOpenDirectory: a directory, or any file of it, opens as one source
// whose Files are the directory and each file read; it builds, serves its
// weights and identifies itself stably.
func TestOpenDirectory(t *testing.T) {
	dir := copyModelDir(t, "models/hf/stories260K-bf16")
	var refs []string
	for _, path := range []string{dir, filepath.Join(dir, "config.json"), filepath.Join(dir, "model-00002-of-00002.safetensors")} {
		src, err := frontend.Open(path)
		require.NoError(t, err, path)
		require.Equal(t, frontend.FormatHF, src.Format)
		require.Equal(t, dir, src.Path)
		require.Len(t, src.Files(), 8, "the directory and the 7 files read")
		m, err := src.Build(arch.Options{})
		require.NoError(t, err)
		require.Equal(t, "llama", m.Config.Arch)
		ref, err := src.Identity()
		require.NoError(t, err)
		require.Equal(t, dir, ref.Path)
		require.Equal(t, "stories260K-bf16", ref.Name)
		refs = append(refs, ref.HeaderSHA256)
		v, err := src.Vocab()
		require.NoError(t, err)
		require.Len(t, v.Tokens, 512)
		require.Contains(t, src.ChatTemplate(), "<|assistant|>")
		require.NoError(t, src.Close())
	}
	require.Equal(t, refs[0], refs[1])
	require.Equal(t, refs[0], refs[2])

	// A change to config.json changes the identity.
	editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["rms_norm_eps"] = 1e-6 })
	src, err := frontend.Open(dir)
	require.NoError(t, err)
	defer src.Close()
	ref, err := src.Identity()
	require.NoError(t, err)
	require.NotEqual(t, refs[0], ref.HeaderSHA256)

	// Without tokenizer files the directory still builds; the vocabulary
	// is an error naming what is missing.
	q, err := frontend.Open(shared.Path(t, "models/hf/tiny_qwen3"))
	require.NoError(t, err)
	defer q.Close()
	m, err := q.Build(arch.Options{})
	require.NoError(t, err)
	require.Empty(t, m.Vocab.Tokens)
	_, err = q.Vocab()
	require.ErrorContains(t, err, "has no tokenizer.json: it runs from token ids only")
}

// TestPlanOfDirectory: a plan refers to a directory; it runs while the
// directory is unchanged, and a changed or removed directory is the plan's
// one-line error.
func TestPlanOfDirectory(t *testing.T) {
	dir := copyModelDir(t, "models/hf/stories260K-bf16")
	c := compileFile(t, dir)
	path, _ := writePlan(t, c.plan, nil)
	p, err := frontend.Open(path)
	require.NoError(t, err)
	require.Equal(t, frontend.FormatHF, p.Model.Format)
	_, err = p.Weights().WeightBytes("blk.0.attn_q.weight")
	require.NoError(t, err)
	require.Len(t, p.Files(), 9, "the plan, the directory and its 7 files")
	require.NoError(t, p.Close())

	editJSON(t, filepath.Join(dir, "generation_config.json"), func(m map[string]any) { m["temperature"] = 0.5 })
	_, err = frontend.Open(path)
	require.ErrorIs(t, err, frontend.ErrModelChanged)
	require.ErrorContains(t, err, dir+" has changed since the plan was compiled (header sha256 ")

	require.NoError(t, os.Remove(filepath.Join(dir, "config.json")))
	_, err = frontend.Open(path)
	require.ErrorIs(t, err, frontend.ErrModelChanged)
	require.ErrorContains(t, err, "(it is no longer a regular file or a model directory)")
	require.NotContains(t, err.Error(), "\n")

	require.NoError(t, os.RemoveAll(dir))
	_, err = frontend.Open(path)
	require.ErrorIs(t, err, frontend.ErrModelMissing)
}

// The words of the messages above are the user's only guide: none may
// mention a GGUF name for an HF tensor.
func TestDirectoryErrorsUseHFNames(t *testing.T) {
	dir := copyModelDir(t, "models/hf/stories260K")
	editHeader(t, filepath.Join(dir, "model.safetensors"), func(h map[string]map[string]any) {
		h["model.layers.0.self_attn.q_proj.weight"]["shape"] = []int{32, 128}
	})
	_, err := frontend.Open(dir)
	require.Error(t, err)
	require.False(t, strings.Contains(err.Error(), "blk."), err.Error())
}
