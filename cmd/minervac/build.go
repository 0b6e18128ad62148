package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	cudagen "github.com/minerva-llm/minerva/codegen/cuda"
	mslgen "github.com/minerva-llm/minerva/codegen/metal"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/passes"
	"github.com/minerva-llm/minerva/plan"
	"github.com/minerva-llm/minerva/runtime"
	_ "github.com/minerva-llm/minerva/runtime/cpu"   // the "goasm" backend
	_ "github.com/minerva-llm/minerva/runtime/cuda"  // the "cuda" backend (runs only on linux, with the NVIDIA driver)
	_ "github.com/minerva-llm/minerva/runtime/metal" // the "metal" backend (runs only on darwin)
)

// compilerVersion goes into every plan; a plan cache keyed on it is never
// reused by another compiler.
const compilerVersion = "minervac dev"

// targets are the targets minervac knows; runtime.Backends() says which of
// them this build can run.
var targets = []string{"reference", "goasm", "cuda", "metal"}

func checkTarget(t string) error {
	if !slices.Contains(targets, t) {
		return usageError{fmt.Sprintf("unknown target %q (known targets: %s)", t, strings.Join(targets, ", "))}
	}
	if _, ok := runtime.LookupBackend(t); !ok {
		return fmt.Errorf("target %s is not implemented in this build yet (implemented: %s)", t, strings.Join(runtime.Backends(), ", "))
	}
	return nil
}

// compileOptions are the settings a plan is built with.
type compileOptions struct {
	Target string
	Ctx    int
	Cache  kvTypes
	Pass   passes.Options
}

// compileModel runs the pass pipeline on a loaded model and returns the plan
// (without writing it). With path set the plan refers to the model file
// (m.src.Identity, hashed once per source); "" leaves the reference empty.
func compileModel(m *loaded, path string, o compileOptions) (*plan.Plan, error) {
	list, err := passes.Pipeline()
	if err != nil {
		return nil, err
	}
	bar := newProgress(int64(len(list)), "compiling")
	popts := o.Pass
	popts.AfterPass = func(passes.Pass) { bar.Add(1) }
	_, err = passes.Run(m.model.Graph, list, popts)
	bar.Done()
	if err != nil {
		if strings.HasPrefix(err.Error(), "--print-after") {
			return nil, usageError{err.Error()}
		}
		return nil, err
	}
	ctx := o.Ctx
	if ctx == 0 {
		ctx = min(m.model.Config.ContextLength, runtime.DefaultMaxContext)
	}
	p := &plan.Plan{
		Compiler: compilerVersion,
		Target:   o.Target,
		Graph:    m.model.Graph,
		Vocab:    m.model.Vocab,
		Config:   m.model.Config,
		Context:  ctx,
		Sampling: m.src.Sampling(), // a directory's generation_config.json; greedy for a GGUF
	}
	// For a GPU target the kernels section holds the emitted library and
	// its launch schedule as JSON (codegen/metal.Library,
	// codegen/cuda.Library): the plan shows what will run, and a library
	// that cannot be emitted fails at compile time, not at run time.
	var lib any
	switch o.Target {
	case "metal":
		lib, err = mslgen.Emit(m.model.Graph)
	case "cuda":
		lib, err = cudagen.Emit(m.model.Graph)
	}
	if err != nil {
		return nil, err
	}
	if lib != nil {
		b, err := json.Marshal(lib)
		if err != nil {
			return nil, err
		}
		p.Kernels = map[string][]byte{o.Target: b}
	}
	if path != "" {
		if p.Model, err = m.src.Identity(); err != nil {
			return nil, err
		}
		// What inspect --verify checks the model's tensor data against
		// (opening the plan checks only size and header hash).
		if p.Model.WeightsDigest, err = plan.WeightsDigest(p.Graph, m.model.Weights); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// writePlan writes p to path atomically (a temporary file renamed into
// place), embedding the weights when embed is set.
func writePlan(p *plan.Plan, m *loaded, path string, embed bool) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".minervac-plan-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	err = encodePlan(tmp, p, m, embed)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644) // CreateTemp makes files private
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}

// encodePlan writes p to out through a buffer (plan.Write), embedding the
// weights when embed is set, with a progress bar while they are copied.
func encodePlan(out io.Writer, p *plan.Plan, m *loaded, embed bool) error {
	bw := bufio.NewWriterSize(out, 1<<20)
	var w io.Writer = bw
	var weights eval.Weights // nil: the plan references the model file
	if embed {
		// What Write embeds: the graph's weights, whatever the model's
		// format.
		var total int64
		for _, v := range p.Graph.Values {
			if v.Op == ir.OpWeight {
				n, _ := plan.WeightSize(v)
				total += n
			}
		}
		bar := newProgress(total, "embedding weights")
		defer bar.Done()
		w = io.MultiWriter(bw, progressWriter{bar})
		weights = m.model.Weights
	}
	if err := plan.Write(w, p, weights); err != nil {
		return err
	}
	return bw.Flush()
}

type progressWriter struct{ p *progress }

func (w progressWriter) Write(b []byte) (int, error) { w.p.Add(len(b)); return len(b), nil }

// planCacheDir is where `minervac run model.gguf` keeps compiled plans:
// --cache-dir ($MINERVA_CACHE_DIR), or minerva/plans in the user cache
// directory.
func planCacheDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (give --cache-dir or MINERVA_CACHE_DIR): %w", err)
	}
	return filepath.Join(d, "minerva", "plans"), nil
}

// cacheKey names the cached plan of a model: the model's identity (size and
// the SHA-256 of its header and tensor table, which frontend.Source.Identity
// computes and frontend.Open re-checks), the compiler version and build, and every option that
// changes the plan.
func cacheKey(ref plan.ModelRef, o compileOptions) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00%s\x00%d\x00%s\x00%s", compilerVersion, compilerBuild(), ref.HeaderSHA256, ref.Size, o.Target, o.Ctx, o.Cache.K, o.Cache.V)
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// compilerBuild identifies this executable: the SHA-256 of its file, or ""
// when it cannot be read. compilerVersion alone is the same for every
// development build, so a plan cached by an older build (say, before a
// frontend started marking gpt-oss graphs for the reference engine's
// activation rounding) would silently be reused by a newer one; hashing the
// binary (about 10 ms) makes every rebuild compile afresh.
func compilerBuild() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	f, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// timer prints phase times on stderr with -v.
type timer struct {
	on    bool
	start time.Time
}

func (t *timer) reset() { t.start = time.Now() }

func (t *timer) say(format string, args ...any) {
	if t.on {
		fmt.Fprintf(os.Stderr, "minervac: "+format+" (%.1f ms)\n", append(args, float64(time.Since(t.start).Microseconds())/1000)...)
	}
	t.start = time.Now()
}

// kvTypes are the element types of the key and value caches.
type kvTypes struct{ K, V ir.DType }

func (t kvTypes) arch() arch.Options { return arch.Options{CacheType: t.K, VCacheType: t.V} }

// cacheFlags are the KV cache type flags of the commands that build a
// graph. Empty means not given: keys and values in f16, llama.cpp's default.
type cacheFlags struct {
	CacheType  string `help:"KV cache element type of keys and values: f32, f16 or q8_0 (default f16, as llama.cpp)." enum:",f32,f16,q8_0" default:""`
	CacheTypeK string `name:"cache-type-k" help:"Key cache element type (default: --cache-type); gpt-oss's reference runs keep K in f32 and V in f16." enum:",f32,f16,q8_0" default:""`
	CacheTypeV string `name:"cache-type-v" help:"Value cache element type (default: --cache-type)." enum:",f32,f16,q8_0" default:""`
}

// types resolves the flags.
func (c cacheFlags) types() kvTypes {
	all := cacheDType(c.CacheType)
	t := kvTypes{all, all}
	if c.CacheTypeK != "" {
		t.K = cacheDType(c.CacheTypeK)
	}
	if c.CacheTypeV != "" {
		t.V = cacheDType(c.CacheTypeV)
	}
	return t
}

// given lists the flags set, as typed ("--cache-type f32"), for a warning
// that they are ignored.
func (c cacheFlags) given() string {
	var out []string
	for _, f := range [][2]string{{"cache-type", c.CacheType}, {"cache-type-k", c.CacheTypeK}, {"cache-type-v", c.CacheTypeV}} {
		if f[1] != "" {
			out = append(out, "--"+f[0]+" "+f[1])
		}
	}
	return strings.Join(out, ", ")
}

// cacheDType parses one cache type flag ("" is f16).
func cacheDType(s string) ir.DType {
	switch s {
	case "f32":
		return ir.F32
	case "q8_0":
		return ir.Q8_0
	}
	return ir.F16
}
