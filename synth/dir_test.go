package synth_test

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/frontend/hf"
	"github.com/minerva-llm/minerva/internal/golden"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/synth"
	"github.com/minerva-llm/minerva/tokenizer"
)

// openDir opens a model directory and builds its graph.
func openDir(t *testing.T, dir string) (*hf.Model, *arch.Model) {
	t.Helper()
	d, err := hf.Open(dir, os.Open)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	m, err := arch.LoadFile(d, arch.Options{})
	require.NoError(t, err)
	return d, m
}

// weightFile is the part of arch.File that values reads.
type weightFile interface {
	Tensor(name string) (*gguf.TensorInfo, bool)
	WeightBytes(name string) ([]byte, error)
}

// values dequantizes a graph weight of a model file.
func values(t *testing.T, f weightFile, name string) []float32 {
	t.Helper()
	ti, ok := f.Tensor(name)
	require.True(t, ok, name)
	b, err := f.WeightBytes(name)
	require.NoError(t, err)
	n := uint64(1)
	for _, d := range ti.Dims {
		n *= d
	}
	v := make([]float32, n)
	require.NoError(t, quant.Dequantize(ti.Type, b, v), name)
	return v
}

// toGGUFOrder permutes q/k rows from HF's rotate-half order back to GGUF's
// (README-hf.md: W_gguf = W_hf.reshape(n, 2, d/2, in).swapaxes(1, 2)).
func toGGUFOrder(w []float32, heads, d, in int) []float32 {
	out := make([]float32, len(w))
	for h := 0; h < heads; h++ {
		for i := 0; i < 2; i++ {
			for j := 0; j < d/2; j++ {
				copy(out[(h*d+2*j+i)*in:][:in], w[(h*d+i*d/2+j)*in:][:in])
			}
		}
	}
	return out
}

func logitsOf(t *testing.T, m *arch.Model, tokens []int32) [][]float32 {
	t.Helper()
	s, err := runtime.NewSession(m.Graph, m.Weights, len(tokens))
	require.NoError(t, err)
	rows, err := s.Eval(tokens)
	require.NoError(t, err)
	return rows
}

func worstRelErr(a, b [][]float32) float64 {
	worst := 0.0
	for i := range a {
		worst = max(worst, golden.RelErr(b[i], a[i]))
	}
	return worst
}

// TestDirMatchesGGUF: the default model written as a GGUF file and as a
// Hugging Face directory (same seed; sharded, with the index) loads to the
// same graph and weights: the matrices bit for bit (q and k after undoing
// the rotate-half permutation), the gains exactly for F32 and rounded to
// bf16 for BF16; the logits on the interpreter agree (F32: ≤ 1e-6, the
// order of sums within a head differing; BF16: ≤ 1e-2, from the gains'
// rounding); and the directory's tokenizer.json encodes text to the GGUF
// vocabulary's ids.
func TestDirMatchesGGUF(t *testing.T) {
	for _, c := range []struct {
		dt      ir.DType
		gainTol float64
		logits  float64
	}{{ir.F32, 0, 1e-6}, {ir.BF16, 1.0 / 256, 1e-2}} {
		t.Run(c.dt.String(), func(t *testing.T) {
			spec := synth.Default()
			spec.Matrix = c.dt
			f, err := gguf.Parse(write(t, spec))
			require.NoError(t, err)
			want, err := arch.Load(f, arch.Options{})
			require.NoError(t, err)

			dir := filepath.Join(t.TempDir(), "model")
			n, err := spec.WriteDir(dir, synth.DirOptions{MaxShard: 64 << 10})
			require.NoError(t, err)
			require.Greater(t, n, int64(0))
			_, err = os.Stat(filepath.Join(dir, "model.safetensors.index.json"))
			require.NoError(t, err, "more than one shard: an index")
			d, got := openDir(t, dir)
			require.Greater(t, len(d.Parts), 4, "config, index, shards, generation, tokenizer")
			wc, gc := want.Config, got.Config
			wc.RopeBase, gc.RopeBase = 0, 0
			require.Equal(t, wc, gc)

			gf := ggufFile{f}
			hd := spec.NEmbd / spec.NHead
			for _, ti := range f.Tensors {
				a, b := values(t, gf, ti.Name), values(t, d, ti.Name)
				if len(ti.Dims) == 1 {
					for i := range a {
						require.InDelta(t, a[i], b[i], c.gainTol*abs(a[i]), "%s[%d]", ti.Name, i)
					}
					continue
				}
				if heads := map[string]int{"attn_q": spec.NHead, "attn_k": spec.NHeadKV}[ti.Name[6:12]]; heads > 0 {
					b = toGGUFOrder(b, heads, hd, int(ti.Dims[0]))
				}
				require.Equal(t, a, b, ti.Name)
			}

			tokens := []int32{1, 5, 20, 100, 7, 3, 42, 9, 11, 13, 200, 300}
			worst := worstRelErr(logitsOf(t, want, tokens), logitsOf(t, got, tokens))
			t.Logf("%s: directory vs GGUF logits, max relative difference %.3g", c.dt, worst)
			require.LessOrEqual(t, worst, c.logits)

			a, err := tokenizer.New(want.Vocab)
			require.NoError(t, err)
			b, err := tokenizer.New(got.Vocab)
			require.NoError(t, err)
			for _, s := range []string{"Once upon a time, the little dog ran to the park.", "naïve café 東京 🙂", " two  spaces", "Lily and Tom"} {
				require.Equal(t, a.Encode(s, true), b.Encode(s, true), s)
			}
		})
	}
}

func abs(x float32) float64 {
	if x < 0 {
		return float64(-x)
	}
	return float64(x)
}

// ggufFile serves a parsed GGUF file's tensors to values().
type ggufFile struct{ *gguf.File }

func (g ggufFile) WeightBytes(name string) ([]byte, error) {
	ti, _ := g.File.Tensor(name)
	return g.TensorData(ti), nil
}

// TestMLXDir: the default model in MLX 4-bit (group 64) loads as MLX
// affine weights equal to quantizing the F32 model's values (so the split
// into U32 words, BF16 scales and biases is undone exactly), its config
// says so, its safetensors headers are unpadded like mlx's, and it
// generates on the interpreter.
func TestMLXDir(t *testing.T) {
	spec := synth.Default()
	spec.Matrix = ir.MLXQ4G64
	dir := filepath.Join(t.TempDir(), "mlx")
	_, err := spec.WriteDir(dir, synth.DirOptions{})
	require.NoError(t, err)
	d, got := openDir(t, dir)
	require.Contains(t, d.Quantization(), "affine, 4 bits, group 64")

	spec.Matrix = ir.F32
	f, err := gguf.Parse(write(t, spec))
	require.NoError(t, err)
	gf := ggufFile{f}
	hd := spec.NEmbd / spec.NHead
	for _, ti := range f.Tensors {
		if len(ti.Dims) == 1 {
			continue
		}
		dt, ok := d.Tensor(ti.Name)
		require.True(t, ok)
		require.Equal(t, ir.MLXQ4G64, dt.Type, ti.Name)
		src := values(t, gf, ti.Name)
		packed := make([]byte, len(src)/64*(8+32))
		require.NoError(t, quant.Quantize(ir.MLXQ4G64, src, packed))
		want := make([]float32, len(src))
		require.NoError(t, quant.Dequantize(ir.MLXQ4G64, packed, want))
		b := values(t, d, ti.Name)
		if heads := map[string]int{"attn_q": spec.NHead, "attn_k": spec.NHeadKV}[ti.Name[6:12]]; heads > 0 {
			b = toGGUFOrder(b, heads, hd, int(ti.Dims[0]))
		}
		require.Equal(t, want, b, ti.Name)
	}

	// mlx's headers are not padded: the data starts right after the JSON.
	raw, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	require.NoError(t, err)
	hlen := binary.LittleEndian.Uint64(raw)
	require.Equal(t, byte('}'), raw[8+hlen-1])
	require.Contains(t, string(raw[8:8+hlen]), `"__metadata__":{"format":"mlx"}`)

	s, err := runtime.NewSession(got.Graph, got.Weights, 32)
	require.NoError(t, err)
	tok, err := tokenizer.New(got.Vocab)
	require.NoError(t, err)
	res, err := runtime.Generate(t.Context(), s, tok.Encode("Once upon a time", true), runtime.GenerateOptions{
		MaxTokens: 8, Sampler: runtime.DefaultSampler(), EOS: -1, IgnoreEOS: true})
	require.NoError(t, err)
	require.Len(t, res.Tokens, 8)
}

// TestGPTOSSDir: gpt-oss-tiny in F32 as a directory (mlx-lm's stacked
// experts) gives the GGUF file's weights and logits; in the MXFP4-Q8
// layout its experts are the GGUF file's MXFP4 blocks byte for byte (so
// the HF nibble order is undone exactly), the other matrices 8-bit affine
// with per-module entries in config.json, and it generates.
func TestGPTOSSDir(t *testing.T) {
	spec, err := synth.GPTOSSPreset("gpt-oss-tiny", ir.F32, 1)
	require.NoError(t, err)
	f, err := gguf.Parse(writeGPTOSS(t, spec))
	require.NoError(t, err)
	want, err := arch.Load(f, arch.Options{})
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "f32")
	_, err = spec.WriteDir(dir, synth.DirOptions{})
	require.NoError(t, err)
	d, got := openDir(t, dir)
	for _, ti := range f.Tensors {
		require.Equal(t, values(t, ggufFile{f}, ti.Name), values(t, d, ti.Name), ti.Name)
	}
	tokens := []int32{5, 20, 100, 7, 3, 42, 9, 11, 13, 200}
	worst := worstRelErr(logitsOf(t, want, tokens), logitsOf(t, got, tokens))
	t.Logf("gpt-oss-tiny F32: directory vs GGUF logits, max relative difference %.3g", worst)
	require.LessOrEqual(t, worst, 1e-6)

	mx, err := synth.GPTOSSPreset("gpt-oss-tiny", ir.MXFP4, 1)
	require.NoError(t, err)
	fm, err := gguf.Parse(writeGPTOSS(t, mx))
	require.NoError(t, err)
	mx.Matrix = ir.MLXQ8G64
	dir = filepath.Join(t.TempDir(), "mlx")
	_, err = mx.WriteDir(dir, synth.DirOptions{MaxShard: 256 << 10})
	require.NoError(t, err)
	d, got = openDir(t, dir)
	for _, ti := range fm.Tensors {
		dt, ok := d.Tensor(ti.Name)
		require.True(t, ok, ti.Name)
		switch {
		case ti.Type == ir.MXFP4:
			require.Equal(t, ir.MXFP4, dt.Type)
			b, err := d.WeightBytes(ti.Name)
			require.NoError(t, err)
			require.Equal(t, fm.TensorData(&ti), b, ti.Name)
		case len(ti.Dims) >= 2 && ti.Type == ir.Q8_0 || strings.HasSuffix(ti.Name, "ffn_gate_inp.weight"):
			require.Equal(t, ir.MLXQ8G64, dt.Type, ti.Name)
		}
	}
	var cfg struct {
		Quantization map[string]json.RawMessage `json:"quantization"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &cfg))
	require.JSONEq(t, `"mxfp4"`, string(cfg.Quantization["mode"]))
	require.JSONEq(t, `{"group_size": 64, "bits": 8}`, string(cfg.Quantization["model.layers.1.mlp.router"]))
	require.JSONEq(t, `{"group_size": 64, "bits": 8}`, string(cfg.Quantization["lm_head"]))
	require.NotContains(t, cfg.Quantization, "model.layers.0.mlp.experts.gate_proj")

	s, err := runtime.NewSession(got.Graph, got.Weights, 32)
	require.NoError(t, err)
	tok, err := tokenizer.New(got.Vocab)
	require.NoError(t, err)
	res, err := runtime.Generate(t.Context(), s, tok.Encode("the little dog", false), runtime.GenerateOptions{
		MaxTokens: 8, Sampler: runtime.DefaultSampler(), EOS: -1, IgnoreEOS: true})
	require.NoError(t, err)
	require.Len(t, res.Tokens, 8)
}

// TestWriteDirRefuses: what a directory cannot hold is a one-line error,
// and an existing directory is never overwritten.
func TestWriteDirRefuses(t *testing.T) {
	spec := synth.Default()
	spec.Matrix = ir.Q4_0
	_, err := spec.WriteDir(filepath.Join(t.TempDir(), "x"), synth.DirOptions{})
	require.ErrorContains(t, err, "not q4_0")
	spec.Matrix = ir.F32
	dir := t.TempDir()
	_, err = spec.WriteDir(dir, synth.DirOptions{})
	require.ErrorContains(t, err, "already exists")
	g, err := synth.GPTOSSPreset("gpt-oss-tiny", ir.MXFP4, 1)
	require.NoError(t, err)
	_, err = g.WriteDir(filepath.Join(t.TempDir(), "y"), synth.DirOptions{})
	require.ErrorContains(t, err, "not mxfp4 experts with q8_0 matrices")
}
