package main

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/runtime"
)

// copyDir copies a shared model directory's files into a fresh directory.
func copyDir(t *testing.T, rel string) string {
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

// TestEachCommandOpensEachDirectoryFileOnce is TestEachCommandOpensEachFileOnce
// for a sharded model directory: every command opens the directory and
// each file it reads (config, index, both shards, generation config,
// tokenizer.json, tokenizer_config.json; special_tokens_map.json is not
// read) once, on a plan-cache miss and hit, for plans that refer to the
// directory or embed its weights, and when given a file inside it.
// (tokenize DIR reads tokenizer.json through tokenizer.LoadHF, issue 14's
// path for a tokenizer named on its own, not through frontend.Open.)
func TestEachCommandOpensEachDirectoryFileOnce(t *testing.T) {
	dir := copyDir(t, "models/hf/stories260K-bf16")
	files := map[string]int{dir: 1}
	for _, f := range []string{"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
		"model-00002-of-00002.safetensors", "generation_config.json", "tokenizer.json", "tokenizer_config.json"} {
		files[filepath.Join(dir, f)] = 1
	}
	with := func(extra ...string) map[string]int {
		out := map[string]int{}
		for k, v := range files {
			out[k] = v
		}
		for _, e := range extra {
			out[e] = 1
		}
		return out
	}
	cacheDir := filepath.Join(t.TempDir(), "cache")
	opts := &runtime.Options{CacheDir: cacheDir}
	run := func(path string) {
		r, err := openRunnable(path, "reference", cacheFlags{}, opts, &timer{})
		require.NoError(t, err, path)
		defer r.Close()
		s, err := r.session(8)
		require.NoError(t, err, path)
		defer s.Close()
		rows, err := s.Eval([]int32{1, 403})
		require.NoError(t, err, path)
		require.Len(t, rows, 2)
	}

	require.Equal(t, files, opened(func() { run(dir) }), "run DIR, plan cache miss")
	plans, _ := filepath.Glob(filepath.Join(cacheDir, "*.plan"))
	require.Len(t, plans, 1, "the miss cached a plan")
	require.Equal(t, with(plans[0]), opened(func() { run(dir) }), "run DIR, plan cache hit")
	require.Equal(t, with(plans[0]), opened(func() { run(filepath.Join(dir, "model-00002-of-00002.safetensors")) }), "run DIR/shard: the directory")

	ref, emb := filepath.Join(t.TempDir(), "ref.plan"), filepath.Join(t.TempDir(), "emb.plan")
	require.Equal(t, files, opened(func() {
		quietly(t, (&compileCmd{Model: dir, Target: "reference", Output: ref}).Run)
	}), "compile DIR -o ref.plan")
	require.Equal(t, files, opened(func() {
		quietly(t, (&compileCmd{Model: dir, Target: "reference", Output: emb, EmbedWeights: true}).Run)
	}), "compile DIR -o emb.plan --embed-weights")
	require.Equal(t, with(ref), opened(func() { run(ref) }), "run ref.plan")
	require.Equal(t, map[string]int{emb: 1}, opened(func() { run(emb) }), "run emb.plan")

	for _, tc := range []struct {
		name string
		cmd  func() error
		want map[string]int
	}{
		{"compile DIR", (&compileCmd{Model: dir, Target: "reference"}).Run, files},
		{"inspect DIR", (&inspectCmd{File: dir}).Run, files},
		{"inspect ref.plan", (&inspectCmd{File: ref}).Run, with(ref)},
	} {
		require.Equal(t, tc.want, opened(func() { quietly(t, tc.cmd) }), tc.name)
	}
}

// `minervac run DIR` prints the golden text of the directory's case: the
// F32 twin of stories260K gives the GGUF's 64 tokens, the sharded BF16 one
// its own.
func TestRunDirectoryMatchesGoldenText(t *testing.T) {
	for _, tc := range []struct{ dir, gold string }{
		{"models/hf/stories260K", "e2e/stories260K__once_upon_a_time"},
		{"models/hf/stories260K-bf16", "e2e-hf/stories260K-bf16__once_upon_a_time"},
	} {
		var c struct {
			Prompt  string `json:"prompt_text"`
			NGen    int    `json:"n_gen"`
			TextHex string `json:"gen_text_hex"`
		}
		readCaseJSON(t, filepath.Join(shared.Path(t, "golden"), tc.gold, "case.json"), &c)
		stdout, stderr, code := minervac(t, "run", shared.Path(t, tc.dir), "--prompt", c.Prompt, "-n", "64", "-t", "reference",
			"--cache-dir", t.TempDir())
		require.Equal(t, 0, code, stderr)
		want, err := hex.DecodeString(c.TextHex)
		require.NoError(t, err)
		require.Equal(t, string(want)+"\n", stdout, tc.dir)
	}
}

// inspect DIR shows the files, config, quantization, modules and the
// architecture; an MLX-quantized directory shows its quantization per
// module and the MLX dtype each becomes; a broken one is the one-line
// error.
func TestInspectDirectory(t *testing.T) {
	stdout, stderr, code := minervac(t, "inspect", shared.Path(t, "models/hf/stories260K-bf16"))
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{
		"format: Hugging Face model directory (LlamaForCausalLM), 7 files",
		"model-00002-of-00002.safetensors  shard",
		"22 tensors",
		`architectures                    [ "LlamaForCausalLM" ]`,
		"quantization: none (float weights)",
		"tokenizer: tokenizer.json, llama, 512 tokens",
		"modules (48: 48 BF16)",
		"→ blk.0.attn_q.weight BF16",
		"→ blk.0.attn_norm.weight F32",
		"layers 5, embedding 64, heads 8 (kv 4, head dim 8, rope dims 8), feed-forward 172",
	} {
		require.Contains(t, stdout, want)
	}

	stdout, stderr, code = minervac(t, "inspect", shared.Path(t, "models/hf/llama-p-mlx-q4"))
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "quantization: affine, 4 bits, group 64 (config.json quantization)")
	require.Contains(t, stdout, "modules (21: 16 MLX affine, 4 bits, group 64, 5 BF16)")
	require.Contains(t, stdout, "model.layers.0.self_attn.q_proj          MLX affine, 4 bits, group 64")
	require.Contains(t, stdout, "weight U32 [256 32] in model.safetensors  → blk.0.attn_q.weight MLX_Q4_G64\n")
	require.NotContains(t, stdout, "not runnable by this build:")

	broken := copyDir(t, "models/hf/stories260K")
	require.NoError(t, os.WriteFile(filepath.Join(broken, "config.json"), []byte(`{"architectures": ["LlamaForCausalLM"],`), 0o644))
	stdout, stderr, code = minervac(t, "run", broken, "-n", "1")
	require.NotEqual(t, 0, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "config.json: not a JSON object")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
}

func readCaseJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v))
}
