package arch_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/synth"
)

// TestGPTOSSConfig: both golden fixtures read as README-gptoss.md's G1 table
// gives them (2 layers, layer 0 sliding with window 8, 8 heads × 64 over
// n_embd 128, 8 experts of which 2 are used, YaRN 32× from 4096 with base
// 150000), and the tokenizer adds no BOS.
func TestGPTOSSConfig(t *testing.T) {
	for _, file := range []string{"gptoss-g1-q8emb.gguf", "gptoss-g1-mxfp4.gguf"} {
		t.Run(file, func(t *testing.T) {
			m, err := arch.Load(openShared(t, "models/gguf/synthetic/"+file), arch.Options{})
			require.NoError(t, err)
			require.Equal(t, arch.Config{
				Arch: "gpt-oss", NLayer: 2, NEmbd: 128, NHead: 8, NHeadKV: 2, HeadDim: 64, HeadDimV: 64, NFF: 256,
				NVocab: 50257, NRot: 64, ContextLength: 131072, RopeBase: 150000, RopeFreqScale: 1.0 / 32,
				RMSEps: float64(float32(1e-5)), NExpert: 8, NExpertUsed: 2, NFFExp: 256, SlidingWindow: 8,
				SlidingLayers: []int{0}, RopeScaling: "yarn", RopeOrigCtx: 4096, RopeAttnFactor: 1,
			}, m.Config)
			require.False(t, m.Vocab.AddBOS)
			require.Equal(t, int32(50256), m.Vocab.EOS)
		})
	}
}

// TestGPTOSSGraph: the structure the math of README-gptoss.md asks for, per
// layer: NEOX rope with YaRN on q and k (ext_factor 1, betas 32/1, original
// context 4096), attention scaled by 1/√64 with the sinks operand and a
// window on even layers only, biased projections, a router of top-2 then
// softmax, and a clamped-SwiGLU moe with biases; K cache f32 and V cache of
// the VCacheType option.
func TestGPTOSSGraph(t *testing.T) {
	m, err := arch.Load(openShared(t, "models/gguf/synthetic/gptoss-g1-mxfp4.gguf"), arch.Options{VCacheType: ir.F16})
	require.NoError(t, err)
	g := m.Graph
	n := countOps(g)
	require.Equal(t, 2, n[ir.OpAttention])
	require.Equal(t, 4, n[ir.OpRoPE])
	require.Equal(t, 2, n[ir.OpTopKSoftmax])
	require.Equal(t, 2, n[ir.OpMoE])
	require.Equal(t, 2*5+1, n[ir.OpMatMul], "q, k, v, o, router per layer, and the output")
	for _, r := range valuesOf(g, ir.OpRoPE) {
		require.Equal(t, ir.Attrs{"head_dim": int64(64), "n_rot": int64(64), "base": 150000.0, "freq_scale": 1.0 / 32,
			"mode": "neox", "ext_factor": 1.0, "attn_factor": 1.0, "beta_fast": 32.0, "beta_slow": 1.0, "orig_ctx": int64(4096)}, r.Attrs)
	}
	for l, a := range valuesOf(g, ir.OpAttention) {
		require.Len(t, a.Args, 5, "layer %d has sinks", l)
		require.Equal(t, "blk."+string(rune('0'+l))+".attn_sinks.weight", a.Args[4].Name())
		require.InDelta(t, 1/math.Sqrt(64), a.Attrs.Float("scale", 0), 1e-15)
		if l%2 == 0 {
			require.Equal(t, int64(8), a.Attrs.Int("window", 0), "layer %d slides", l)
		} else {
			require.NotContains(t, a.Attrs, "window", "layer %d is full attention", l)
		}
	}
	for _, mm := range valuesOf(g, ir.OpMatMul)[:10] {
		require.Len(t, mm.Args, 3, "%v has a bias", mm)
	}
	for _, r := range valuesOf(g, ir.OpTopKSoftmax) {
		require.Equal(t, int64(2), r.Attrs.Int("k", 0))
		require.Equal(t, ir.OpMatMul, r.Args[0].Op)
	}
	for _, e := range valuesOf(g, ir.OpMoE) {
		require.Len(t, e.Args, 8, "experts have biases")
		require.Equal(t, ir.Attrs{"act": ir.MoEActSwiGLUOAI, "alpha": 1.702, "limit": 7.0}, e.Attrs)
		require.Equal(t, ir.MXFP4, e.Args[2].Type.DType)
		require.Equal(t, ir.S(8, 256, 128), e.Args[2].Type.Shape)
		require.Equal(t, ir.S(8, 128, 256), e.Args[4].Type.Shape)
	}
	for _, s := range valuesOf(g, ir.OpState) {
		want := ir.F32
		if s.Name()[len(s.Name())-1] == 'v' {
			want = ir.F16
		}
		require.Equal(t, want, s.Type.DType, s.Name())
	}
}

// tinyGPTOSS is the synthetic tiny preset as a parsed file.
func tinyGPTOSS(t *testing.T) *gguf.File {
	t.Helper()
	spec, err := synth.GPTOSSPreset("gpt-oss-tiny", ir.F32, 3)
	require.NoError(t, err)
	var buf bytes.Buffer
	_, err = spec.Write(&buf)
	require.NoError(t, err)
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	return f
}

// TestGPTOSSBadModels: copies of the tiny preset (64 embd, 4 heads × 32, 2 kv
// heads, 4 experts of 64) with one key or tensor dropped or altered fail to
// load with one error naming the fault, never a panic.
func TestGPTOSSBadModels(t *testing.T) {
	base := tinyGPTOSS(t)
	cases := []struct {
		name string
		edit edit
		want []string
	}{
		{"missing sliding_window", edit{dropKV: []string{"gpt-oss.attention.sliding_window"}}, []string{"gpt-oss.attention.sliding_window", "missing"}},
		{"missing expert_feed_forward_length", edit{dropKV: []string{"gpt-oss.expert_feed_forward_length"}}, []string{"gpt-oss.expert_feed_forward_length"}},
		{"missing expert_count", edit{dropKV: []string{"gpt-oss.expert_count"}}, []string{"gpt-oss.expert_count"}},
		{"missing rms epsilon", edit{dropKV: []string{"gpt-oss.attention.layer_norm_rms_epsilon"}}, []string{"gpt-oss.attention.layer_norm_rms_epsilon"}},
		{"negative rms epsilon", edit{setKV: map[string]gguf.Value{"gpt-oss.attention.layer_norm_rms_epsilon": gguf.Float32(-1)}},
			[]string{"layer_norm_rms_epsilon", "-1"}},
		{"missing context_length", edit{dropKV: []string{"gpt-oss.context_length"}}, []string{"gpt-oss.context_length"}},
		// As in the reference the key length then defaults to n_embd/n_head
		// (16), which the attn_q tensor contradicts.
		{"missing key_length", edit{dropKV: []string{"gpt-oss.attention.key_length"}}, []string{`"blk.0.attn_q.weight"`, "[64 128]"}},
		{"more experts used than exist", edit{setKV: map[string]gguf.Value{"gpt-oss.expert_used_count": gguf.Uint32(5)}},
			[]string{"expert_used_count 5", "expert_count 4"}},
		{"head_count_kv does not divide head_count", edit{setKV: map[string]gguf.Value{"gpt-oss.attention.head_count_kv": gguf.Uint32(3)}},
			[]string{"head_count_kv 3"}},
		{"unknown rope scaling", edit{setKV: map[string]gguf.Value{"gpt-oss.rope.scaling.type": gguf.String("longrope")}},
			[]string{"gpt-oss.rope.scaling.type", "longrope"}},
		{"rope scaling type not a string", edit{setKV: map[string]gguf.Value{"gpt-oss.rope.scaling.type": gguf.Uint32(2)}},
			[]string{"gpt-oss.rope.scaling.type"}},
		{"negative yarn factor", edit{setKV: map[string]gguf.Value{"gpt-oss.rope.scaling.factor": gguf.Float32(-32)}},
			[]string{"gpt-oss.rope.scaling.factor"}},
		{"odd rope dimension", edit{setKV: map[string]gguf.Value{"gpt-oss.rope.dimension_count": gguf.Uint32(31)}},
			[]string{"gpt-oss.rope.dimension_count 31"}},
		{"missing sinks", edit{dropTensor: []string{"blk.1.attn_sinks.weight"}}, []string{`"blk.1.attn_sinks.weight"`}},
		{"missing router bias", edit{dropTensor: []string{"blk.0.ffn_gate_inp.bias"}}, []string{`"blk.0.ffn_gate_inp.bias"`}},
		{"missing expert down bias", edit{dropTensor: []string{"blk.1.ffn_down_exps.bias"}}, []string{`"blk.1.ffn_down_exps.bias"`}},
		{"missing q bias", edit{dropTensor: []string{"blk.0.attn_q.bias"}}, []string{`"blk.0.attn_q.bias"`}},
		{"missing post_attention_norm", edit{dropTensor: []string{"blk.0.post_attention_norm.weight"}}, []string{`"blk.0.post_attention_norm.weight"`}},
		{"missing output", edit{dropTensor: []string{"output.weight"}}, []string{`"output.weight"`}},
		{"sinks of the wrong size", edit{setTensor: map[string]tensorEdit{"blk.0.attn_sinks.weight": {typ: ir.F32, dims: []uint64{8}}}},
			[]string{`"blk.0.attn_sinks.weight"`, "[8]", "[4]"}},
		{"experts 2-D", edit{setTensor: map[string]tensorEdit{"blk.0.ffn_up_exps.weight": {typ: ir.F32, dims: []uint64{64, 256}}}},
			[]string{`"blk.0.ffn_up_exps.weight"`, "2 dims"}},
		{"down experts transposed", edit{setTensor: map[string]tensorEdit{"blk.1.ffn_down_exps.weight": {typ: ir.F32, dims: []uint64{64, 32, 4}}}},
			[]string{`"blk.1.ffn_down_exps.weight"`}},
		{"fewer experts in one tensor", edit{setTensor: map[string]tensorEdit{"blk.0.ffn_gate_exps.weight": {typ: ir.F32, dims: []uint64{64, 64, 3}}}},
			[]string{`"blk.0.ffn_gate_exps.weight"`, "[64 64 3]", "[64 64 4]"}},
		{"only the fused gate/up", edit{dropTensor: []string{"blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight"},
			setTensor: map[string]tensorEdit{"blk.0.ffn_gate_up_exps.weight": {typ: ir.F32, dims: []uint64{64, 128, 4}}}},
			[]string{`"blk.0.ffn_gate_up_exps.weight"`, "not supported"}},
		{"vocab size ≠ token_embd rows", edit{setTensor: map[string]tensorEdit{"token_embd.weight": {typ: ir.F32, dims: []uint64{64, 511}}}},
			[]string{"token_embd.weight", "tokens"}},
	}
	_, err := arch.Load(rewrite(t, base, edit{}), arch.Options{})
	require.NoError(t, err)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := rewrite(t, base, c.edit)
			var m *arch.Model
			var err error
			require.NotPanics(t, func() { m, err = arch.Load(f, arch.Options{}) })
			require.Error(t, err)
			require.Nil(t, m)
			require.NotContains(t, err.Error(), "\n")
			t.Log(err)
			for _, s := range c.want {
				require.ErrorContains(t, err, s)
			}
		})
	}
}

// TestGPTOSSRopeScalingTypes: none and linear scaling are read as the
// reference reads them (no YaRN attributes; linear keeps 1/factor).
func TestGPTOSSRopeScalingTypes(t *testing.T) {
	base := tinyGPTOSS(t)
	for _, c := range []struct {
		typ       string
		freqScale float64
	}{{"none", 1}, {"linear", 1.0 / 32}, {"yarn", 1.0 / 32}} {
		t.Run(c.typ, func(t *testing.T) {
			f := rewrite(t, base, edit{setKV: map[string]gguf.Value{"gpt-oss.rope.scaling.type": gguf.String(c.typ)}})
			m, err := arch.Load(f, arch.Options{})
			require.NoError(t, err)
			for _, r := range valuesOf(m.Graph, ir.OpRoPE) {
				require.Equal(t, c.freqScale, r.Attrs.Float("freq_scale", 0))
				_, yarn := r.Attrs["ext_factor"]
				require.Equal(t, c.typ == "yarn", yarn)
			}
		})
	}
}
