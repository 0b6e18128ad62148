package synth_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/synth"
)

// TestKQuantMixTable: the per-tensor types of a 22-layer model (TinyLlama)
// as llama.cpp's use_more_bits picks them: layers < 22/8 = 2, ≥ 7·22/8 =
// 19, and 2 + 3j + 2 between.
func TestKQuantMixTable(t *testing.T) {
	more := map[int]bool{0: true, 1: true, 4: true, 7: true, 10: true, 13: true, 16: true, 19: true, 20: true, 21: true}
	base, mix, err := synth.KQuantMix("q4_k_m", 22)
	require.NoError(t, err)
	require.Equal(t, ir.Q4_K, base)
	require.Equal(t, ir.Q6_K, mix("output.weight"))
	require.Equal(t, ir.Q4_K, mix("token_embd.weight"))
	for l := 0; l < 22; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		want := ir.Q4_K
		if more[l] {
			want = ir.Q6_K
		}
		require.Equal(t, want, mix(p+"attn_v.weight"), "layer %d", l)
		require.Equal(t, want, mix(p+"ffn_down.weight"), "layer %d", l)
		for _, n := range []string{"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"} {
			require.Equal(t, ir.Q4_K, mix(p+n+".weight"), "%s layer %d", n, l)
		}
	}
	base, mix, err = synth.KQuantMix("q5_k_m", 22)
	require.NoError(t, err)
	require.Equal(t, ir.Q5_K, base)
	require.Equal(t, ir.Q6_K, mix("blk.4.ffn_down.weight"))
	require.Equal(t, ir.Q5_K, mix("blk.5.ffn_down.weight"))
	require.Equal(t, ir.Q6_K, mix("blk.1.attn_qkv.weight"))
	base, mix, err = synth.KQuantMix("q3_k_m", 32)
	require.NoError(t, err)
	require.Equal(t, ir.Q3_K, base)
	require.Equal(t, ir.Q5_K, mix("blk.1.attn_v.weight"))
	require.Equal(t, ir.Q4_K, mix("blk.2.attn_v.weight"))
	require.Equal(t, ir.Q5_K, mix("blk.1.ffn_down.weight"))
	require.Equal(t, ir.Q4_K, mix("blk.2.ffn_down.weight"))
	require.Equal(t, ir.Q4_K, mix("blk.9.attn_output.weight"))
	require.Equal(t, ir.Q3_K, mix("blk.9.ffn_up.weight"))
	require.Equal(t, ir.Q6_K, mix("output.weight"))
	_, _, err = synth.KQuantMix("q4_k_s", 22)
	require.ErrorContains(t, err, "q4_k_m")
}

// TestKQuantMixWritten: a preset written with a mix carries its types
// (two layers: layer 1 gets the larger type) and loads.
func TestKQuantMixWritten(t *testing.T) {
	for _, preset := range []string{"qwen2-tiny", "phi3-tiny"} {
		spec, err := synth.Preset(preset, ir.F32, 1)
		require.NoError(t, err)
		spec.Matrix, spec.Mix, err = synth.KQuantMix("q4_k_m", spec.NLayer)
		require.NoError(t, err)
		require.Equal(t, 2, spec.NLayer)
		f, err := gguf.Parse(write(t, spec))
		require.NoError(t, err)
		want := map[string]ir.DType{
			"token_embd.weight":        ir.Q4_K,
			"output.weight":            ir.Q6_K,
			"blk.0.ffn_down.weight":    ir.Q4_K,
			"blk.1.ffn_down.weight":    ir.Q6_K,
			"blk.0.ffn_up.weight":      ir.Q4_K,
			"blk.1.attn_output.weight": ir.Q4_K,
		}
		if preset == "phi3-tiny" {
			want["blk.0.attn_qkv.weight"] = ir.Q5_K
		} else {
			want["blk.0.attn_v.weight"] = ir.Q4_K
			want["blk.1.attn_v.weight"] = ir.Q6_K
			want["blk.1.attn_q.weight"] = ir.Q4_K
		}
		for name, d := range want {
			ti, ok := f.Tensor(name)
			require.True(t, ok, "%s %s", preset, name)
			require.Equal(t, d, ti.Type, "%s %s", preset, name)
		}
		_, err = arch.Load(f, arch.Options{})
		require.NoError(t, err, preset)
	}
}
