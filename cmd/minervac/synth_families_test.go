package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
)

// TestSynthFamilies: `minervac synth` writes the tiny qwen2, qwen3 and phi3
// presets (the full-size ones are checked in package synth without writing
// their gigabytes), with --arch or inferred from the preset; each inspects
// as its family and generates on the CPU backend. A real Qwen2 BPE
// vocabulary can replace the synthetic one; bad flags are one-line usage
// errors that name the presets of the family asked for.
func TestSynthFamilies(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want []string // in inspect's output
	}{
		{[]string{"--arch", "qwen2", "--preset", "qwen2-tiny"}, []string{"architecture: qwen2", "blk.1.attn_v.bias", `"qwen2"`}},
		{[]string{"--arch", "qwen3", "--preset", "qwen3-tiny"}, []string{"architecture: qwen3", "blk.1.attn_k_norm.weight", "head dim 64"}},
		{[]string{"--preset", "phi3-tiny"}, []string{"architecture: phi3", "blk.1.attn_qkv.weight", "phi3.attention.sliding_window"}},
	} {
		out := filepath.Join(dir, c.args[len(c.args)-1]+".gguf")
		_, stderr, code := minervac(t, append(append([]string{"synth"}, c.args...), "--quant", "q4_k", "-o", out)...)
		require.Equal(t, 0, code, stderr)
		stdout, stderr, code := minervac(t, "inspect", out)
		require.Equal(t, 0, code, stderr)
		for _, w := range append(c.want, "Q4_K") {
			require.Contains(t, stdout, w)
		}
		stdout, stderr, code = minervac(t, "run", out, "--prompt", "the little dog", "-n", "4", "--ignore-eos", "--json")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, `"tokens"`)
	}

	// A BPE vocabulary with Qwen2's pre-tokenizer (GPT-2's tokens, in
	// which " the" is 262) replaces the synthetic one, pre-tokenizer and all.
	qv := filepath.Join(dir, "qwen2vocab.gguf")
	_, stderr, code := minervac(t, "synth", "--preset", "qwen2-tiny", "--quant", "q4_k",
		"--vocab", shared.Path(t, "models/gguf/vocab/ggml-vocab-gpt-2-pre-qwen2.gguf"), "-o", qv)
	require.Equal(t, 0, code, stderr)
	stdout, _, code := minervac(t, "inspect", qv)
	require.Equal(t, 0, code)
	require.Contains(t, stdout, `tokenizer.ggml.pre                            "qwen2"`)
	require.Contains(t, stdout, "vocabulary 50257 (gpt2)")
	stdout, _, code = minervac(t, "tokenize", qv, "--text", " the", "--json")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "[262]")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--arch", "qwen2", "--preset", "phi3-mini"}, "qwen2 presets are qwen2-tiny, qwen2.5-7b"},
		{[]string{"--arch", "mamba", "--preset", "phi3-mini"}, "--arch mamba"},
		{[]string{"--preset", "qwen4"}, "qwen3-8b"},
		{[]string{"--preset", "qwen3-tiny", "--vocab", shared.Path(t, "models/gguf/vocab/ggml-vocab-llama-spm.gguf")}, "byte-level BPE"},
		{[]string{"--preset", "phi3-tiny", "--vocab", shared.Path(t, "models/gguf/vocab/ggml-vocab-gpt-2.gguf")}, "SentencePiece"},
	} {
		_, stderr, code := minervac(t, append(append([]string{"synth"}, c.args...), "-o", filepath.Join(dir, "bad.gguf"))...)
		require.NotEqual(t, 0, code)
		require.Contains(t, stderr, c.want)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, stderr)
	}
}
