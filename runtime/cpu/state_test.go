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
