package synth_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/synth"
	"github.com/minerva-llm/minerva/tokenizer"
)

func writeGPTOSS(t *testing.T, m synth.GPTOSS) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := m.Write(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(buf.Len()), n)
	return buf.Bytes()
}

// TestGPTOSSTiny: the tiny preset loads as gpt-oss with its shapes, every
// tensor holds real values (never mostly zeros), the vocabulary round-trips
// text, and the model generates on the reference interpreter.
func TestGPTOSSTiny(t *testing.T) {
	for _, dt := range []ir.DType{ir.MXFP4, ir.F32} {
		t.Run(dt.String(), func(t *testing.T) {
			spec, err := synth.GPTOSSPreset("gpt-oss-tiny", dt, 1)
			require.NoError(t, err)
			f, err := gguf.Parse(writeGPTOSS(t, spec))
			require.NoError(t, err)
			m, err := arch.Load(f, arch.Options{})
			require.NoError(t, err)
			c := m.Config
			require.Equal(t, "gpt-oss", c.Arch)
			require.Equal(t, [9]int{2, 64, 4, 2, 32, 4, 2, 64, 512},
				[9]int{c.NLayer, c.NEmbd, c.NHead, c.NHeadKV, c.HeadDim, c.NExpert, c.NExpertUsed, c.NFFExp, c.NVocab})
			require.Equal(t, "yarn", c.RopeScaling)
			require.Equal(t, []int{0}, c.SlidingLayers)
			require.Len(t, f.Tensors, 3+19*spec.NLayer)
			ti, _ := f.Tensor("blk.1.ffn_down_exps.weight")
			require.Equal(t, []uint64{64, 64, 4}, ti.Dims)
			require.Equal(t, dt, ti.Type)
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				vals := make([]float32, ti.Elements())
				require.NoError(t, quant.Dequantize(ti.Type, f.TensorData(ti), vals))
				nonzero := 0
				for _, v := range vals {
					if v != 0 {
						nonzero++
					}
				}
				require.Greater(t, nonzero, len(vals)*8/10, "%s is mostly zeros", ti.Name)
			}
			tok, err := tokenizer.New(m.Vocab)
			require.NoError(t, err)
			text := "the little dog ran to the park, 東京 🙂"
			ids := tok.Encode(text, false)
			require.Equal(t, text, tok.Decode(ids))
			require.Less(t, len(ids), len(text), "word merges shorten the encoding")

			s, err := runtime.NewSession(m.Graph, m.Weights, 32)
			require.NoError(t, err)
			res, err := runtime.Generate(context.Background(), s, ids, runtime.GenerateOptions{
				MaxTokens: 8, Sampler: runtime.DefaultSampler(), EOS: -1, IgnoreEOS: true,
			})
			require.NoError(t, err)
			require.Len(t, res.Tokens, 8)
		})
	}
}

// TestGPTOSSDeterministic: the bytes depend on the seed alone, not on the
// number of CPUs that drew the pieces.
func TestGPTOSSDeterministic(t *testing.T) {
	spec, err := synth.GPTOSSPreset("gpt-oss-tiny", ir.MXFP4, 1)
	require.NoError(t, err)
	a := writeGPTOSS(t, spec)
	prev := goruntime.GOMAXPROCS(1)
	b := writeGPTOSS(t, spec)
	goruntime.GOMAXPROCS(prev)
	require.Equal(t, a, b)
	spec.Seed = 2
	require.NotEqual(t, a, writeGPTOSS(t, spec))
}

// stopAfter keeps the first limit bytes written to it and then fails, so a
// test can take the header of a file far too large to generate.
type stopAfter struct {
	buf   bytes.Buffer
	limit int
}

var errStop = errors.New("enough")

func (s *stopAfter) Write(p []byte) (int, error) {
	if s.buf.Len() >= s.limit {
		return 0, errStop
	}
	s.buf.Write(p)
	return len(p), nil
}

// TestGPTOSS20BShapes checks the gpt-oss-20b preset without writing its
// 12 GB: the header (metadata and tensor table) is taken from the start of
// the stream, placed in a sparse file as long as the whole model, and loaded
// by the frontend, which checks every tensor's shape. The tensor mix is the
// real file's (ggml-org gpt-oss-20b, README-gptoss.md): 98 Q8_0, 72 MXFP4 and
// 289 F32 tensors, about 12.1 GB.
func TestGPTOSS20BShapes(t *testing.T) {
	spec, err := synth.GPTOSSPreset("gpt-oss-20b", ir.MXFP4, 1)
	require.NoError(t, err)
	w := &stopAfter{limit: 32 << 20}
	_, err = spec.Write(w)
	require.ErrorIs(t, err, errStop)
	path := filepath.Join(t.TempDir(), "gpt-oss-20b.gguf")
	require.NoError(t, os.WriteFile(path, w.buf.Bytes(), 0o644))
	require.NoError(t, os.Truncate(path, 13<<30)) // sparse: no disk is used
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	m, err := arch.Load(f, arch.Options{})
	require.NoError(t, err)
	c := m.Config
	require.Equal(t, [10]int{24, 2880, 64, 8, 64, 32, 4, 2880, 128, 201088},
		[10]int{c.NLayer, c.NEmbd, c.NHead, c.NHeadKV, c.HeadDim, c.NExpert, c.NExpertUsed, c.NFFExp, c.SlidingWindow, c.NVocab})
	require.Equal(t, 150000.0, c.RopeBase)
	require.Equal(t, 1/32.0, c.RopeFreqScale)
	require.Equal(t, 4096, c.RopeOrigCtx)

	count := map[ir.DType]int{}
	var total uint64
	for _, ti := range f.Tensors {
		count[ti.Type]++
		total += ti.Size
	}
	require.Equal(t, map[ir.DType]int{ir.Q8_0: 98, ir.MXFP4: 72, ir.F32: 289}, count)
	require.InDelta(t, 12.1e9, float64(total), 0.1e9, "tensor bytes")
	t.Logf("gpt-oss-20b preset: %d tensors, %.3f GB of tensor data", len(f.Tensors), float64(total)/1e9)
}

func TestGPTOSSBadSpecs(t *testing.T) {
	_, err := synth.GPTOSSPreset("gpt-oss-7b", ir.MXFP4, 1)
	require.ErrorContains(t, err, "gpt-oss-20b")
	for _, c := range []struct {
		name string
		edit func(*synth.GPTOSS)
		want string
	}{
		{"kv heads", func(m *synth.GPTOSS) { m.NHeadKV = 3 }, "kv heads"},
		{"experts used", func(m *synth.GPTOSS) { m.NExpertUsed = 5 }, "expert_used_count"},
		{"no merges", func(m *synth.GPTOSS) { m.Merges = nil }, "vocabulary"},
		{"experts not writable", func(m *synth.GPTOSS) { m.Experts = ir.I32 }, "cannot write"},
		{"n_ff_exp not a block multiple", func(m *synth.GPTOSS) { m.NFFExp = 40 }, "block size"},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec, err := synth.GPTOSSPreset("gpt-oss-tiny", ir.MXFP4, 1)
			require.NoError(t, err)
			c.edit(&spec)
			_, err = spec.Write(&bytes.Buffer{})
			require.ErrorContains(t, err, c.want)
		})
	}
}
