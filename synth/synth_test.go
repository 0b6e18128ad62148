package synth_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
	"github.com/minerva-llm/minerva/synth"
	"github.com/minerva-llm/minerva/tokenizer"
)

func write(t *testing.T, m synth.Llama) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := m.Write(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(buf.Len()), n)
	return buf.Bytes()
}

func TestDefaultModelLoads(t *testing.T) {
	spec := synth.Default()
	f, err := gguf.Parse(write(t, spec))
	require.NoError(t, err)
	m, err := arch.Load(f, arch.Options{})
	require.NoError(t, err)
	require.Equal(t, spec.NLayer, m.Config.NLayer)
	require.Equal(t, spec.NHeadKV, m.Config.NHeadKV)
	require.Equal(t, len(spec.Tokens), m.Config.NVocab)
	require.Len(t, f.Tensors, 2+9*spec.NLayer+1)

	// Every tensor holds real values: never all zeros, norms near 1.
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		vals := make([]float32, ti.Elements())
		require.NoError(t, quant.Dequantize(ti.Type, f.TensorData(ti), vals))
		var nonzero int
		for _, v := range vals {
			if v != 0 {
				nonzero++
			}
		}
		require.Greater(t, nonzero, len(vals)*9/10, "%s is mostly zeros", ti.Name)
	}

	// The vocabulary encodes any text (byte fallback) and decodes it back.
	tok, err := tokenizer.New(m.Vocab)
	require.NoError(t, err)
	for _, s := range []string{"Once upon a time", "naïve café 東京 🙂", ""} {
		ids := tok.Encode(s, false)
		require.Equal(t, s, trimSpace(tok.Decode(ids)))
	}
}

// trimSpace drops the leading space SentencePiece adds.
func trimSpace(s string) string {
	if len(s) > 0 && s[0] == ' ' {
		return s[1:]
	}
	return s
}

func TestDeterministicAndSeeded(t *testing.T) {
	a, b := write(t, synth.Default()), write(t, synth.Default())
	require.Equal(t, a, b, "same spec, same bytes")
	other := synth.Default()
	other.Seed = 2
	require.NotEqual(t, a, write(t, other))
}

func TestQuantizedMatrices(t *testing.T) {
	for _, d := range []ir.DType{ir.F16, ir.Q8_0, ir.Q4_0} {
		spec := synth.Default()
		spec.Matrix = d
		f, err := gguf.Parse(write(t, spec))
		require.NoError(t, err)
		ti, ok := f.Tensor("blk.0.ffn_up.weight")
		require.True(t, ok)
		require.Equal(t, d, ti.Type)
		norm, _ := f.Tensor("blk.0.ffn_norm.weight")
		require.Equal(t, ir.F32, norm.Type, "norms stay f32")
		_, err = arch.Load(f, arch.Options{})
		require.NoError(t, err)
	}
}

func TestBadSpecs(t *testing.T) {
	spec := synth.Default()
	spec.NHead = 5 // 64 is not a multiple of 5
	_, err := spec.Write(&bytes.Buffer{})
	require.ErrorContains(t, err, "heads")
	spec = synth.Default()
	spec.Scores = spec.Scores[:3]
	_, err = spec.Write(&bytes.Buffer{})
	require.ErrorContains(t, err, "vocabulary")
	spec = synth.Default()
	spec.Matrix = ir.Q4_K
	spec.NEmbd = 96 // not a multiple of the 256-element K-quant block
	spec.NHead, spec.NHeadKV = 4, 2
	_, err = spec.Write(&bytes.Buffer{})
	require.Error(t, err)
}

func TestPresets(t *testing.T) {
	_, err := synth.Preset("gpt-5", ir.Q4_0, 1)
	require.ErrorContains(t, err, "stories15m")
	// stories15m: the published llama2.c shape, Llama-2 vocabulary size.
	spec, err := synth.Preset("stories15m", ir.Q8_0, 1)
	require.NoError(t, err)
	f, err := gguf.Parse(write(t, spec))
	require.NoError(t, err)
	m, err := arch.Load(f, arch.Options{})
	require.NoError(t, err)
	c := m.Config
	require.Equal(t, [6]int{6, 288, 6, 6, 768, 32000}, [6]int{c.NLayer, c.NEmbd, c.NHead, c.NHeadKV, c.NFF, c.NVocab})
	ti, _ := f.Tensor("blk.5.ffn_down.weight")
	require.Equal(t, []uint64{768, 288}, ti.Dims)
	require.Equal(t, ir.Q8_0, ti.Type)
}
