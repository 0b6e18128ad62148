package cpu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/runtime"
)

// setHeads takes a head width that divides the row into the op's heads,
// the same one again, and refuses any other: the readers and writers of a
// cache must agree on where a head's rows are.
func TestStateSetHeads(t *testing.T) {
	s := &state{info: runtime.StateInfo{Name: "cache.k.0", Width: 256}, ctx: 10, hw: 256}
	require.Equal(t, 3*256, s.at(0, 3, 0), "before any op: whole rows")
	require.NoError(t, s.setHeads(64, 4))
	require.NoError(t, s.setHeads(64, 4))
	require.Equal(t, 1000+(2*10+3)*64, s.at(1000, 3, 2))
	require.ErrorContains(t, s.setHeads(128, 2), `state "cache.k.0" is read as heads of 64 elements and of 128`)
	require.ErrorContains(t, s.setHeads(60, 4), "4 heads of 60 elements do not make its rows of 256")
	require.ErrorContains(t, s.setHeads(0, 4), "do not make its rows")
	require.Equal(t, 64, s.hw)
}

// splitHeads cuts the QKV op's heads into runs that cover them once, in
// order, longest first, none shorter than an eighth of chunkRows' rows (but
// the last) nor longer than a quarter of the heads per worker.
func TestSplitHeads(t *testing.T) {
	for _, tc := range []struct{ workers, heads, hd, k int }{
		{2, 48, 64, 2048},  // TinyLlama
		{2, 96, 128, 4096}, // Llama 7B
		{4, 48, 128, 4096}, // Llama 3 8B
		{1, 3, 64, 256},    // tiny
		{8, 40, 128, 5120}, // more workers than long runs
		{2, 1, 64, 64},     // one head
	} {
		p := &program{pool: &pool{n: tc.workers}}
		b := p.splitHeads(tc.heads, tc.hd, tc.k, 1)
		require.Equal(t, 0, b[0], "%+v", tc)
		require.Equal(t, tc.heads, b[len(b)-1], "%+v", tc)
		least := max(1, (p.chunkRows(tc.heads*tc.hd, tc.k, 1)/8+tc.hd-1)/tc.hd)
		for i := 1; i < len(b); i++ {
			n := b[i] - b[i-1]
			require.Positive(t, n, "%+v: %v", tc, b)
			if i < len(b)-1 {
				require.GreaterOrEqual(t, n, least, "%+v: %v", tc, b)
			}
			if i > 1 {
				require.LessOrEqual(t, n, b[i-1]-b[i-2], "%+v: runs shrink: %v", tc, b)
			}
			require.LessOrEqual(t, n, max(least, (tc.heads+2*tc.workers-1)/(2*tc.workers)), "%+v: %v", tc, b)
		}
	}
}
