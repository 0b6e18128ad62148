package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
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
	for _, cmd := range []string{"run", "compile", "inspect", "tokenize", "synth", "bench", "build", "serve", "chat"} {
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
	require.Regexp(t, `kernels \(cuda\): 16, .*attn_split 2, .*matvec 3, .*source \d+ bytes; launches per step: 32 decode \(T = 1\), 37 prefill \(T = 512\)`, stdout)

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

// inspect says what opening a plan checks of its model file (size and
// header hash), not "unchanged"; --verify reads the tensor data and finds a
// weight byte edited behind an unchanged header (exit status 1), and passes
// the file as compiled.
func TestInspectVerifyFindsEditedWeights(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.gguf")
	copyFile(t, shared.Path(t, "models/gguf/stories260K.gguf"), model)
	planPath := filepath.Join(dir, "model.plan")
	_, stderr, code := minervac(t, "compile", model, "-target", "reference", "-o", planPath)
	require.Equal(t, 0, code, stderr)

	stdout, stderr, code := minervac(t, "inspect", "--verify", planPath)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `status: model file present, size, header SHA-256 and tensor data \(crc32c:[0-9a-f]{8}\) as the plan recorded`, stdout)

	// The last tensor's bytes end the file: flip one of them.
	data, err := os.ReadFile(model)
	require.NoError(t, err)
	data[len(data)-100] ^= 0x40
	require.NoError(t, os.WriteFile(model, data, 0o644))

	stdout, stderr, code = minervac(t, "inspect", planPath)
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stdout, "unchanged")
	require.Contains(t, stdout, "status: model file present, with the size and header SHA-256 (metadata and tensor table) the plan recorded; its tensor data is not read (inspect --verify checks it)")

	stdout, _, code = minervac(t, "inspect", "--verify", planPath)
	require.Equal(t, 1, code)
	require.Regexp(t, `status: the model file's tensor data has changed since the plan was compiled \(crc32c:[0-9a-f]{8}, now crc32c:[0-9a-f]{8}\): recompile `, stdout)

	_, stderr, code = minervac(t, "inspect", "--verify", model)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--verify checks a plan against the model file it refers to")
}

// inspect shows a sliding attention window wherever a family has one:
// phi3 on every layer (it was shown only beside gpt-oss's experts), in the
// model file's summary and in a plan's.
func TestInspectShowsSlidingWindow(t *testing.T) {
	model := shared.Path(t, "models/gguf/synthetic/phi3-p-mix.gguf")
	stdout, stderr, code := minervac(t, "inspect", model)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "\n  sliding window 8 positions on every layer\n")
	require.NotContains(t, stdout, "experts")

	planPath := filepath.Join(t.TempDir(), "phi3.plan")
	_, stderr, code = minervac(t, "compile", model, "-o", planPath)
	require.Equal(t, 0, code, stderr)
	stdout, stderr, code = minervac(t, "inspect", planPath)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "\n  sliding window 8 positions on every layer\n")
}

// --threads beyond this machine's CPUs (flag or MINERVA_THREADS) runs with
// the CPUs there are and says so, naming where the value came from; a
// MINERVA_THREADS that is not a number is refused, naming the variable.
func TestThreadsBounded(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	n := strconv.Itoa(goruntime.NumCPU())
	stdout, stderr, code := minervac(t, "run", model, "-n", "4", "--threads", "9999")
	require.Equal(t, 0, code, stderr)
	require.NotEmpty(t, stdout)
	require.Contains(t, stderr, "minervac: --threads 9999 exceeds the "+n+" CPUs here; using "+n+"\n")

	_, stderr, code = minervacEnv(t, []string{"MINERVA_THREADS=9999"}, "run", model, "-n", "4")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "minervac: MINERVA_THREADS=9999 exceeds the "+n+" CPUs here; using "+n+"\n")

	_, stderr, code = minervacEnv(t, []string{"MINERVA_THREADS=lots"}, "run", model, "-n", "4")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `MINERVA_THREADS="lots"`)
}

// A --ctx beyond the model's trained context runs, with a warning; within
// it, no warning.
func TestRunWarnsBeyondTrainedContext(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf") // trained for 2048 positions
	_, stderr, code := minervac(t, "run", model, "--ctx", "3000", "-n", "2")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "minervac: warning: --ctx 3000 is beyond the 2048 positions the model was trained for")
	_, stderr, code = minervac(t, "run", model, "--ctx", "2048", "-n", "2")
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stderr, "warning")
}

// The server warns as run does when --ctx is beyond the trained context
// (issue 19 item 1: "same in compile --ctx and the server"), and still
// loads.
func TestServeWarnsBeyondTrainedContext(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf") // trained for 2048 positions
	cmd := exec.Command(minervacBin, "serve", model, "--port", "0", "--parallel", "1", "--ctx", "3000")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	rd := bufio.NewReader(stderr)
	var lines []string
	for {
		l, err := rd.ReadString('\n')
		require.NoError(t, err, "stderr so far: %q", lines)
		lines = append(lines, l)
		if strings.Contains(l, "minervac: ready:") {
			break
		}
	}
	require.Contains(t, strings.Join(lines, ""), "minervac: warning: --ctx 3000 is beyond the 2048 positions the model was trained for")
}
