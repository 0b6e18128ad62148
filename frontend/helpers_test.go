package frontend_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/passes"
	"github.com/minerva-llm/minerva/plan"
)

// compiled is a model compiled in memory, and the plan describing it.
type compiled struct {
	model *arch.Model
	plan  *plan.Plan
}

// compileFile opens a GGUF model and runs the pass pipeline on it, as
// minervac compile does; the plan refers to the model file. The source stays
// open until the test ends.
func compileFile(t testing.TB, path string) *compiled {
	t.Helper()
	src, err := frontend.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { src.Close() })
	m, err := src.Build(arch.Options{})
	require.NoError(t, err)
	list, err := passes.Pipeline()
	require.NoError(t, err)
	_, err = passes.Run(m.Graph, list, passes.Options{})
	require.NoError(t, err)
	ref, err := src.Identity()
	require.NoError(t, err)
	return &compiled{model: m, plan: &plan.Plan{
		Compiler: "minervac test", Target: "reference", Model: ref,
		Graph: m.Graph, Vocab: m.Vocab, Config: m.Config, Context: 256,
		Sampling: plan.Sampling{TopP: 1, RepeatPenalty: 1},
	}}
}

// writePlan writes p (embedding w unless nil) to a file in a fresh
// temporary directory.
func writePlan(t testing.TB, p *plan.Plan, w eval.Weights) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, plan.Write(&buf, p, w))
	path := filepath.Join(t.TempDir(), "plan.bin")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path, buf.Bytes()
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o644))
}

// opened returns how many more times each file was opened through the
// frontend while f ran.
func opened(f func()) map[string]int {
	before := frontend.Opens()
	f()
	diff := map[string]int{}
	for path, n := range frontend.Opens() {
		if d := n - before[path]; d != 0 {
			diff[path] = d
		}
	}
	return diff
}
