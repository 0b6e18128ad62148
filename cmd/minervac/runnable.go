package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/plan"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/tokenizer"
)

// runnable is a compiled model ready for a session: from a plan file, from
// the plan cache, or compiled in memory.
type runnable struct {
	graph   *ir.Graph
	weights eval.Weights
	tok     *tokenizer.Tokenizer
	ctx     int       // default context length
	trained int       // the context the model was trained for (0: unknown)
	target  string    // the backend that runs it
	kernels []byte    // the plan's kernels section for target (nil: none, or no plan)
	chat    modelChat // the model file's chat template and architecture (chat, run --chat)
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

// fromPlan makes a runnable of an opened plan, checking that this build can
// run its target. The runnable takes src over (closes it), also on error.
func fromPlan(src *frontend.Source) (*runnable, error) {
	p := src.Plan
	if _, ok := runtime.LookupBackend(p.Target); !ok {
		src.Close()
		return nil, fmt.Errorf("%s was compiled for target %s, which this build cannot run (it runs: %v)", src.Path, p.Target, runtime.Backends())
	}
	tok, err := tokenizer.New(p.Vocab)
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("%s: tokenizer: %w", src.Path, err)
	}
	return &runnable{graph: p.Graph, weights: src.Weights(), tok: tok, ctx: p.Context, trained: p.Config.ContextLength, target: p.Target,
		kernels: p.Kernels[p.Target], chat: chatInfoOf(src), closers: []io.Closer{src}}, nil
}

// openRunnable turns what the user named into something to run, opening
// each file once (frontend.Open). A plan file runs as is. A GGUF file is
// compiled once and the plan cached in planCacheDir by the model's
// identity, so the second run only opens the cached plan (which borrows the
// open model and checks it against the plan's record). No path means the
// built-in synthetic model, compiled in memory.
func openRunnable(path, target string, cache cacheFlags, opts *runtime.Options, tm *timer) (*runnable, error) {
	r, err := openRunnableIn(path, target, cache, opts.CacheDir, tm)
	if err != nil {
		return nil, err
	}
	r.opts = *opts
	return r, nil
}

func openRunnableIn(path, target string, cache cacheFlags, cacheDir string, tm *timer) (*runnable, error) {
	src, err := openSource(path)
	if err != nil {
		return nil, err
	}
	if src.Format == frontend.FormatPlan {
		// A plan runs on the target and with the KV cache type it was
		// compiled for; a flag left at its default is not reported.
		if target != "goasm" {
			fmt.Fprintf(os.Stderr, "minervac: -t %s is ignored: a plan runs on the target it was compiled for\n", target)
		}
		if given := cache.given(); given != "" {
			fmt.Fprintf(os.Stderr, "minervac: %s is ignored: a plan keeps the KV cache types it was compiled with\n", given)
		}
		r, err := fromPlan(src)
		if err == nil {
			tm.say("loaded plan %s", path)
		}
		return r, err
	}
	// From here the runnable owns src (its closers), unless this fails.
	keep := false
	defer func() {
		if !keep {
			src.Close()
		}
	}()
	tm.say("read %s", displayName(path))
	if err := checkTarget(target); err != nil {
		return nil, err
	}
	opts := compileOptions{Target: target, Cache: cache.types()}
	// compiled runs the graph compiled here, with the source's weights:
	// after writing the cached plan it is not read back, so the graph is
	// built, verified and printed once from command to first token.
	compiled := func(m *loaded, p *plan.Plan) *runnable {
		keep = true
		return &runnable{graph: p.Graph, weights: src.Weights(), tok: m.tok, ctx: p.Context, trained: p.Config.ContextLength, target: target,
			kernels: p.Kernels[target], chat: chatInfoOf(src), closers: []io.Closer{src}}
	}
	if path == "" {
		m, err := build(src, opts.Cache.arch())
		if err != nil {
			return nil, err
		}
		p, err := compileModel(m, "", opts)
		if err != nil {
			return nil, err
		}
		tm.say("compiled in memory")
		return compiled(m, p), nil
	}
	ref, err := src.Identity()
	if err != nil {
		return nil, err
	}
	dir, dirErr := planCacheDir(cacheDir)
	cached := filepath.Join(dir, cacheKey(ref, opts)+".plan")
	if dirErr == nil {
		if _, err := os.Stat(cached); err == nil {
			// The cached plan borrows the open model: neither is opened or
			// hashed twice, and the graph is parsed, not built.
			r, err := openCached(cached, src)
			if err == nil {
				keep = true
				tm.say("compile skipped: cached plan %s", cached)
				return r, nil
			}
			// A stale or damaged cache entry is rebuilt, not an error.
			fmt.Fprintf(os.Stderr, "minervac: recompiling: %v\n", err)
		}
	}
	m, err := build(src, opts.Cache.arch())
	if err != nil {
		return nil, err
	}
	p, err := compileModel(m, path, opts)
	if err != nil {
		return nil, err
	}
	tm.say("compiled %s", path)
	// A cache that cannot be used (no cache directory, one that cannot be
	// created or written) costs the next run a compile, not this run.
	inMemory := func(why error) (*runnable, error) {
		fmt.Fprintf(os.Stderr, "minervac: plan cache unusable (%v); compiled in memory, not cached\n", why)
		return compiled(m, p), nil
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
	return compiled(m, p), nil
}

// openCached opens the cached plan of the model src, lending it src; the
// runnable closes the plan, then src.
func openCached(path string, src *frontend.Source) (*runnable, error) {
	ps, err := frontend.OpenWith(path, frontend.Options{Lend: src})
	if err != nil {
		return nil, err
	}
	r, err := fromPlan(ps)
	if err != nil {
		return nil, err
	}
	r.closers = append([]io.Closer{src}, r.closers...)
	r.chat = chatInfoOf(src) // the template is the model file's, which the plan does not copy
	return r, nil
}

// loadSession is session behind the "loading weights" spinner, with ctx 0
// meaning the model's own context; it returns the context it used.
func (r *runnable) loadSession(ctx int) (*runtime.Session, int, error) {
	if ctx == 0 {
		ctx = r.ctx
	}
	var sess *runtime.Session
	err := spin("loading weights", func() (err error) {
		sess, err = r.session(ctx)
		return err
	})
	return sess, ctx, err
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
	r.warnTrained(ctx)
	prog, err := b.Compile(r.graph, r.weights, runtime.ProgramConfig{Context: ctx, Slots: 1, Options: r.opts, Kernels: r.kernels})
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, closerFunc(prog.Close))
	return runtime.NewProgramSession(prog, 0)
}

// warnTrained warns (one line on stderr) when ctx is beyond the context the
// model was trained for: allowed, but text past it may lose coherence.
func (r *runnable) warnTrained(ctx int) {
	if r.trained > 0 && ctx > r.trained {
		fmt.Fprintf(os.Stderr, "minervac: warning: --ctx %d is beyond the %d positions the model was trained for: text past them may lose coherence\n", ctx, r.trained)
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// checkKVMemory refuses a context whose KV caches alone need more than the
// memory available (avail bytes; 0: unknown, no check), before anything is
// allocated: an absurd --ctx is one line, not the kernel's OOM killer.
func checkKVMemory(g *ir.Graph, ctx int, avail int64) error {
	// One row of every state (the KV caches, [C, W] of f32, f16 or q8_0,
	// in their own types); the backend checks the graph itself when it
	// compiles.
	var perPos int64
	for _, v := range g.Values {
		if v.Op == ir.OpState && len(v.Type.Shape) == 2 {
			rb, err := v.Type.DType.RowBytes(v.Type.Shape[1].N)
			if err != nil {
				return fmt.Errorf("state %q: %w", v.Name(), err)
			}
			perPos += rb
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
