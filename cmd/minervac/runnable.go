package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/plan"
	"github.com/minerva-llm/minerva/tokenizer"
)

// runnable is a compiled model ready for a session: from a plan file, from
// the plan cache, or compiled in memory.
type runnable struct {
	graph   *ir.Graph
	weights eval.Weights
	tok     *tokenizer.Tokenizer
	ctx     int    // default context length
	target  string // the backend that runs it
	kernels []byte // the plan's kernels section for target (nil: none, or no plan)
	opts    runtime.Options
	closers []io.Closer
}

// Close releases in reverse order: a program before the mapping its weights
// live in.
func (r *runnable) Close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i].Close()
	}
}

// isPlan reports whether the file at path starts with the plan magic.
func isPlan(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(plan.Magic))
	_, err = io.ReadFull(f, head)
	return err == nil && string(head) == plan.Magic
}

// fromPlan opens a plan file and checks this build can run its target.
// lend, when set, is the model the plan was compiled from, already open and
// identified: the plan borrows it rather than opening and hashing it again,
// and the runnable takes it over (closing it after the plan).
func fromPlan(path string, lend *loaded) (*runnable, error) {
	var o plan.OpenOptions
	if lend != nil && lend.ref != nil {
		o = plan.OpenOptions{Model: lend.file, Ref: *lend.ref}
	}
	l, err := plan.OpenWith(path, o)
	if err != nil {
		return nil, err
	}
	if _, ok := runtime.LookupBackend(l.Plan.Target); !ok {
		l.Close()
		return nil, fmt.Errorf("%s was compiled for target %s, which this build cannot run (it runs: %v)", path, l.Plan.Target, runtime.Backends())
	}
	tok, err := tokenizer.New(l.Plan.Vocab)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("%s: tokenizer: %w", path, err)
	}
	r := &runnable{graph: l.Plan.Graph, weights: l.Weights(), tok: tok, ctx: l.Plan.Context, target: l.Plan.Target,
		kernels: l.Plan.Kernels[l.Plan.Target]}
	if o.Model != nil {
		r.closers = append(r.closers, lend.file)
	}
	r.closers = append(r.closers, l)
	return r, nil
}

// openRunnable turns what the user named into something to run. A plan file
// is opened as is. A GGUF file is compiled once and the plan cached in
// planCacheDir by the model's identity, so the second run only opens the
// cached plan (which re-checks that the model file has not changed). No
// path means the built-in synthetic model, compiled in memory.
func openRunnable(path, target string, cacheType ir.DType, opts *runtime.Options, tm *timer) (*runnable, error) {
	r, err := openRunnableIn(path, target, cacheType, opts.CacheDir, tm)
	if err != nil {
		return nil, err
	}
	r.opts = *opts
	return r, nil
}

func openRunnableIn(path, target string, cacheType ir.DType, cacheDir string, tm *timer) (*runnable, error) {
	if path != "" && isPlan(path) {
		// A plan runs on the target and with the KV cache type it was
		// compiled for; a flag left at its default is not reported.
		if target != "goasm" {
			fmt.Fprintf(os.Stderr, "minervac: -t %s is ignored: a plan runs on the target it was compiled for\n", target)
		}
		if cacheType != ir.F32 {
			fmt.Fprintf(os.Stderr, "minervac: --cache-type %s is ignored: a plan keeps the KV cache type it was compiled with\n", cacheType)
		}
		r, err := fromPlan(path, nil)
		if err == nil {
			tm.say("loaded plan %s", path)
		}
		return r, err
	}
	m, err := loadModel(path, arch.Options{CacheType: cacheType})
	if err != nil {
		return nil, err
	}
	tm.say("read %s", displayName(path))
	if err := checkTarget(target); err != nil {
		return nil, err
	}
	opts := compileOptions{Target: target, CacheType: cacheType}
	if path == "" {
		p, err := compileModel(m, "", opts)
		if err != nil {
			m.file.Close()
			return nil, err
		}
		tm.say("compiled in memory")
		return &runnable{graph: p.Graph, weights: m.model.Weights, tok: m.tok, ctx: p.Context, target: target, closers: []io.Closer{m.file}}, nil
	}
	// The model stays open: the plan borrows it (fromPlan), so the file is
	// mapped and its header hashed once per command.
	keep := false
	defer func() {
		if !keep {
			m.file.Close()
		}
	}()
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	ref, err := m.identify(abs)
	if err != nil {
		return nil, err
	}
	dir, dirErr := planCacheDir(cacheDir)
	cached := filepath.Join(dir, cacheKey(ref, opts)+".plan")
	if dirErr == nil {
		if _, err := os.Stat(cached); err == nil {
			r, err := fromPlan(cached, m)
			if err == nil {
				keep = true
				tm.say("compile skipped: cached plan %s", cached)
				return r, nil
			}
			// A stale or damaged cache entry is rebuilt, not an error.
			fmt.Fprintf(os.Stderr, "minervac: recompiling: %v\n", err)
		}
	}
	p, err := compileModel(m, abs, opts)
	if err != nil {
		return nil, err
	}
	tm.say("compiled %s", path)
	// A cache that cannot be used (no cache directory, one that cannot be
	// created or written) costs the next run a compile, not this run.
	inMemory := func(why error) (*runnable, error) {
		fmt.Fprintf(os.Stderr, "minervac: plan cache unusable (%v); compiled in memory, not cached\n", why)
		keep = true
		return &runnable{graph: p.Graph, weights: m.model.Weights, tok: m.tok, ctx: p.Context, target: target,
			kernels: p.Kernels[target], closers: []io.Closer{m.file}}, nil
	}
	if dirErr != nil {
		return inMemory(dirErr)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return inMemory(err)
	}
	if err := writePlan(p, m, cached, false); err != nil {
		return inMemory(err)
	}
	tm.say("cached plan %s", cached)
	r, err := fromPlan(cached, m)
	if err == nil {
		keep = true
		tm.say("loaded plan")
	}
	return r, err
}

// session compiles the runnable on its target's backend with one sequence
// slot of ctx positions.
func (r *runnable) session(ctx int) (*runtime.Session, error) {
	b, ok := runtime.LookupBackend(r.target)
	if !ok {
		return nil, fmt.Errorf("target %s is not implemented in this build (implemented: %v)", r.target, runtime.Backends())
	}
	if err := checkKVMemory(r.graph, ctx, availableMemory()); err != nil {
		return nil, err
	}
	prog, err := b.Compile(r.graph, r.weights, runtime.ProgramConfig{Context: ctx, Slots: 1, Options: r.opts, Kernels: r.kernels})
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, closerFunc(prog.Close))
	return runtime.NewProgramSession(prog, 0)
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// checkKVMemory refuses a context whose KV caches alone need more than the
// memory available (avail bytes; 0: unknown, no check), before anything is
// allocated: an absurd --ctx is one line, not the kernel's OOM killer.
func checkKVMemory(g *ir.Graph, ctx int, avail int64) error {
	// One row of every state (the KV caches, [C, W] of f32 or f16); the
	// backend checks the graph itself when it compiles.
	var perPos int64
	for _, v := range g.Values {
		if v.Op == ir.OpState && len(v.Type.Shape) == 2 {
			perPos += v.Type.Shape[1].N * int64(v.Type.DType.BlockBytes())
		}
	}
	need := perPos * int64(ctx)
	if perPos > 0 && need/perPos != int64(ctx) || avail > 0 && need > avail {
		return usageError{fmt.Sprintf("--ctx %d needs %s of KV cache; this machine has %s available", ctx, gigabytes(need), gigabytes(avail))}
	}
	return nil
}

func gigabytes(b int64) string {
	if b < 0 {
		return "more than 9 EB"
	}
	return fmt.Sprintf("%.1f GB", float64(b)/1e9)
}

// availableMemory is MemAvailable from /proc/meminfo, or 0 where there is
// none.
func availableMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
