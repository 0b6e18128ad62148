package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
)

// The acceptance command of the pass-pipeline issue.
func TestCompileEmitIR(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	stdout, stderr, code := minervac(t, "compile", model, "--emit", "ir", "--print-after=all", "--time-passes", "--verify-each")
	require.Equal(t, 0, code, stderr)
	g, err := ir.Parse(stdout)
	require.NoError(t, err, "stdout must be the final IR")
	require.NoError(t, ir.Verify(g))
	counts := map[ir.Op]int{}
	for _, v := range g.Values {
		counts[v.Op]++
	}
	// stories260K has 5 layers: one fused projection, SwiGLU and flash attention each.
	require.Equal(t, 5, counts[ir.OpQKVRoPE])
	require.Equal(t, 5, counts[ir.OpSwiGLU])
	require.Equal(t, 5, counts[ir.OpFlashAttention])
	require.Zero(t, counts[ir.OpRMSNorm])
	require.Contains(t, g.Attrs, "arena_bytes_per_token")
	for _, want := range []string{"; after canonicalize", "; after fuse-qkv", "; after plan-memory", "; pass times"} {
		require.Contains(t, stderr, want)
	}
}

func TestCompileSummaryAndBadFlags(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	stdout, stderr, code := minervac(t, "compile", model)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "activation arena")
	require.Contains(t, stdout, "qkv_rope")

	_, stderr, code = minervac(t, "compile", model, "--print-after=no-such-pass")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "no-such-pass")
	require.Contains(t, stderr, "fuse-qkv", "the error lists the passes")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1)
}

func TestSynth(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s15.gguf")
	_, stderr, code := minervac(t, "synth", "--preset", "stories15m", "--quant", "q4_0", "--vocab", shared.Path(t, "models/gguf/vocab/ggml-vocab-llama-spm.gguf"), "-o", out)
	require.Equal(t, 0, code, stderr)
	stdout, stderr, code := minervac(t, "inspect", out)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "layers 6, embedding 288, heads 6")
	require.Contains(t, stdout, "vocabulary 32000 (llama)")
	// The real vocabulary came along: "▁Hello" is token 15043 in Llama 2's.
	stdout, _, code = minervac(t, "tokenize", out, "--text", "Hello", "--no-bos", "--json")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "15043")

	_, stderr, code = minervac(t, "synth", "--preset", "nope", "-o", out)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "tinyllama-1.1b")
	_, stderr, code = minervac(t, "synth", "--preset", "stories15m", "--quant", "q9_9", "-o", out)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "q9_9")
}
