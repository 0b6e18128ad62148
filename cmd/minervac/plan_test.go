package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/internal/golden"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/runtime"
)

// trace runs a prompt and then the given tokens one at a time, returning every
// logits row, and greedy-generates n tokens on a fresh session.
func trace(t *testing.T, g *ir.Graph, w eval.Weights, prompt, forced []int32, n int) ([][]float32, []int32) {
	t.Helper()
	s, err := runtime.NewSession(g, w, len(prompt)+n+1)
	require.NoError(t, err)
	defer s.Close()
	rows, err := s.Eval(prompt)
	require.NoError(t, err)
	all := append([][]float32(nil), rows...)
	for _, id := range forced {
		r, err := s.Eval([]int32{id})
		require.NoError(t, err)
		all = append(all, r[0])
	}
	s2, err := runtime.NewSession(g, w, len(prompt)+n+1)
	require.NoError(t, err)
	defer s2.Close()
	res, err := runtime.Generate(context.Background(), s2, prompt, runtime.GenerateOptions{MaxTokens: n, Sampler: runtime.DefaultSampler(), EOS: -1})
	require.NoError(t, err)
	return all, res.Tokens
}

// Acceptance of the plan issue: for every golden case, compile → plan.bin →
// run gives exactly (bit for bit) the tokens and logits of the in-memory run
// of the same compiled graph; embedded weights too.
func TestPlanRunMatchesInMemory(t *testing.T) {
	dir := t.TempDir()
	for i, c := range golden.Cases(t, "index.json") {
		t.Run(c.Name, func(t *testing.T) {
			m, err := loadModel(c.ModelPath, arch.Options{})
			require.NoError(t, err)
			defer m.src.Close()
			p, err := compileModel(m, c.ModelPath, compileOptions{Target: "reference"})
			require.NoError(t, err)
			forced := c.GenTokens[:len(c.GenLogits)]
			wantRows, wantTokens := trace(t, p.Graph, m.model.Weights, c.PromptTokens, forced, c.NGen)
			// The fused graph still reproduces the reference engine's tokens.
			_, err = c.CompareTokens(wantTokens, c.Tolerance())
			require.NoError(t, err)

			embed := i%5 == 0 // a sample of cases also with embedded weights
			for _, emb := range []bool{false, embed} {
				path := filepath.Join(dir, c.Name+".plan")
				require.NoError(t, writePlan(p, m, path, emb))
				src, err := frontend.Open(path)
				require.NoError(t, err)
				r, err := fromPlan(src)
				require.NoError(t, err)
				rows, tokens := trace(t, r.graph, r.weights, c.PromptTokens, forced, c.NGen)
				r.Close()
				require.Equal(t, wantTokens, tokens, "embedded=%v", emb)
				require.Equal(t, len(wantRows), len(rows))
				for j := range rows {
					require.Equal(t, wantRows[j], rows[j], "logits row %d, embedded=%v", j, emb)
				}
				if !emb {
					break
				}
			}
		})
	}
}

// minervacEnv runs the binary with extra environment variables.
func minervacEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	return runProgram(t, minervacBin, env, "", args...)
}

// runProgram runs bin (minervac, or an app it built) with env added and
// stdin as its standard input, and returns stdout, stderr and the exit code.
func runProgram(t *testing.T, bin string, env []string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stdout.String(), stderr.String(), code
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o644))
}

// The second `minervac run model.gguf` opens the cached plan instead of
// compiling; a changed model file is compiled again.
func TestRunCachesCompiledPlan(t *testing.T) {
	dir := t.TempDir()
	env := []string{"MINERVA_CACHE_DIR=" + filepath.Join(dir, "cache")}
	model := filepath.Join(dir, "model.gguf")
	copyFile(t, shared.Path(t, "models/gguf/synthetic/llama-p-Q4_0.gguf"), model)
	args := []string{"run", model, "-n", "8", "--json", "-v"}

	out1, err1, code := minervacEnv(t, env, args...)
	require.Equal(t, 0, code, err1)
	require.Contains(t, err1, "compiled "+model)
	require.Contains(t, err1, "cached plan")
	plans, _ := filepath.Glob(filepath.Join(dir, "cache", "*.plan"))
	require.Len(t, plans, 1)
	st1, err := os.Stat(plans[0])
	require.NoError(t, err)

	out2, err2, code := minervacEnv(t, env, args...)
	require.Equal(t, 0, code, err2)
	require.Contains(t, err2, "compile skipped: cached plan")
	require.NotContains(t, err2, "compiled "+model)
	require.Equal(t, tokensOf(t, out1), tokensOf(t, out2))
	st2, err := os.Stat(plans[0])
	require.NoError(t, err)
	require.Equal(t, st1.ModTime(), st2.ModTime(), "the cached plan is not rewritten")

	// Another model of the same size at the same path is a new identity.
	copyFile(t, shared.Path(t, "models/gguf/synthetic/llama-p-Q4_K.gguf"), model)
	_, err3, code := minervacEnv(t, env, args...)
	require.Equal(t, 0, code, err3)
	require.Contains(t, err3, "compiled "+model)
	plans, _ = filepath.Glob(filepath.Join(dir, "cache", "*.plan"))
	require.Len(t, plans, 2)
}

func TestCompileRunInspectPlan(t *testing.T) {
	c := goldenCase(t, "stories260K__once_upon_a_time")
	dir := t.TempDir()
	model := filepath.Join(dir, "stories.gguf")
	copyFile(t, c.ModelPath, model)
	ref, emb := filepath.Join(dir, "ref.plan"), filepath.Join(dir, "emb.plan")

	_, stderr, code := minervac(t, "compile", model, "-target", "reference", "-o", ref, "-v", "--cache-type", "f32")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "wrote "+ref)
	_, stderr, code = minervac(t, "compile", model, "-o", emb, "--embed-weights", "--cache-type", "f32")
	require.Equal(t, 0, code, stderr)

	for _, p := range []string{ref, emb} {
		stdout, stderr, code := minervac(t, "run", p, "--prompt", *c.PromptText, "-n", "16", "--json")
		require.Equal(t, 0, code, stderr)
		require.Equal(t, c.GenTokens[:16], tokensOf(t, stdout), p)
	}
	stdout, _, code := minervac(t, "inspect", ref)
	require.Equal(t, 0, code)
	for _, want := range []string{"target reference", "referenced from " + model, "activation arena 1200 bytes per token", "qkv_rope 5", "model file present, with the size and header SHA-256"} {
		require.Contains(t, stdout, want)
	}
	stdout, _, _ = minervac(t, "inspect", emb)
	require.Contains(t, stdout, "weights: embedded")
	// A plan is no model to compile, in one line; its vocabulary tokenizes.
	_, stderr, code = minervac(t, "compile", ref)
	require.Equal(t, 1, code)
	require.Equal(t, "minervac: "+ref+": it is a compiled plan, not a model file (run it, or compile the model it was compiled from)\n", stderr)
	stdout, stderr, code = minervac(t, "tokenize", emb, "--text", *c.PromptText, "--json")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"ids":[1,403,407,261,378]`)

	// The model moves away: the referenced plan fails in one line; the
	// embedded one still runs.
	require.NoError(t, os.Remove(model))
	_, stderr, code = minervac(t, "run", ref, "-n", "4")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, model)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
	stdout, stderr, code = minervac(t, "run", emb, "-n", "4", "--json")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, c.GenTokens[:4], tokensOf(t, stdout))
	stdout, _, _ = minervac(t, "inspect", ref)
	require.Contains(t, stdout, "cannot run")
}

func TestCompileFlagErrors(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"compile", model, "-target", "tpu"}, 2, "known targets: reference, goasm, cuda, metal"},
		{[]string{"compile", model, "--embed-weights"}, 2, "--embed-weights needs -o"},
		{[]string{"compile", model, "--ctx", "-5"}, 2, "--ctx"},
		{[]string{"compile", "-o", filepath.Join(t.TempDir(), "x.plan")}, 2, "needs a model file"},
	}
	for _, c := range cases {
		_, stderr, code := minervac(t, c.args...)
		require.Equal(t, c.code, code, "%v: %s", c.args, stderr)
		require.Contains(t, stderr, c.want, "%v", c.args)
	}
}

// Prefill of the whole prompt vs one token at a time, on the compiled graph
// a plan runs (flash attention with KV splits, fused QKV writes): logits
// within 1e-5·max.
func TestPlanPrefillEqualsIncremental(t *testing.T) {
	for _, rel := range []string{"models/gguf/stories260K.gguf", "models/gguf/synthetic/llama-p-Q4_K.gguf", "models/gguf/synthetic/llama-spm32k-f32.gguf"} {
		m, err := loadModel(shared.Path(t, rel), arch.Options{})
		require.NoError(t, err)
		p, err := compileModel(m, "", compileOptions{Target: "reference"})
		require.NoError(t, err)
		prompt := m.tok.Encode("The little dog ran to the park and saw a big red ball", true)
		a, err := runtime.NewSession(p.Graph, m.model.Weights, 64)
		require.NoError(t, err)
		batch, err := a.Eval(prompt)
		require.NoError(t, err)
		b, err := runtime.NewSession(p.Graph, m.model.Weights, 64)
		require.NoError(t, err)
		for i, id := range prompt {
			row, err := b.Eval([]int32{id})
			require.NoError(t, err)
			e := golden.RelErr(row[0], batch[i])
			require.LessOrEqual(t, e, 1e-5, "%s position %d: one-by-one vs batch error %.3g", rel, i, e)
		}
		a.Close()
		b.Close()
		m.src.Close()
	}
}
