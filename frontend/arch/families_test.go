package arch_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
)

// archFixture is one entry of golden/fixtures-archs.json, the reference's
// own description of each fixture.
type archFixture struct {
	File         string    `json:"file"`
	Architecture string    `json:"architecture"`
	NLayer       int       `json:"n_layer"`
	NEmbd        int       `json:"n_embd"`
	NHead        int       `json:"n_head"`
	NHeadKV      int       `json:"n_head_kv"`
	HeadDim      int       `json:"head_dim"`
	NFF          int       `json:"n_ff"`
	NVocab       int       `json:"n_vocab"`
	NCtxTrain    int       `json:"n_ctx_train"`
	RopeBase     float64   `json:"rope_freq_base"`
	RMSEps       float64   `json:"rms_norm_eps"`
	Tied         bool      `json:"tied_embeddings"`
	SlidingWin   int       `json:"sliding_window"`
	QKNorm       bool      `json:"qk_norm"`
	QKVBias      bool      `json:"qkv_bias"`
	FusedQKV     bool      `json:"fused_qkv"`
	RopeFreqs    []float64 `json:"rope_freqs"`
}

func archFixtures(t *testing.T) []archFixture {
	t.Helper()
	raw, err := os.ReadFile(shared.Path(t, "golden/fixtures-archs.json"))
	require.NoError(t, err)
	var doc struct{ Fixtures []archFixture }
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.Len(t, doc.Fixtures, 4)
	return doc.Fixtures
}

// TestFamilies loads each fixture of README-archs.md and checks its
// configuration against fixtures-archs.json and the graph against the
// family's layout: biases on qwen2's projections, qwen3's per-head q/k
// norms before RoPE, phi3's stored attn_qkv and ffn_up used as qkv_rope
// and swiglu weights (no copy) with the window on every layer, and Llama
// 3.1's rope_freqs as the rope's frequency factors.
func TestFamilies(t *testing.T) {
	for _, fx := range archFixtures(t) {
		t.Run(fx.Architecture, func(t *testing.T) {
			f := openShared(t, fx.File)
			m, err := arch.Load(f, arch.Options{})
			require.NoError(t, err)
			c := m.Config
			require.Equal(t, fx.Architecture, c.Arch)
			require.Equal(t, []int{fx.NLayer, fx.NEmbd, fx.NHead, fx.NHeadKV, fx.HeadDim, fx.NFF, fx.NVocab, fx.NCtxTrain, fx.SlidingWin},
				[]int{c.NLayer, c.NEmbd, c.NHead, c.NHeadKV, c.HeadDim, c.NFF, c.NVocab, c.ContextLength, c.SlidingWindow})
			require.Equal(t, fx.RopeBase, c.RopeBase)
			require.InEpsilon(t, fx.RMSEps, c.RMSEps, 1e-6)
			require.Equal(t, fx.Tied, c.TiedOutput)

			ops := countOps(m.Graph)
			ropes := valuesOf(m.Graph, ir.OpRoPE)
			if fx.FusedQKV {
				ropes = valuesOf(m.Graph, ir.OpQKVRoPE)
				require.Equal(t, fx.NLayer, ops[ir.OpQKVRoPE])
				require.Equal(t, fx.NLayer, ops[ir.OpSwiGLU])
				require.Zero(t, ops[ir.OpConcat], "the fused weights are used as stored")
				for _, v := range ropes {
					require.Equal(t, ir.OpWeight, v.Args[1].Op)
				}
			}
			for _, r := range ropes {
				mode := "normal"
				if fx.Architecture != "llama" {
					mode = "neox"
				}
				require.Equal(t, mode, r.Attrs.Str("mode", ""))
				require.Equal(t, fx.RopeFreqs, r.Attrs.Floats("freq_factors"))
			}
			for _, a := range valuesOf(m.Graph, ir.OpAttention) {
				require.Equal(t, int64(fx.SlidingWin), a.Attrs.Int("window", 0))
			}
			biases := 0
			for _, v := range valuesOf(m.Graph, ir.OpMatMul) {
				if len(v.Args) == 3 {
					biases++
				}
			}
			if fx.QKVBias {
				require.Equal(t, 3*fx.NLayer, biases)
			} else {
				require.Zero(t, biases)
			}
			// qwen3: two per-head norms per layer, over [T, heads, head_dim].
			perHead := 0
			for _, n := range valuesOf(m.Graph, ir.OpRMSNorm) {
				if len(n.Type.Shape) == 3 {
					require.Equal(t, ir.D(int64(fx.HeadDim)), n.Type.Shape[2])
					perHead++
				}
			}
			if fx.QKNorm {
				require.Equal(t, 2*fx.NLayer, perHead)
			} else {
				require.Zero(t, perHead)
			}
		})
	}
}

// TestFamilyBadModels: each family refuses what it does not read — a
// tensor the architecture does not consume (which could change the math)
// is an error naming it — and what it requires.
func TestFamilyBadModels(t *testing.T) {
	files := map[string]string{}
	for _, fx := range archFixtures(t) {
		files[fx.Architecture] = fx.File
	}
	f32 := func(dims ...uint64) tensorEdit { return tensorEdit{typ: ir.F32, dims: dims} }
	cases := []struct {
		arch, name string
		edit       edit
		want       []string
	}{
		{"qwen2", "q norm on qwen2", edit{setTensor: map[string]tensorEdit{"blk.0.attn_q_norm.weight": f32(32)}}, []string{`"blk.0.attn_q_norm.weight"`, "qwen2"}},
		{"qwen2", "missing bias", edit{dropTensor: []string{"blk.1.attn_k.bias"}}, []string{`"blk.1.attn_k.bias"`}},
		{"qwen3", "bias on qwen3", edit{setTensor: map[string]tensorEdit{"blk.0.attn_q.bias": f32(512)}}, []string{`"blk.0.attn_q.bias"`}},
		{"qwen3", "missing k norm", edit{dropTensor: []string{"blk.0.attn_k_norm.weight"}}, []string{`"blk.0.attn_k_norm.weight"`}},
		{"qwen3", "k norm of the wrong size", edit{setTensor: map[string]tensorEdit{"blk.1.attn_k_norm.weight": f32(32)}}, []string{`"blk.1.attn_k_norm.weight"`}},
		{"qwen3", "yarn scaling", edit{setKV: map[string]gguf.Value{"qwen3.rope.scaling.type": gguf.String("yarn")}}, []string{"qwen3.rope.scaling.type"}},
		{"phi3", "LongRoPE factors", edit{setTensor: map[string]tensorEdit{"rope_factors_long.weight": f32(16)}}, []string{`"rope_factors_long.weight"`}},
		{"phi3", "a separate gate", edit{setTensor: map[string]tensorEdit{"blk.0.ffn_gate.weight": {typ: ir.F32, dims: []uint64{256, 512}}}}, []string{`"blk.0.ffn_gate.weight"`}},
		{"phi3", "no sliding window", edit{dropKV: []string{"phi3.attention.sliding_window"}}, []string{"phi3.attention.sliding_window"}},
		{"phi3", "no output", edit{dropTensor: []string{"output.weight"}}, []string{`"output.weight"`}},
		{"phi3", "qkv of the wrong size", edit{setTensor: map[string]tensorEdit{"blk.0.attn_qkv.weight": {typ: ir.F32, dims: []uint64{256, 256}}}}, []string{`"blk.0.attn_qkv.weight"`}},
		{"llama", "rope_freqs of the wrong size", edit{setTensor: map[string]tensorEdit{"rope_freqs.weight": f32(8)}}, []string{"rope_freqs.weight", "[8]"}},
		{"llama", "rope_freqs with a zero", edit{setTensor: map[string]tensorEdit{"rope_freqs.weight": f32(16)}}, []string{"rope_freqs.weight[0] = 0"}},
		{"llama", "an unknown tensor", edit{setTensor: map[string]tensorEdit{"blk.0.attn_sub_norm.weight": f32(128)}}, []string{`"blk.0.attn_sub_norm.weight"`, "llama"}},
	}
	for _, c := range cases {
		t.Run(c.arch+"/"+c.name, func(t *testing.T) {
			base := openShared(t, files[c.arch])
			_, err := arch.Load(rewrite(t, base, edit{}), arch.Options{})
			require.NoError(t, err, "the unedited copy loads")
			var lerr error
			require.NotPanics(t, func() { _, lerr = arch.Load(rewrite(t, base, c.edit), arch.Options{}) })
			require.Error(t, lerr)
			for _, s := range c.want {
				require.ErrorContains(t, lerr, s)
			}
		})
	}
}
