package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
)

// TestSynthGPTOSS: `minervac synth --arch gpt-oss` writes the tiny preset
// (the 20b one is checked in package synth without writing its 12 GB) with
// MXFP4 experts unless --quant says otherwise, the file inspects as gpt-oss
// and runs on the reference interpreter; a real
// GPT-2 vocabulary can replace the synthetic one; bad flags are one-line
// usage errors.
func TestSynthGPTOSS(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "tiny.gguf")
	_, stderr, code := minervac(t, "synth", "--arch", "gpt-oss", "--preset", "gpt-oss-tiny", "-o", out)
	require.Equal(t, 0, code, stderr)
	stdout, stderr, code := minervac(t, "inspect", out)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "gpt-oss")
	require.Regexp(t, `blk\.1\.ffn_gate_exps\.weight +MXFP4 `, stdout, "the default experts")
	require.Contains(t, stdout, "experts 4 (2 used per token, feed-forward 64)\n  sliding window 4 positions on layers [0] (the others attend to the whole context)\n  rope scaling yarn (original context 4096)\n")
	stdout, stderr, code = minervac(t, "run", out, "--target", "reference", "--prompt", "the little dog", "-n", "4", "--ignore-eos", "--json")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"tokens"`)

	gpt2 := filepath.Join(dir, "gpt2vocab.gguf")
	_, stderr, code = minervac(t, "synth", "--arch", "gpt-oss", "--preset", "gpt-oss-tiny", "--quant", "f32",
		"--vocab", shared.Path(t, "models/gguf/vocab/ggml-vocab-gpt-2.gguf"), "-o", gpt2)
	require.Equal(t, 0, code, stderr)
	// " the" is token 262 of GPT-2's vocabulary.
	stdout, _, code = minervac(t, "tokenize", gpt2, "--text", " the", "--json")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "262")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--arch", "gpt-oss", "--preset", "stories15m"}, "gpt-oss-20b"},
		{[]string{"--arch", "llama", "--preset", "gpt-oss-20b"}, "stories15m"},
		{[]string{"--arch", "gpt-oss", "--preset", "gpt-oss-tiny", "--vocab", shared.Path(t, "models/gguf/stories260K.gguf")}, "byte-level BPE"},
	} {
		_, stderr, code := minervac(t, append(append([]string{"synth"}, c.args...), "-o", filepath.Join(dir, "bad.gguf"))...)
		require.NotEqual(t, 0, code)
		require.Contains(t, stderr, c.want)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, stderr)
	}
}
