package arch_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/synth"
)

// TestConfig: the configuration read from real files and from a synthetic
// one. RMSEps is stored as float32 in the files, so it is compared within
// 1e-12 of the float32 value.
func TestConfig(t *testing.T) {
	cases := []struct {
		name string
		file func(t *testing.T) *gguf.File
		want arch.Config
	}{
		{"stories260K", func(t *testing.T) *gguf.File { return openShared(t, "models/gguf/stories260K.gguf") }, arch.Config{
			Arch: "llama", NLayer: 5, NEmbd: 64, NHead: 8, NHeadKV: 4, HeadDim: 8, NFF: 172, NVocab: 512, NRot: 8,
			ContextLength: 2048, RopeBase: 10000, RopeFreqScale: 1, RMSEps: float64(float32(1e-5)),
		}},
		{"llama-2-tiny-random", func(t *testing.T) *gguf.File { return openShared(t, "models/gguf/llama-2-tiny-random.gguf") }, arch.Config{
			Arch: "llama", NLayer: 1, NEmbd: 8, NHead: 2, NHeadKV: 2, HeadDim: 4, NFF: 32, NVocab: 32000, NRot: 4,
			ContextLength: 4096, RopeBase: 10000, RopeFreqScale: 1, RMSEps: float64(float32(1e-5)),
		}},
		{"llama-p-Q4_K", func(t *testing.T) *gguf.File { return openShared(t, "models/gguf/synthetic/llama-p-Q4_K.gguf") }, arch.Config{
			Arch: "llama", NLayer: 2, NEmbd: 256, NHead: 8, NHeadKV: 4, HeadDim: 32, NFF: 512, NVocab: 512, NRot: 32,
			ContextLength: 512, RopeBase: 10000, RopeFreqScale: 1, RMSEps: float64(float32(1e-5)),
		}},
		{"synth default", func(t *testing.T) *gguf.File { return synthFile(t, synth.Default()) }, arch.Config{
			Arch: "llama", NLayer: 2, NEmbd: 64, NHead: 4, NHeadKV: 2, HeadDim: 16, NFF: 192, NVocab: len(synth.Default().Tokens), NRot: 16,
			ContextLength: 512, RopeBase: 10000, RopeFreqScale: 1, RMSEps: float64(float32(1e-5)),
		}},
		{"synth tied", func(t *testing.T) *gguf.File { m := synth.Default(); m.Tied = true; return synthFile(t, m) }, arch.Config{
			Arch: "llama", NLayer: 2, NEmbd: 64, NHead: 4, NHeadKV: 2, HeadDim: 16, NFF: 192, NVocab: len(synth.Default().Tokens), NRot: 16,
			ContextLength: 512, RopeBase: 10000, RopeFreqScale: 1, RMSEps: float64(float32(1e-5)), TiedOutput: true,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := arch.Load(c.file(t), arch.Options{})
			require.NoError(t, err)
			got := m.Config
			require.InDelta(t, c.want.RMSEps, got.RMSEps, 1e-12)
			got.RMSEps = c.want.RMSEps
			require.Equal(t, c.want, got)
			require.Len(t, m.Vocab.Tokens, c.want.NVocab)
		})
	}
}

// TestGraph: for real and synthetic models, f32 and f16 caches, the graph
// verifies; it outputs logits f32[T, n_vocab] and a k and v cache per layer
// of the cache type; it has 7·n_layer+1 matmuls, n_layer attentions,
// 2·n_layer ropes and kvwrites; every weight has the file's dtype and
// (reversed) dims and is served with the right byte count; rope and
// attention carry the configuration.
func TestGraph(t *testing.T) {
	cases := []struct {
		name   string
		file   func(t *testing.T) *gguf.File
		cache  ir.DType
		matrix ir.DType // dtype of every 2-D weight
	}{
		{"stories260K", func(t *testing.T) *gguf.File { return openShared(t, "models/gguf/stories260K.gguf") }, ir.F32, ir.F32},
		{"llama-2-tiny-random f16 cache", func(t *testing.T) *gguf.File { return openShared(t, "models/gguf/llama-2-tiny-random.gguf") }, ir.F16, ir.F16},
		{"llama-p-Q4_K", func(t *testing.T) *gguf.File { return openShared(t, "models/gguf/synthetic/llama-p-Q4_K.gguf") }, ir.F32, ir.Q4_K},
		{"synth q8_0 tied", func(t *testing.T) *gguf.File {
			m := synth.Default()
			m.Matrix, m.Tied = ir.Q8_0, true
			return synthFile(t, m)
		}, ir.F16, ir.Q8_0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := c.file(t)
			m, err := arch.Load(f, arch.Options{CacheType: c.cache})
			require.NoError(t, err)
			g, cfg := m.Graph, m.Config
			require.NoError(t, ir.Verify(g))
			L := cfg.NLayer

			logits := g.Output("logits")
			require.NotNil(t, logits)
			require.True(t, logits.Type.Equal(ir.Type{DType: ir.F32, Shape: ir.S("T", cfg.NVocab)}), "logits type %s", logits.Type)
			require.Len(t, g.Outputs, 2*L+1)
			kvDim := cfg.NHeadKV * cfg.HeadDim
			for l := 0; l < L; l++ {
				for _, kv := range []string{"k", "v"} {
					o := g.Output(fmt.Sprintf("cache.%d.%s", l, kv))
					require.NotNil(t, o, "cache.%d.%s", l, kv)
					require.Equal(t, ir.OpKVWrite, o.Op)
					require.True(t, o.Type.Equal(ir.Type{DType: c.cache, Shape: ir.S("C", kvDim)}), "cache type %s", o.Type)
				}
			}

			n := countOps(g)
			require.Equal(t, 7*L+1, n[ir.OpMatMul], "matmuls")
			require.Equal(t, L, n[ir.OpAttention], "attentions")
			require.Equal(t, 2*L, n[ir.OpRoPE], "ropes")
			require.Equal(t, 2*L, n[ir.OpKVWrite], "kvwrites")
			require.Equal(t, 2*L, n[ir.OpState], "states")
			require.Equal(t, 2*L+1, n[ir.OpRMSNorm], "rmsnorms")
			require.Equal(t, 1, n[ir.OpEmbed], "embeds")
			require.Equal(t, 2, n[ir.OpInput], "inputs")

			// Every tensor of these files is used, each once as a weight.
			weights := valuesOf(g, ir.OpWeight)
			require.Len(t, weights, len(f.Tensors))
			for _, w := range weights {
				ti, ok := f.Tensor(w.Name())
				require.True(t, ok, w.Name())
				require.Equal(t, ti.Type, w.Type.DType, "%s dtype", w.Name())
				want := c.matrix
				if len(ti.Dims) == 1 {
					want = ir.F32 // norms stay f32
				}
				require.Equal(t, want, w.Type.DType, "%s dtype", w.Name())
				require.Len(t, w.Type.Shape, len(ti.Dims))
				for i, d := range w.Type.Shape {
					require.Equal(t, ir.D(int64(ti.Dims[len(ti.Dims)-1-i])), d, "%s shape %s, GGUF dims %v", w.Name(), w.Type.Shape, ti.Dims)
				}
				raw, err := m.Weights.WeightBytes(w.Name())
				require.NoError(t, err)
				size, err := w.Type.DType.RowBytes(ti.Elements())
				require.NoError(t, err)
				require.Len(t, raw, int(size), w.Name())
			}
			_, err = m.Weights.WeightBytes("no.such.weight")
			require.ErrorContains(t, err, "no.such.weight")

			for _, r := range valuesOf(g, ir.OpRoPE) {
				require.Equal(t, int64(cfg.HeadDim), r.Attrs.Int("head_dim", 0))
				require.Equal(t, int64(cfg.NRot), r.Attrs.Int("n_rot", 0))
				require.Equal(t, cfg.RopeBase, r.Attrs.Float("base", 0))
				require.Equal(t, 1.0, r.Attrs.Float("freq_scale", 0))
				require.Equal(t, "normal", r.Attrs.Str("mode", ""))
				require.Same(t, g.Values[1], r.Args[1], "rope positions are the pos input")
			}
			for _, a := range valuesOf(g, ir.OpAttention) {
				require.Equal(t, int64(cfg.NHead), a.Attrs.Int("n_head", 0))
				require.Equal(t, int64(cfg.NHeadKV), a.Attrs.Int("n_kv_head", 0))
				require.Equal(t, int64(cfg.HeadDim), a.Attrs.Int("head_dim", 0))
				require.InDelta(t, 1/math.Sqrt(float64(cfg.HeadDim)), a.Attrs.Float("scale", 0), 1e-15)
				require.Zero(t, a.Attrs.Int("window", 0))
				require.Len(t, a.Args, 4, "no sinks")
			}
		})
	}
}

// TestTiedOutput: a model without output.weight computes its logits with
// token_embd.weight — the same weight value the embedding reads — and gives
// finite logits bit-identical to those of the same model whose
// output.weight is a copy of token_embd.weight.
func TestTiedOutput(t *testing.T) {
	sm := synth.Default()
	sm.Tied = true
	tiedFile := synthFile(t, sm)
	_, has := tiedFile.Tensor("output.weight")
	require.False(t, has, "synth Tied must omit output.weight")
	emb, ok := tiedFile.Tensor("token_embd.weight")
	require.True(t, ok)
	untiedFile := rewrite(t, tiedFile, edit{setTensor: map[string]tensorEdit{
		"output.weight": {typ: emb.Type, dims: emb.Dims, data: tiedFile.TensorData(emb)},
	}})

	tied, err := arch.Load(tiedFile, arch.Options{})
	require.NoError(t, err)
	require.True(t, tied.Config.TiedOutput)
	g := tied.Graph
	require.Nil(t, g.Lookup(ir.OpWeight, "output.weight"))
	embd := g.Lookup(ir.OpWeight, "token_embd.weight")
	require.NotNil(t, embd)
	logits := g.Output("logits")
	require.Equal(t, ir.OpMatMul, logits.Op)
	require.Same(t, embd, logits.Args[1], "logits must be computed with token_embd.weight")
	require.Same(t, embd, valuesOf(g, ir.OpEmbed)[0].Args[0])

	untied, err := arch.Load(untiedFile, arch.Options{})
	require.NoError(t, err)
	require.False(t, untied.Config.TiedOutput)
	require.NotSame(t, untied.Graph.Lookup(ir.OpWeight, "token_embd.weight"), untied.Graph.Output("logits").Args[1])

	prompt := []int32{1, 300, 301, 42, 7}
	eval := func(m *arch.Model) [][]float32 {
		s, err := runtime.NewSession(m.Graph, m.Weights, 8)
		require.NoError(t, err)
		rows, err := s.Eval(prompt)
		require.NoError(t, err)
		return rows
	}
	a, b := eval(tied), eval(untied)
	require.Equal(t, b, a, "tied logits differ from output.weight = token_embd.weight")
	for i, row := range a {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, x := range row {
			require.False(t, math.IsNaN(float64(x)) || math.IsInf(float64(x), 0), "row %d", i)
			lo, hi = math.Min(lo, float64(x)), math.Max(hi, float64(x))
		}
		require.Greater(t, hi-lo, 1e-3, "row %d logits are flat", i)
	}
}

// TestRopeScaling: linear rope scaling by 4 gives freq_scale 0.25 in the
// config and in every rope op, whether written as llama.rope.scale_linear or
// as llama.rope.scaling.type "linear" + llama.rope.scaling.factor. The keys
// are read as llama.cpp reads them (the type defaults to linear, "none"
// disables scaling, scaling.factor wins over scale_linear); a scaling type
// the frontend cannot honour (yarn) is an error naming the key, not a model
// silently run without it.
func TestRopeScaling(t *testing.T) {
	base := synthFile(t, synth.Default())
	cases := []struct {
		name  string
		kv    map[string]gguf.Value
		scale float64
		err   string
	}{
		{"none", nil, 1, ""},
		{"scale_linear 4", map[string]gguf.Value{"llama.rope.scale_linear": gguf.Float32(4)}, 0.25, ""},
		{"scaling.type linear factor 4", map[string]gguf.Value{
			"llama.rope.scaling.type": gguf.String("linear"), "llama.rope.scaling.factor": gguf.Float32(4),
		}, 0.25, ""},
		{"scaling.type linear factor 2.5", map[string]gguf.Value{
			"llama.rope.scaling.type": gguf.String("linear"), "llama.rope.scaling.factor": gguf.Float32(2.5),
		}, 0.4, ""},
		{"factor without type is linear", map[string]gguf.Value{"llama.rope.scaling.factor": gguf.Float32(4)}, 0.25, ""},
		{"scaling.factor wins over scale_linear", map[string]gguf.Value{
			"llama.rope.scaling.factor": gguf.Float32(4), "llama.rope.scale_linear": gguf.Float32(2),
		}, 0.25, ""},
		{"scaling.type none ignores the factor", map[string]gguf.Value{
			"llama.rope.scaling.type": gguf.String("none"), "llama.rope.scaling.factor": gguf.Float32(4),
		}, 1, ""},
		{"scaling.type not a string", map[string]gguf.Value{"llama.rope.scaling.type": gguf.Uint32(1)}, 0, "llama.rope.scaling.type"},
		{"negative factor", map[string]gguf.Value{"llama.rope.scale_linear": gguf.Float32(-4)}, 0, "scaling factor -4"},
		{"scaling.type yarn", map[string]gguf.Value{
			"llama.rope.scaling.type": gguf.String("yarn"), "llama.rope.scaling.factor": gguf.Float32(4),
		}, 0, "llama.rope.scaling.type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := arch.Load(rewrite(t, base, edit{setKV: c.kv}), arch.Options{})
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.InDelta(t, c.scale, m.Config.RopeFreqScale, 1e-7)
			ropes := valuesOf(m.Graph, ir.OpRoPE)
			require.Len(t, ropes, 2*m.Config.NLayer)
			for _, r := range ropes {
				require.InDelta(t, c.scale, r.Attrs.Float("freq_scale", 0), 1e-7)
			}
		})
	}
}

// TestCacheTypeOption: f32, f16 and q8_0 caches are accepted, K and V
// apart; another type is refused, naming it.
func TestCacheTypeOption(t *testing.T) {
	f := synthFile(t, synth.Default())
	_, err := arch.Load(f, arch.Options{CacheType: ir.Q4_0})
	require.ErrorContains(t, err, "KV cache type q4_0")
	_, err = arch.Load(f, arch.Options{CacheType: ir.F16, VCacheType: ir.BF16})
	require.ErrorContains(t, err, "V cache type bf16")
	m, err := arch.Load(f, arch.Options{CacheType: ir.Q8_0, VCacheType: ir.F16})
	require.NoError(t, err)
	for _, v := range m.Graph.Values {
		if v.Op == ir.OpState {
			want := ir.Q8_0
			if strings.HasSuffix(v.Name(), ".v") {
				want = ir.F16
			}
			require.Equal(t, want, v.Type.DType, v.Name())
		}
	}
}
