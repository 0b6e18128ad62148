package passes

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

// untouched is a graph none of canonicalize, dce, cse and fuse-residual
// rewrites, with sparse value numbers: a pass that does not fire must leave
// even the numbering alone.
const untouched = `graph "untouched" {
  %0 = input {name = "tokens"} : i32[T]
  %3 = input {name = "pos"} : i32[T]
  %7 = input {name = "x"} : f32[T, 64]
  %9 = weight {name = "w"} : f32[64, 64]
  %12 = matmul %7, %9 : f32[T, 64]
  %15 = silu %12 : f32[T, 64]
  %20 = add %15, %12 : f32[T, 64]
  %21 = reshape %20 : f32[T, 4, 16]
  output "out" = %21
}
`

func TestPassesLeaveUnrecognisedGraphsExactly(t *testing.T) {
	for _, name := range []string{"canonicalize", "dce", "cse", "fuse-residual"} {
		p, ok := Lookup(name)
		require.True(t, ok, name)
		g, err := ir.Parse(untouched)
		require.NoError(t, err)
		_, err = Run(g, []Pass{p}, Options{VerifyEach: true})
		require.NoError(t, err, name)
		require.Equal(t, untouched, ir.Print(g), name)
	}
}

func TestCanonicalizeIsIdempotent(t *testing.T) {
	src := `graph "g" {
  %0 = input {name = "x"} : f32[T, 64]
  %1 = weight {name = "w"} : f32[64, 64]
  %2 = matmul %0, %1 : f32[T, 64]
  %3 = silu %0 : f32[T, 64]
  %4 = add %2, %3 : f32[T, 64]
  %5 = mul %4, %3 : f32[T, 64]
  %6 = reshape %5 : f32[T, 8, 8]
  %7 = reshape %6 : f32[T, 2, 32]
  %8 = reshape %7 : f32[T, 64]
  %9 = add %8, %5 : f32[T, 64]
  output "out" = %9
}
`
	g, err := ir.Parse(src)
	require.NoError(t, err)
	require.NoError(t, canonicalize(g))
	require.NoError(t, ir.Verify(g))
	once := ir.Print(g)
	require.NoError(t, canonicalize(g))
	require.Equal(t, once, ir.Print(g))
	require.Equal(t, `graph "g" {
  %0 = input {name = "x"} : f32[T, 64]
  %1 = weight {name = "w"} : f32[64, 64]
  %2 = matmul %0, %1 : f32[T, 64]
  %3 = silu %0 : f32[T, 64]
  %4 = add %3, %2 : f32[T, 64]
  %5 = mul %3, %4 : f32[T, 64]
  %6 = add %5, %5 : f32[T, 64]
  output "out" = %6
}
`, once)
}
