package hf_test

import (
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/frontend/hf"
	"github.com/minerva-llm/minerva/frontend/safetensors"
	"github.com/minerva-llm/minerva/internal/mmap"
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

// TestGPTOSSExpertsAreG1s: both gpt-oss twins hold G1's MXFP4 experts
// (README-gptoss.md): openai's blocks with the nibbles in HF's order and
// gate and up interleaved by row, mlx-lm's as U32 words per projection.
// Repacked at load, every expert tensor is byte for byte the GGUF
// fixture's block_mxfp4 data; the expert biases are its F32 values rounded
// to BF16, widened back.
func TestGPTOSSExpertsAreG1s(t *testing.T) {
	g1, err := gguf.Open(shared.Path(t, "models/gguf/synthetic/gptoss-g1-mxfp4.gguf"))
	require.NoError(t, err)
	defer g1.Close()
	for _, dir := range []string{"gptoss-g1-hf", "gptoss-g1-mlx"} {
		t.Run(dir, func(t *testing.T) {
			d, m := build(t, shared.Path(t, "models/hf/"+dir))
			require.Equal(t, "gpt-oss", m.Config.Arch)
			require.Equal(t, 8, m.Config.NExpert)
			require.Equal(t, 2, m.Config.NExpertUsed)
			require.Equal(t, []int{0}, m.Config.SlidingLayers)
			require.Equal(t, "yarn", m.Config.RopeScaling)
			n := 0
			for _, name := range d.TensorNames() {
				if !strings.Contains(name, "_exps.") {
					continue
				}
				info, _ := d.Tensor(name)
				want, ok := g1.Tensor(name)
				require.True(t, ok, name)
				require.Equal(t, want.Dims, info.Dims, name)
				got, err := d.WeightBytes(name)
				require.NoError(t, err)
				if strings.HasSuffix(name, ".weight") {
					require.Equal(t, ir.MXFP4, info.Type, name)
					require.Equal(t, g1.TensorData(want), got, "%s: G1's blocks", name)
				} else {
					require.Equal(t, ir.F32, info.Type, name)
					ref := make([]float32, len(got)/4)
					require.NoError(t, quant.Dequantize(want.Type, g1.TensorData(want), ref))
					vals := make([]float32, len(got)/4)
					require.NoError(t, quant.Dequantize(ir.F32, got, vals))
					for i := range ref {
						require.Equal(t, quant.BF16ToF32(quant.F32ToBF16(ref[i])), vals[i], "%s element %d", name, i)
					}
				}
				n++
			}
			require.Equal(t, 12, n, "2 layers × gate, up, down × weight, bias")
		})
	}
}

// TestRepackReleasesPages: once an MLX directory's quantized tensors are
// repacked (llama-p-mlx-q4: every matrix 4-bit; gptoss-g1-mlx: MXFP4
// experts and 8-bit affine), their mapped pages leave the resident set, so
// the model is not held twice (the gpt-oss twin, 15 MB, keeps 1 %); the
// stored bytes still read the same (from
// the page cache). Linux only (/proc/self/smaps).
func TestRepackReleasesPages(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("needs /proc/self/smaps")
	}
	for _, dir := range []string{"models/hf/llama-p-mlx-q4", "models/hf/gptoss-g1-mlx"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			d, _ := build(t, shared.Path(t, dir))
			// Read every stored byte, as a first pass over the file would.
			before := map[string][]byte{}
			files := map[*safetensors.File]bool{}
			var size int64
			for _, name := range d.Tensors.Names() {
				tn, f, _ := d.Tensors.Tensor(name)
				before[name] = append([]byte(nil), f.Data(tn)...)
				if !files[f] {
					files[f] = true
					size += f.Size()
				}
			}
			resident := func() int64 {
				var n int64
				for f := range files {
					r, err := mmap.Resident(f.Header())
					require.NoError(t, err)
					n += r
				}
				return n
			}
			require.Greater(t, resident(), size*9/10, "read pages are resident")
			for _, name := range d.TensorNames() {
				_, err := d.WeightBytes(name)
				require.NoError(t, err)
			}
			after := resident()
			t.Logf("%s: %d bytes of shards, %d resident after the repack", dir, size, after)
			// Left: the headers, the float tensors (norms, biases), and the
			// pages a tensor shares with its neighbours at either end.
			shared := int64(2 * os.Getpagesize() * len(before))
			require.Less(t, after, size/10+shared, "the repacked tensors' pages are released")
			for _, name := range d.Tensors.Names() {
				tn, f, _ := d.Tensors.Tensor(name)
				require.Equal(t, before[name], f.Data(tn), name)
			}
		})
	}
}

// TestRepackInSlices: repacking a slice of rows (MLX affine) or blocks
// (MXFP4) at a time, released as it goes, gives the bytes of the repack in
// one piece, with slices that divide nothing evenly (1000 bytes).
func TestRepackInSlices(t *testing.T) {
	for _, dir := range []string{"models/hf/llama-p-mlx-q4", "models/hf/llama-p-mlx-q8-g32", "models/hf/gptoss-g1-mlx"} {
		whole, _ := build(t, shared.Path(t, dir))
		want := map[string][]byte{}
		for _, name := range whole.TensorNames() {
			b, err := whole.WeightBytes(name)
			require.NoError(t, err)
			want[name] = b
		}
		hf.SetRepackSlice(t, 1000)
		sliced, _ := build(t, shared.Path(t, dir))
		for _, name := range sliced.TensorNames() {
			b, err := sliced.WeightBytes(name)
			require.NoError(t, err)
			require.Equal(t, want[name], b, "%s %s", dir, name)
		}
		hf.SetRepackSlice(t, 16<<20)
	}
}
