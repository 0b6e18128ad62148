package hf_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// TestMLXTwinValues: the MLX directory stories260K-mlx-q4 (4-bit, group
// 64, BF16 scales and biases; down_proj left BF16 because 172 is not a
// multiple of 64), repacked at load into the MLX dtypes and decoded by
// quant, holds bit for bit the F32 values of the GGUF twin the reference
// engine ran on (README-hf.md: f32(scale·q + bias), q/k rows permuted back
// to GGUF order). Each weight is repacked once: the second read is the
// same bytes, and they are the size of the stored tensors, not of floats.
func TestMLXTwinValues(t *testing.T) {
	d, m := build(t, shared.Path(t, "models/hf/stories260K-mlx-q4"))
	twin, err := gguf.Open(shared.Path(t, "models/hf-gguf-twins/stories260K-mlx-q4.gguf"))
	require.NoError(t, err)
	defer twin.Close()
	c := m.Config
	types := map[ir.DType]int{}
	for _, name := range d.TensorNames() {
		info, ok := d.Tensor(name)
		require.True(t, ok)
		types[info.Type]++
		raw, err := d.WeightBytes(name)
		require.NoError(t, err)
		n := 1
		for _, x := range info.Dims {
			n *= int(x)
		}
		got := make([]float32, n)
		require.NoError(t, quant.Dequantize(info.Type, raw, got), name)
		tw, ok := twin.Tensor(name)
		require.True(t, ok, name)
		tb := twin.TensorData(tw)
		want := make([]float32, n)
		require.NoError(t, quant.Dequantize(tw.Type, tb, want), name)
		switch {
		case strings.HasSuffix(name, "attn_q.weight"):
			want = unpermute(want, c.NHead, c.HeadDim, c.NEmbd)
		case strings.HasSuffix(name, "attn_k.weight"):
			want = unpermute(want, c.NHeadKV, c.HeadDim, c.NEmbd)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s element %d: %g, the twin has %g", name, i, got[i], want[i])
			}
		}
		if info.Type == ir.MLXQ4G64 {
			again, err := d.WeightBytes(name)
			require.NoError(t, err)
			require.Same(t, &raw[0], &again[0], "%s is repacked once", name)
			require.Equal(t, n/64*40, len(raw), "%s: 40 bytes per group of 64", name)
		}
	}
	// The embedding, the output and 5 layers × 6 quantized matrices (q, k,
	// v, o, gate, up); 5 BF16 down_proj; 11 norms widened to F32.
	require.Equal(t, map[ir.DType]int{ir.MLXQ4G64: 32, ir.BF16: 5, ir.F32: 11}, types)
}
