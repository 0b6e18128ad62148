package passes

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

const dceWriters = `graph "writers" {
  %0 = input {name = "tokens"} : i32[T]
  %1 = input {name = "pos"} : i32[T]
  %2 = input {name = "x"} : f32[T, 64]
  %3 = weight {name = "w"} : f32[128, 64]
  %4 = state {name = "k"} : f32[C, 32]
  %5 = state {name = "v"} : f32[C, 32]
  %6 = qkv_rope %2, %3, %1, %4, %5 {base = 10000.0, head_dim = 16, n_head = 4, n_kv_head = 2, n_rot = 16} : f32[T, 64]
  %7 = weight {name = "wk"} : f32[32, 64]
  %8 = matmul %2, %7 : f32[T, 32]
  %9 = kvwrite %4, %8, %1 : f32[C, 32]
  %10 = kvwrite %9, %8, %1 : f32[C, 32]
  %11 = kvwrite %5, %8, %1 : f32[C, 32]
  output "k" = %10
  output "v" = %11
}
`

// An unused qkv_rope is dropped when live kvwrites write the same rows of
// both its caches; a chained kvwrite counts as a write of its root state.
func TestDCEDropsCoveredQKVRoPE(t *testing.T) {
	g, err := ir.Parse(dceWriters)
	require.NoError(t, err)
	require.NoError(t, dce(g))
	require.NoError(t, ir.Verify(g))
	require.Nil(t, g.Lookup(ir.OpWeight, "w"), "the qkv_rope's weight should go with it")
	for _, v := range g.Values {
		require.NotEqual(t, ir.OpQKVRoPE, v.Op)
	}
}

// With no live writer of cache v, every unused writer of v stays: the
// qkv_rope and the kvwrite %11 both write rows nothing else writes.
func TestDCEKeepsSoleWriter(t *testing.T) {
	g, err := ir.Parse(dceWriters)
	require.NoError(t, err)
	g.Outputs = g.Outputs[:1] // %11, the write of v, is now unused
	require.NoError(t, dce(g))
	require.NoError(t, ir.Verify(g))
	ops := map[ir.Op]int{}
	for _, v := range g.Values {
		ops[v.Op]++
	}
	require.Equal(t, 1, ops[ir.OpQKVRoPE])
	require.Equal(t, 3, ops[ir.OpKVWrite])
}
