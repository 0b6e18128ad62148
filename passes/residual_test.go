package passes

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/synth"
)

// residualSynthLlama is the graph the llama frontend builds for the built-in
// synthetic model.
func residualSynthLlama(t *testing.T) *ir.Graph {
	t.Helper()
	var buf bytes.Buffer
	_, err := synth.Default().Write(&buf)
	require.NoError(t, err)
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	m, err := arch.Load(f, arch.Options{})
	require.NoError(t, err)
	return m.Graph
}

// On a real graph the cleanup passes find nothing to do (the frontend's graph
// is canonical, live and without duplicates), and fuse-residual folds both
// residual adds of every layer into the output and down projections.
func TestCleanupAndResidualOnSyntheticLlama(t *testing.T) {
	g := residualSynthLlama(t)
	before := ir.Print(g)
	for _, name := range []string{"canonicalize", "dce", "cse"} {
		p, _ := Lookup(name)
		_, err := Run(g, []Pass{p}, Options{VerifyEach: true})
		require.NoError(t, err)
		require.Equal(t, before, ir.Print(g), "%s changed the frontend's graph", name)
	}
	orig, err := ir.Parse(before)
	require.NoError(t, err)
	adds := residualOpCount(g, ir.OpAdd)
	require.Equal(t, 2*synth.Default().NLayer, adds)
	p, _ := Lookup("fuse-residual")
	_, err = Run(g, []Pass{p}, Options{VerifyEach: true})
	require.NoError(t, err)
	require.Zero(t, residualOpCount(g, ir.OpAdd))
	require.Equal(t, adds, residualOpCount(g, ir.OpFusedMatMul))
	for _, v := range g.Values {
		if v.Op == ir.OpFusedMatMul {
			parts, err := ir.MatMulParts(v)
			require.NoError(t, err)
			require.NotNil(t, parts.Residual)
		}
	}
	requireSameMeaning(t, orig, g, goldenTol, 3)
}

func residualOpCount(g *ir.Graph, op ir.Op) int {
	n := 0
	for _, v := range g.Values {
		if v.Op == op {
			n++
		}
	}
	return n
}
