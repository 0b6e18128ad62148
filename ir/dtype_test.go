package ir

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDTypeNamesRoundTrip(t *testing.T) {
	require.NotEmpty(t, dtypes)
	for d := range dtypes {
		name := d.String()
		require.True(t, d.Known(), name)
		got, ok := ParseDType(name)
		require.True(t, ok, name)
		require.Equal(t, d, got, name)
		// GGUF tools print upper-case names; they must map to the same type.
		got, ok = ParseDType(strings.ToUpper(name))
		require.True(t, ok, name)
		require.Equal(t, d, got, name)
	}
}

func TestDTypeUnknown(t *testing.T) {
	for _, name := range []string{"", "f33", "q4", "dtype(5)", "f32 "} {
		_, ok := ParseDType(name)
		require.False(t, ok, "%q", name)
	}
	// 4 and 5 are ggml ids that were retired (q4_2, q4_3).
	require.False(t, DType(5).Known())
	require.Equal(t, "dtype(5)", DType(5).String())
}

// TestMLXAffineDTypes: one dtype per (bits, group), named for both, found
// back from them; no other combination has one.
func TestMLXAffineDTypes(t *testing.T) {
	for _, bits := range []int{4, 8} {
		for _, group := range []int{32, 64, 128} {
			d, ok := MLXAffine(bits, group)
			require.True(t, ok)
			require.True(t, d.Quantized())
			require.Equal(t, fmt.Sprintf("mlx_q%d_g%d", bits, group), d.String())
			b, g, ok := d.MLXAffineParams()
			require.True(t, ok)
			require.Equal(t, [2]int{bits, group}, [2]int{b, g})
		}
	}
	for _, c := range [][2]int{{3, 64}, {4, 16}, {2, 32}, {8, 256}} {
		_, ok := MLXAffine(c[0], c[1])
		require.False(t, ok, "%v", c)
	}
	_, _, ok := Q4_1.MLXAffineParams()
	require.False(t, ok)
}

func TestDTypeProperties(t *testing.T) {
	require.True(t, F32.IsFloat())
	require.True(t, BF16.IsFloat())
	require.False(t, I32.IsFloat())
	require.False(t, Q4_0.IsFloat())
	require.True(t, Q4_K.Quantized())
	require.False(t, F16.Quantized())
	require.Equal(t, 256, Q6_K.BlockSize())
	require.Equal(t, 210, Q6_K.BlockBytes())
}

func TestRowBytes(t *testing.T) {
	tests := []struct {
		d    DType
		n    int64
		want int64
		err  string
	}{
		{F32, 0, 0, ""},
		{F32, 10, 40, ""},
		{BF16, 7, 14, ""},
		{I8, 3, 3, ""},
		{Q4_0, 64, 36, ""},
		{Q4_K, 512, 288, ""},
		{MXFP4, 32, 17, ""},
		{MLXQ4G64, 128, 80, ""},
		{MLXQ8G32, 64, 80, ""},
		{MLXQ8G128, 256, 272, ""},
		{MLXQ4G128, 64, 0, "not a multiple of the block size 128"},
		// The largest count that still fits: 2^60 f32 values take 2^62 bytes.
		{F32, 1 << 60, 1 << 62, ""},
		{Q4_0, 33, 0, "not a multiple of the block size 32"},
		{Q4_K, 100, 0, "not a multiple of the block size 256"},
		{F32, 1<<60 + 1, 0, "overflow"},
		{Q8_0, 1 << 62, 0, "overflow"},
		{F16, -1, 0, "negative"},
		{DType(5), 32, 0, "unknown dtype"},
	}
	for _, tc := range tests {
		got, err := tc.d.RowBytes(tc.n)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "%s × %d", tc.d, tc.n)
			continue
		}
		require.NoError(t, err, "%s × %d", tc.d, tc.n)
		require.Equal(t, tc.want, got, "%s × %d", tc.d, tc.n)
	}
}
