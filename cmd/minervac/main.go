// Command minervac is Minerva's command line: it inspects model files,
// tokenizes text and runs models.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/cpu/kern"
)

type cli struct {
	backendFlags
	Version kong.VersionFlag `help:"Print the version, commit, Go version and CPU kernel variant, and exit."`

	Run      runCmd      `cmd:"" help:"Generate text with a model (a built-in synthetic llama when no model is given)."`
	Compile  compileCmd  `cmd:"" help:"Run the pass pipeline on a model and print the fused graph or a summary."`
	Inspect  inspectCmd  `cmd:"" help:"Print a model file's metadata, tensors and architecture."`
	Chat     chatCmd     `cmd:"" help:"Talk with a model: its chat template applied each turn, the KV cache kept across turns."`
	Template templateCmd `cmd:"" help:"Print the prompt a chat template renders for a conversation, exactly."`
	Tokenize tokenizeCmd `cmd:"" help:"Print the token ids and pieces of a text."`
	Synth    synthCmd    `cmd:"" help:"Write a random-weight model with a real architecture's shapes (for benchmarks)."`
	Build    buildCmd    `cmd:"" help:"Make one executable that carries a model: ./app --prompt …, ./app chat, ./app serve (also for another GOOS/GOARCH with --runtime)."`
	Bench    benchCmd    `cmd:"" help:"Measure prefill and decode speed, latency, peak memory and bandwidth efficiency on this machine."`

	Serve      serveCmd      `cmd:"" help:"Serve a model over an OpenAI-compatible HTTP API, several requests at once (continuous batching)."`
	BenchServe benchServeCmd `cmd:"" name:"bench-serve" help:"Load-test a server (or a model served here): output tokens/s, time to first token and inter-token latency per client count."`
}

func main() {
	name, desc, args := "minervac", "Minerva: a compiler for large language models.", os.Args[1:]
	// An app (minervac build) runs the model it carries.
	exe, isApp, err := thisApp()
	if err != nil {
		fmt.Fprintln(os.Stderr, "minervac:", err)
		os.Exit(1)
	}
	if isApp {
		name = filepath.Base(exe)
		desc = fmt.Sprintf("A Minerva app: minervac with a model inside. `%[1]s --prompt …` runs it (`%[1]s run --help`: the flags); `%[1]s chat` talks with it; `%[1]s serve` serves it.", name)
		args = appArgs(exe, args)
	}
	var c cli
	parser, err := kong.New(&c,
		kong.Name(name),
		kong.Description(desc),
		kong.UsageOnError(),
		kong.Vars{"version": versionString()},
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "minervac:", err)
		os.Exit(2)
	}
	if len(args) == 0 {
		// Bare minervac: the usage, every command included, not an error.
		_, _ = parser.Parse([]string{"--help"})
		return
	}
	ctx, err := parser.Parse(goStyleFlags(parser, args))
	if err != nil {
		fmt.Fprintln(os.Stderr, "minervac:", err)
		os.Exit(2)
	}
	opts, err := c.backendFlags.options()
	if err == nil {
		err = ctx.Run(&opts)
	}
	if err != nil {
		var u usageError
		var code exitCode
		if errors.As(err, &code) {
			os.Exit(int(code)) // the command has said why
		}
		fmt.Fprintln(os.Stderr, "minervac:", err)
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// versionString is what --version prints: the compiler version, the VCS
// commit the binary was built from (when the build recorded one), the Go
// version and the CPU kernel variant this machine runs.
func versionString() string {
	commit := "unknown commit"
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = " (modified)"
				}
			}
		}
		if rev != "" {
			commit = "commit " + rev + dirty
		}
	}
	return fmt.Sprintf("%s, %s, %s %s/%s, CPU kernels %s", compilerVersion, commit, goruntime.Version(), goruntime.GOOS, goruntime.GOARCH, kern.Variant())
}

// backendFlags are the settings every command hands its backends, as
// runtime.Options: the one place the MINERVA_* variables are read (each is
// a flag's default), so that nothing below cmd/ consults the environment.
type backendFlags struct {
	Threads    int    `help:"CPU backend worker threads (0: the physical cores)." env:"MINERVA_THREADS" default:"0"`
	CPUKernels string `name:"cpu-kernels" help:"CPU kernel variant: generic, avx2, avx512 or neon (default: the best this CPU runs)." env:"MINERVA_CPU"`
	CacheDir   string `name:"cache-dir" help:"Where compiled plans and GPU modules are cached (default: minerva in the user cache directory)." env:"MINERVA_CACHE_DIR"`
	CUDALib    string `name:"cuda-lib" help:"Path of the CUDA driver library (default: libcuda.so.1)." env:"MINERVA_CUDA_LIB"`
	NVRTCLib   string `name:"nvrtc-lib" help:"Path of the NVRTC library (default: libnvrtc.so.13, .12, …)." env:"MINERVA_NVRTC_LIB"`
}

func (f backendFlags) options() (runtime.Options, error) {
	if f.Threads < 0 {
		return runtime.Options{}, usageError{fmt.Sprintf("--threads %d must be ≥ 0", f.Threads)}
	}
	if n := goruntime.NumCPU(); f.Threads > n {
		// Name the setting the user wrote: the variable when the flag
		// took its value from it.
		what := fmt.Sprintf("--threads %d", f.Threads)
		if v := os.Getenv("MINERVA_THREADS"); v == strconv.Itoa(f.Threads) && !threadsFlagGiven(os.Args[1:]) {
			what = "MINERVA_THREADS=" + v
		}
		fmt.Fprintf(os.Stderr, "minervac: %s exceeds the %d CPUs here; using %d\n", what, n, n)
		f.Threads = n
	}
	if f.CPUKernels != "" {
		if _, err := kern.Use(f.CPUKernels); err != nil {
			return runtime.Options{}, usageError{"--cpu-kernels: " + err.Error()}
		}
	}
	return runtime.Options{Threads: f.Threads, CPUKernels: f.CPUKernels, CacheDir: f.CacheDir, CUDALib: f.CUDALib, NVRTCLib: f.NVRTCLib}, nil
}

// threadsFlagGiven reports whether the command line sets --threads.
func threadsFlagGiven(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); name == "threads" && strings.HasPrefix(a, "-") {
			return true
		}
	}
	return false
}

// exitCode ends minervac with that status and no further message (the
// command printed its own).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// usageError marks a bad flag combination (exit status 2, like a parse error).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// goStyleFlags lets long flags be written with one dash, as in Go tools and
// in our documentation (`minervac compile m.gguf -target metal -o plan.bin`):
// an argument "-name" or "-name=value" whose name is a long flag of the
// command line becomes "--name". Single letters stay short flags, and
// anything else (a negative number, say) is left alone.
func goStyleFlags(parser *kong.Kong, args []string) []string {
	long := map[string]bool{}
	short := map[rune]string{}  // short flag → its long name
	valued := map[string]bool{} // long flags that take a value
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, f := range n.Flags {
			long[f.Name] = true
			if f.Short != 0 {
				short[f.Short] = f.Name
			}
			valued[f.Name] = !f.IsBool() && !f.IsCounter()
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(parser.Model.Node)
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 && long[name] {
				a = "-" + a
			}
		}
		// A negative number after a flag that takes a value is that value
		// (kong would read "-5" as a short flag): `-n -5` becomes `--n=-5`,
		// so the command's own range check answers.
		if n := len(out); n > 0 && isNegativeNumber(a) {
			prev := out[n-1]
			var name string
			switch {
			case strings.HasPrefix(prev, "--") && !strings.Contains(prev, "="):
				name = prev[2:]
			case len(prev) == 2 && prev[0] == '-':
				name = short[rune(prev[1])]
			}
			if name != "" && valued[name] {
				out[n-1] = "--" + name + "=" + a
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

func isNegativeNumber(s string) bool {
	if len(s) < 2 || s[0] != '-' {
		return false
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}
