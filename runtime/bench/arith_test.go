package bench_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/runtime/bench"
)

// MulAdds' chains are the LCG steps it names: one round from a seed is
// computed here by hand, and more rounds give other states (the loop is
// not folded away).
func TestMulAdds(t *testing.T) {
	seed := uint64(5)
	a := seed*6364136223846793005 + 1442695040888963407
	b := (seed^0x9e3779b97f4a7c15)*6364136223846793005 + 1
	c := (seed+1)*2862933555777941757 + 3037000493
	d := (seed*3)*2862933555777941757 + 7
	require.Equal(t, a^b^c^d, bench.MulAdds(1, seed))
	require.NotEqual(t, bench.MulAdds(1000, seed), bench.MulAdds(1001, seed))
	require.Equal(t, seed^(seed^0x9e3779b97f4a7c15)^(seed+1)^(seed*3), bench.MulAdds(0, seed))
}
