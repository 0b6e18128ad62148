package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/runtime"
)

// An absurd --ctx is refused in one line, before the KV cache is
// allocated (stories260K takes 1280 bytes per position in f32, 640 in the
// default f16, 340 in q8_0: 10⁸ positions are 64 GB, 34 GB with q8_0),
// never handed to the kernel's OOM killer.
func TestRunRefusesKVCacheLargerThanMemory(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	stdout, stderr, code := minervac(t, "run", model, "--ctx", "100000000", "-n", "1")
	require.Equal(t, 2, code, stderr)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "--ctx 100000000 needs 64.0 GB of KV cache; this machine has")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
	_, stderr, code = minervac(t, "run", model, "--ctx", "100000000", "-n", "1", "--cache-type", "q8_0")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--ctx 100000000 needs 34.0 GB of KV cache; this machine has")
	_, stderr, code = minervac(t, "run", model, "--ctx", "100000000", "-n", "1", "--cache-type-k", "f32")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--ctx 100000000 needs 96.0 GB of KV cache; this machine has")
}

// A --stop string keeps its commas: "Lily, zzz" never occurs, so the
// golden continuation (which names Lily) runs to the end; split at the
// comma, "Lily" would stop it.
func TestRunStopKeepsCommas(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	stdout, stderr, code := minervac(t, "run", model, "--prompt", "Once upon a time", "-n", "32", "--stop", "Lily, zzz")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "named Lily. She")
}

// --version names the compiler, the Go version and the CPU kernel variant;
// a bare minervac prints the usage with every command, as a success.
func TestVersionAndBareUsage(t *testing.T) {
	stdout, stderr, code := minervac(t, "--version")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "minervac dev")
	require.Contains(t, stdout, "go1.")
	require.Contains(t, stdout, "CPU kernels ")

	stdout, stderr, code = minervac(t)
	require.Equal(t, 0, code, stderr)
	for _, cmd := range []string{"run", "compile", "inspect", "tokenize", "synth", "bench"} {
		require.Contains(t, stdout, "\n  "+cmd+" ", "usage lists %s", cmd)
	}
}

// Every command opens each file it reads once, counted through the one open
// path (frontend.Opens, by file). `run model.gguf` opens the model once on a
// plan-cache miss (compile, write the plan, run what was compiled: the plan
// is not read back) and once with the cached plan on a hit (the plan borrows
// the open model); `run plan.bin` opens the plan and the model it refers
// to once each. Before the open path was one, a hit opened the model three
// times (sniffing the magic, mapping, hashing) and `run plan.bin` the plan
// twice and the model twice.
func TestEachCommandOpensEachFileOnce(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.gguf")
	copyFile(t, shared.Path(t, "models/gguf/stories260K.gguf"), model)
	cacheDir := filepath.Join(dir, "cache")
	opts := &runtime.Options{CacheDir: cacheDir}
	// run opens, compiles if need be, and steps the model.
	run := func(path string) {
		r, err := openRunnable(path, "reference", cacheFlags{}, opts, &timer{})
		require.NoError(t, err, path)
		defer r.Close()
		s, err := r.session(8)
		require.NoError(t, err, path)
		defer s.Close()
		rows, err := s.Eval([]int32{1, 403})
		require.NoError(t, err, path)
		require.Len(t, rows, 2)
	}

	require.Equal(t, map[string]int{model: 1}, opened(func() { run(model) }), "run model.gguf, plan cache miss")
	plans, _ := filepath.Glob(filepath.Join(cacheDir, "*.plan"))
	require.Len(t, plans, 1, "the miss cached a plan")
	require.Equal(t, map[string]int{model: 1, plans[0]: 1}, opened(func() { run(model) }), "run model.gguf, plan cache hit")

	ref, emb := filepath.Join(dir, "ref.plan"), filepath.Join(dir, "emb.plan")
	require.Equal(t, map[string]int{model: 1}, opened(func() {
		quietly(t, (&compileCmd{Model: model, Target: "reference", Output: ref}).Run)
	}), "compile -o ref.plan")
	require.Equal(t, map[string]int{model: 1}, opened(func() {
		quietly(t, (&compileCmd{Model: model, Target: "reference", Output: emb, EmbedWeights: true}).Run)
	}), "compile -o emb.plan --embed-weights")
	require.Equal(t, map[string]int{ref: 1, model: 1}, opened(func() { run(ref) }), "run ref.plan")
	require.Equal(t, map[string]int{emb: 1}, opened(func() { run(emb) }), "run emb.plan")

	for _, tc := range []struct {
		name string
		cmd  func() error
		want map[string]int
	}{
		{"compile model.gguf", (&compileCmd{Model: model, Target: "reference"}).Run, map[string]int{model: 1}},
		{"inspect model.gguf", (&inspectCmd{File: model}).Run, map[string]int{model: 1}},
		{"inspect ref.plan", (&inspectCmd{File: ref}).Run, map[string]int{ref: 1, model: 1}},
		{"tokenize model.gguf", (&tokenizeCmd{File: model, Text: "Once"}).Run, map[string]int{model: 1}},
		{"tokenize ref.plan", (&tokenizeCmd{File: ref, Text: "Once"}).Run, map[string]int{ref: 1}},
	} {
		require.Equal(t, tc.want, opened(func() { quietly(t, tc.cmd) }), tc.name)
	}
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

// quietly runs a command in this process with its standard output
// discarded.
func quietly(t *testing.T, run func() error) {
	t.Helper()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer null.Close()
	stdout := os.Stdout
	os.Stdout = null
	defer func() { os.Stdout = stdout }()
	require.NoError(t, run())
}

// A GPU plan shows its kernels in inspect (families, source size, launches
// per step), and compile --emit cuda prints the emitted source: for
// stories260K, byte for byte codegen/cuda's golden file.
func TestInspectAndEmitGPUKernels(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	planPath := filepath.Join(t.TempDir(), "stories.cuda.plan")
	_, stderr, code := minervac(t, "compile", model, "-target", "cuda", "-o", planPath)
	require.Equal(t, 0, code, stderr)
	stdout, stderr, code := minervac(t, "inspect", planPath)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `kernels \(cuda\): 15, .*matvec 3, .*source \d+ bytes; launches per step: 32 decode \(T = 1\), 37 prefill \(T = 512\)`, stdout)

	// The golden file was emitted with f32 caches.
	stdout, stderr, code = minervac(t, "compile", model, "-target", "cuda", "--emit", "cuda", "--cache-type", "f32")
	require.Equal(t, 0, code, stderr)
	want, err := os.ReadFile(filepath.Join("..", "..", "codegen", "cuda", "testdata", "stories260K.cu"))
	require.NoError(t, err)
	require.Equal(t, string(want), stdout)

	_, stderr, code = minervac(t, "compile", model, "-target", "goasm", "--emit", "cuda")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--emit cuda needs -target cuda")
}

// An unusable plan cache (a directory that cannot be created, or none at
// all: HOME unset) costs a compile in memory with a one-line warning, and
// the run still prints the golden text.
func TestRunWithUnusablePlanCache(t *testing.T) {
	c := goldenCase(t, "stories260K__once_upon_a_time")
	for _, env := range [][]string{
		{"MINERVA_CACHE_DIR=/proc/minerva-no-such-dir"},
		{"MINERVA_CACHE_DIR=", "HOME=", "XDG_CACHE_HOME="},
	} {
		stdout, stderr, code := minervacEnv(t, env, "run", c.ModelPath, "--prompt", *c.PromptText, "-n", "64", "--cache-type", "f32")
		require.Equal(t, 0, code, stderr)
		require.Equal(t, c.GenText+"\n", stdout, "env %v", env)
		require.Contains(t, stderr, "plan cache unusable (")
		require.Contains(t, stderr, "compiled in memory, not cached")
	}
}

// Ctrl-C during generation ends the line, prints the timings so far and
// exits 130, as a shell expects of SIGINT.
func TestRunInterrupt(t *testing.T) {
	cmd := exec.Command(minervacBin, "run", "--prompt", "hi", "-n", "100000", "--ctx", "100100", "--ignore-eos")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	// Interrupt once text streams: generation (and its handler) is running.
	first := make([]byte, 1)
	_, err = io.ReadFull(out, first)
	require.NoError(t, err, stderr.String())
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	rest, err := io.ReadAll(out)
	require.NoError(t, err)
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, stderr.String())
	require.Equal(t, 130, ee.ExitCode(), stderr.String())
	require.Regexp(t, `minervac: interrupted: prompt 3 tokens in [0-9.]+ ms, generated [0-9]+ tokens`, stderr.String())
	require.True(t, strings.HasSuffix(string(first)+string(rest), "\n"), "the text ends with a newline")
}

// Flags a plan or --tokens make moot say so: -t and --cache-type on a plan,
// --prompt with --tokens; compile --ctx beyond this machine's memory warns.
func TestIgnoredFlagsSaySo(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	planPath := filepath.Join(t.TempDir(), "stories.plan")
	_, stderr, code := minervac(t, "compile", model, "-target", "reference", "-o", planPath, "--ctx", "100000000")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "warning: --ctx 100000000 needs 64.0 GB of KV cache")

	_, stderr, code = minervac(t, "run", planPath, "-t", "goasm", "--cache-type", "f16", "--ctx", "64", "-n", "1")
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stderr, "-t goasm is ignored", "a flag at its default is not reported")
	require.Contains(t, stderr, "--cache-type f16 is ignored")

	_, stderr, code = minervac(t, "run", model, "--tokens", "1,403", "--prompt", "hello", "-n", "1")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "--prompt is ignored: --tokens gives the prompt")
}

// A negative value after a flag reaches the command's own range check
// instead of kong's "short flag" complaint.
func TestNegativeValuesGetRangeMessages(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-n", "-5"}, "-n -5: the number of tokens to generate must be ≥ 0"},
		{[]string{"run", "--temp", "-1"}, "temperature -1 must be ≥ 0"},
		{[]string{"run", "--threads", "-2"}, "--threads -2 must be ≥ 0"},
	} {
		_, stderr, code := minervac(t, c.args...)
		require.Equal(t, 2, code, stderr)
		require.Contains(t, stderr, c.want)
		require.NotContains(t, stderr, "short flag")
	}
}
