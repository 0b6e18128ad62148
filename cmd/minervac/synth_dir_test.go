package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSynthFormats: `minervac synth --format hf|mlx` writes model
// directories that inspect and run; a dtype the format cannot hold, a
// family it is not written for and an existing output are one-line errors.
func TestSynthFormats(t *testing.T) {
	dir := t.TempDir()
	hfDir := filepath.Join(dir, "stories-hf")
	_, stderr, code := minervac(t, "synth", "--preset", "stories15m", "--format", "hf", "-o", hfDir)
	require.Equal(t, 0, code, stderr)
	for _, f := range []string{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		_, err := os.Stat(filepath.Join(hfDir, f))
		require.NoError(t, err, f)
	}
	stdout, stderr, code := minervac(t, "inspect", hfDir)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "LlamaForCausalLM")
	require.Contains(t, stdout, `"bfloat16"`)

	mlxDir := filepath.Join(dir, "gptoss-mlx")
	_, stderr, code = minervac(t, "synth", "--preset", "gpt-oss-tiny", "--format", "mlx", "-o", mlxDir)
	require.Equal(t, 0, code, stderr)
	stdout, stderr, code = minervac(t, "inspect", mlxDir)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "GptOssForCausalLM")
	require.Contains(t, stdout, "mxfp4, 4 bits, group 32")
	stdout, stderr, code = minervac(t, "run", mlxDir, "--target", "reference", "--prompt", "the little dog", "-n", "4", "--ignore-eos", "--json")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"tokens"`)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--preset", "stories15m", "--format", "hf", "--quant", "q4_0"}, "--format hf holds f32, f16 or bf16"},
		{[]string{"--preset", "stories15m", "--quant", "mlx_q4_g64"}, "use it with --format mlx"},
		{[]string{"--preset", "stories15m", "--format", "mlx", "--quant", "bf16"}, "--format mlx holds MLX affine"},
		{[]string{"--preset", "qwen3-tiny", "--format", "hf", "--quant", "f32"}, "llama and gpt-oss presets"},
		{[]string{"--preset", "gpt-oss-tiny", "--format", "mlx", "-o", mlxDir}, "already exists"},
	} {
		args := append([]string{"synth"}, c.args...)
		if !strings.Contains(strings.Join(c.args, " "), "-o ") {
			args = append(args, "-o", filepath.Join(dir, "bad"))
		}
		_, stderr, code := minervac(t, args...)
		require.NotEqual(t, 0, code, c.args)
		require.Contains(t, stderr, c.want)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, stderr)
	}
}
