package cpu

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// kvPart cuts a query's visible rows into S runs, in order, covering them
// once, each starting on a tile boundary counted from the first visible row
// (so only the very last tile can be short), and as near equal in tiles as
// S allows.
func TestKVPart(t *testing.T) {
	for _, tc := range []struct{ pos, window, S, tile int }{
		{512, 0, 4, 128}, // TinyLlama decode at depth 512: 513 rows
		{599, 0, 4, 128}, // 600 rows: 5 tiles
		{0, 0, 4, 128},   // one row
		{100, 0, 4, 128}, // fewer tiles than parts
		{4095, 0, 4, 64},
		{700, 128, 4, 32}, // sliding window: rows 573..700
		{300, 0, 1, 64},
		{63, 0, 3, 16},
	} {
		lo := max(0, tc.pos-tc.window+1)
		if tc.window == 0 {
			lo = 0
		}
		tiles := (tc.pos + 1 - lo + tc.tile - 1) / tc.tile
		at, most, least := lo, 0, tiles
		for s := range tc.S {
			from, to := kvPart(tc.pos, tc.window, s, tc.S, tc.tile)
			require.Equal(t, at, from, "%+v part %d starts where the last ended", tc, s)
			require.LessOrEqual(t, from, to, "%+v part %d", tc, s)
			require.Zero(t, (from-lo)%tc.tile, "%+v part %d starts on a tile", tc, s)
			if to != tc.pos+1 {
				require.Zero(t, (to-lo)%tc.tile, "%+v part %d ends on a tile", tc, s)
			}
			n := (to - from + tc.tile - 1) / tc.tile
			most, least = max(most, n), min(least, n)
			at = to
		}
		require.Equal(t, tc.pos+1, at, "%+v: the parts cover every visible row", tc)
		require.LessOrEqual(t, most-least, 1, "%+v: parts differ by at most a tile", tc)
	}
}
