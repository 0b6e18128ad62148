package synth

import (
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/safetensors"
	"github.com/minerva-llm/minerva/ir"
)

// TestPresetDirLayouts lays out the directories of the real shapes without
// drawing them (12 GB would take minutes): TinyLlama in BF16 (one shard,
// two bytes a parameter) and MLX 4-bit g64 (half a byte a weight plus BF16
// scale and bias per 64), and gpt-oss-20b as mlx-community's MXFP4-Q8:
// three shards of at most 5 GiB, 12.1 GB, MXFP4 the global quantization and
// an 8-bit group-64 entry for each of the 122 affine modules.
func TestPresetDirLayouts(t *testing.T) {
	tl := func(dt ir.DType) Llama {
		m, err := Preset("tinyllama-1.1b", dt, 1)
		require.NoError(t, err)
		return m
	}
	// TinyLlama's matrices [rows, cols] and 1-D gains.
	var matrices [][2]int64
	const nv, e, kv, ff, layers = 32000, 2048, 256, 5632, 22
	matrices = append(matrices, [2]int64{nv, e}, [2]int64{nv, e})
	for range layers {
		matrices = append(matrices, [2]int64{e, e}, [2]int64{kv, e}, [2]int64{kv, e}, [2]int64{e, e},
			[2]int64{ff, e}, [2]int64{ff, e}, [2]int64{e, ff})
	}
	gains := int64(e * (2*layers + 1))
	var params, q4 int64
	for _, m := range matrices {
		params += m[0] * m[1]
		q4 += m[0]*m[1]/2 + m[0]*m[1]/64*4
	}

	l, err := tl(ir.BF16).layout(DirOptions{})
	require.NoError(t, err)
	require.Len(t, l.shards, 1)
	require.Equal(t, 2*(params+gains), l.total)
	require.Nil(t, l.sink.quantization())

	l, err = tl(ir.MLXQ4G64).layout(DirOptions{})
	require.NoError(t, err)
	require.Equal(t, q4+2*gains, l.total)
	require.Equal(t, map[string]any{"group_size": 64, "bits": 4, "mode": "affine"}, l.sink.quantization())
	types := map[safetensors.DType]int{}
	for _, ts := range l.shards {
		for _, tn := range ts {
			types[tn.DType]++
		}
	}
	require.Equal(t, map[safetensors.DType]int{safetensors.U32: len(matrices), safetensors.BF16: 2*len(matrices) + 2*layers + 1}, types)

	g, err := GPTOSSPreset("gpt-oss-20b", ir.MXFP4, 1)
	require.NoError(t, err)
	g.Matrix = ir.MLXQ8G64
	l, err = g.layout(DirOptions{})
	require.NoError(t, err)
	require.Len(t, l.shards, 3)
	for _, ts := range l.shards {
		var n int64
		for _, tn := range ts {
			n += int64(tn.Size())
		}
		require.LessOrEqual(t, n, int64(defaultShard))
	}
	require.InDelta(t, 12.1e9, float64(l.total), 0.15e9)
	q := l.sink.quantization()
	require.Equal(t, "mxfp4", q["mode"])
	require.Len(t, q, 3+24*5+2)
	require.Equal(t, map[string]any{"group_size": 64, "bits": 8}, q["model.layers.23.mlp.router"])
	require.Equal(t, map[string]any{"group_size": 64, "bits": 8}, q["model.embed_tokens"])
	t.Logf("gpt-oss-20b MLX MXFP4-Q8: %d shards, %.3f GB of tensor data", len(l.shards), float64(l.total)/1e9)
}

// TestChunkerSplits: whatever sizes the producer writes in, the chunker
// hands on whole chunks only, the same bytes in the same order, and a
// producer that ends inside a chunk is an error.
func TestChunkerSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := make([]byte, 17*1000)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	var got []byte
	c := &chunker{size: 17, fn: func(b []byte) error {
		require.Zero(t, len(b)%17)
		got = append(got, b...)
		return nil
	}}
	require.NoError(t, c.run(func(w io.Writer) error {
		for at := 0; at < len(src); {
			n := min(len(src)-at, r.IntN(60))
			if _, err := w.Write(src[at : at+n]); err != nil {
				return err
			}
			at += n
		}
		return nil
	}))
	require.Equal(t, src, got)
	c = &chunker{size: 17, fn: func([]byte) error { return nil }}
	require.ErrorContains(t, c.run(func(w io.Writer) error { _, err := w.Write(src[:20]); return err }), "not a whole block of 17")
}
