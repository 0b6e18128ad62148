package passes

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

func TestDefaultAttentionTiles(t *testing.T) {
	for _, c := range []struct{ hd, kv int64 }{
		{0, 128}, {1, 128}, {8, 128}, {64, 128}, {80, 64}, {96, 64}, {128, 64}, {192, 32}, {256, 32}, {512, 16}, {4096, 16},
	} {
		got := DefaultAttentionTiles(c.hd)
		require.Equal(t, AttentionTiles{TileQ: 16, TileKV: c.kv, KVSplits: 4}, got, "head_dim %d", c.hd)
	}
}

func taLoadCase(t *testing.T, pass, name string) *ir.Graph {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "testdata", "passes", pass, name+".in.mir"))
	require.NoError(t, err)
	g, err := ir.Parse(string(src))
	require.NoError(t, err)
	return g
}

// TestTileAttentionRules: a backend's own rule is applied as given, and any
// tiling computes what attention does (the interpreter runs the tiled
// algorithm), including one-row KV tiles and more splits than visible rows.
func TestTileAttentionRules(t *testing.T) {
	for _, tiles := range []AttentionTiles{{1, 1, 1}, {2, 1, 3}, {3, 2, 7}, {16, 5, 16}, {64, 1024, 2}} {
		for _, name := range []string{"llama", "gqa", "window-sinks"} {
			before := taLoadCase(t, "tile-attention", name)
			g := taLoadCase(t, "tile-attention", name)
			p := TileAttention(func(int64) AttentionTiles { return tiles })
			_, err := Run(g, []Pass{p}, Options{VerifyEach: true})
			require.NoError(t, err)
			n := 0
			for _, v := range g.Values {
				require.NotEqual(t, ir.OpAttention, v.Op)
				if v.Op == ir.OpFlashAttention {
					n++
					require.Equal(t, tiles.TileQ, v.Attrs.Int("tile_q", 0))
					require.Equal(t, tiles.TileKV, v.Attrs.Int("tile_kv", 0))
					require.Equal(t, tiles.KVSplits, v.Attrs.Int("kv_splits", 0))
				}
			}
			require.NotZero(t, n)
			requireSameMeaning(t, before, g, goldenTol, 3)
		}
	}
}

func TestTileAttentionIdempotent(t *testing.T) {
	p, ok := Lookup("tile-attention")
	require.True(t, ok)
	g := taLoadCase(t, "tile-attention", "window-sinks")
	require.NoError(t, p.Run(g))
	once := ir.Print(g)
	require.NoError(t, p.Run(g))
	require.Equal(t, once, ir.Print(g))
}

func TestTileAttentionBadRule(t *testing.T) {
	g := taLoadCase(t, "tile-attention", "gqa")
	p := TileAttention(func(int64) AttentionTiles { return AttentionTiles{16, 0, 4} })
	err := p.Run(g)
	require.ErrorContains(t, err, "non-positive tiles")
}
