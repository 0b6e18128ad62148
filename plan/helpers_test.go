package plan_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/passes"
	"github.com/minerva-llm/minerva/plan"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/synth"
	"github.com/minerva-llm/minerva/tokenizer"
)

// compiled is a model compiled in memory, and the plan describing it.
type compiled struct {
	model *arch.Model
	plan  *plan.Plan
}

var testSampling = plan.Sampling{Temperature: 0.8, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, TopK: 40}

// compileFile opens a GGUF model and runs the pass pipeline on it, as
// minervac compile does. The file stays open until the test ends.
func compileFile(t testing.TB, path, target string) *compiled {
	t.Helper()
	src, err := frontend.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { src.Close() })
	c := compileGGUF(t, src.GGUF, target)
	c.plan.Model, err = src.Identity()
	require.NoError(t, err)
	return c
}

func compileGGUF(t testing.TB, f *gguf.File, target string) *compiled {
	t.Helper()
	m, err := arch.Load(f, arch.Options{})
	require.NoError(t, err)
	list, err := passes.Pipeline()
	require.NoError(t, err)
	_, err = passes.Run(m.Graph, list, passes.Options{VerifyEach: true})
	require.NoError(t, err)
	return &compiled{model: m, plan: &plan.Plan{
		Compiler: "minervac test",
		Target:   target,
		Graph:    m.Graph,
		Vocab:    m.Vocab,
		Config:   m.Config,
		Context:  256,
		Sampling: testSampling,
	}}
}

// tinyEmbedded is a small plan with embedded weights (a one-layer synthetic
// llama, a few kilobytes), for fuzz seeds.
func tinyEmbedded(t testing.TB) []byte {
	t.Helper()
	tok, sc, ty := synth.Vocab()
	spec := synth.Llama{Name: "tiny", NLayer: 1, NEmbd: 32, NHead: 2, NHeadKV: 1, NFF: 32, ContextLength: 64,
		RopeBase: 10000, RMSEps: 1e-5, Matrix: ir.Q4_0, Seed: 3, Tied: true, Tokens: tok, Scores: sc, Types: ty}
	var buf bytes.Buffer
	_, err := spec.Write(&buf)
	require.NoError(t, err)
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	c := compileGGUF(t, f, "reference")
	c.plan.Kernels = map[string][]byte{"goasm": []byte("opaque")}
	return encode(t, c.plan, c.model.Weights)
}

func encode(t testing.TB, p *plan.Plan, w eval.Weights) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, plan.Write(&buf, p, w))
	return buf.Bytes()
}

// writePlan writes p to a file in a fresh temporary directory.
func writePlan(t testing.TB, p *plan.Plan, w eval.Weights) (string, []byte) {
	t.Helper()
	data := encode(t, p, w)
	path := filepath.Join(t.TempDir(), "plan.bin")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path, data
}

// logits runs a prompt in one step, then one decode step with the greedy
// token, and returns every row's bits.
func logits(t testing.TB, g *ir.Graph, w eval.Weights, prompt []int32) [][]uint32 {
	t.Helper()
	s, err := runtime.NewSession(g, w, 64)
	require.NoError(t, err)
	rows, err := s.Eval(prompt)
	require.NoError(t, err)
	last := rows[len(rows)-1]
	best := 0
	for i, v := range last {
		if v > last[best] {
			best = i
		}
	}
	out := bitsOf(rows)
	rows, err = s.Eval([]int32{int32(best)})
	require.NoError(t, err)
	return append(out, bitsOf(rows)...)
}

func bitsOf(rows [][]float32) [][]uint32 {
	out := make([][]uint32, len(rows))
	for i, r := range rows {
		out[i] = make([]uint32, len(r))
		for j, v := range r {
			out[i][j] = math.Float32bits(v)
		}
	}
	return out
}

func encodePrompt(t testing.TB, v tokenizer.Vocab, text string) []int32 {
	t.Helper()
	tok, err := tokenizer.New(v)
	require.NoError(t, err)
	return tok.Encode(text, true)
}
