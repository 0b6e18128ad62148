// Package arch turns a model file's metadata and tensor table into an
// ir.Graph: one file per architecture family, shared helpers here.
package arch

import (
	"fmt"
	"sort"
	"strings"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/plan"
	"github.com/minerva-llm/minerva/tokenizer"
)

// Options tune the graph a frontend builds.
type Options struct {
	// CacheType is the KV cache element type: ir.F32 (default) or ir.F16.
	CacheType ir.DType
	// VCacheType, when set, overrides CacheType for the V caches alone (the
	// gpt-oss reference runs keep K in f32 and V in f16).
	VCacheType ir.DType
}

// Config is the architecture summary a frontend reads from the file. It is
// defined with the plan format that records it (plan.Config), so that a
// plan can be read without the frontends.
type Config = plan.Config

// Model is what a frontend produces: the graph, its configuration, the
// tokenizer vocabulary, and the weights it refers to.
type Model struct {
	Config  Config
	Graph   *ir.Graph
	Vocab   tokenizer.Vocab
	Weights *Weights
}

// builders maps a GGUF general.architecture to its frontend; each family
// file adds itself.
var builders = map[string]func(f *gguf.File, opts Options) (*Model, error){
	"gpt-oss": buildGPTOSS,
}

// Supported lists the architectures this build can compile.
func Supported() []string {
	names := make([]string, 0, len(builders))
	for n := range builders {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Load builds the model graph for a parsed GGUF file.
func Load(f *gguf.File, opts Options) (*Model, error) {
	name := f.Architecture()
	if name == "" {
		return nil, fmt.Errorf("model has no general.architecture key")
	}
	build, ok := builders[name]
	if !ok {
		return nil, fmt.Errorf("unsupported architecture %q (supported: %s)", name, strings.Join(Supported(), ", "))
	}
	if opts.CacheType == 0 {
		opts.CacheType = ir.F32
	}
	if opts.CacheType != ir.F32 && opts.CacheType != ir.F16 {
		return nil, fmt.Errorf("KV cache type %s is not f32 or f16", opts.CacheType)
	}
	if opts.VCacheType == 0 {
		opts.VCacheType = opts.CacheType
	}
	if opts.VCacheType != ir.F32 && opts.VCacheType != ir.F16 {
		return nil, fmt.Errorf("V cache type %s is not f32 or f16", opts.VCacheType)
	}
	m, err := build(f, opts)
	if err != nil {
		return nil, err
	}
	if err := checkConsumed(f, m.Graph); err != nil {
		return nil, err
	}
	return m, nil
}

// checkConsumed fails on a tensor of the file that the graph does not
// read: a tensor the architecture does not know may change the math (a
// bias, a norm, rope factors), so it is never silently ignored. The one
// exception is rope_freqs.weight when it was read into the graph's rope
// attributes.
func checkConsumed(f *gguf.File, g *ir.Graph) error {
	used := map[string]bool{}
	for _, v := range g.Values {
		if v.Op == ir.OpWeight {
			used[v.Name()] = true
		}
		if v.Attrs.Floats("freq_factors") != nil {
			used["rope_freqs.weight"] = true
		}
	}
	for _, t := range f.Tensors {
		if !used[t.Name] {
			return fmt.Errorf("tensor %q is not used by the %s architecture (it may change the math, so the model is refused)", t.Name, f.Architecture())
		}
	}
	return nil
}

// Weights serves tensor bytes from a GGUF file to the interpreter and
// backends (gguf.File.WeightBytes).
type Weights struct{ f *gguf.File }

// WeightBytes returns the raw bytes of the named tensor.
func (w *Weights) WeightBytes(name string) ([]byte, error) { return w.f.WeightBytes(name) }

// meta reads typed metadata with the architecture prefix and collects the
// first error, so a frontend can read a dozen keys and check once.
type meta struct {
	f    *gguf.File
	arch string
	err  error
}

func (m *meta) fail(format string, args ...any) {
	if m.err == nil {
		m.err = fmt.Errorf(format, args...)
	}
}

func (m *meta) key(k string) string { return m.arch + "." + k }

// uint reads a required positive integer.
func (m *meta) uint(k string) int {
	v, ok := m.f.Uint(m.key(k))
	if !ok {
		m.fail("model metadata %s is missing or not an integer", m.key(k))
		return 0
	}
	if v == 0 || v > 1<<31 {
		m.fail("model metadata %s = %d is out of range", m.key(k), v)
		return 0
	}
	return int(v)
}

// uintOr reads an optional positive integer.
func (m *meta) uintOr(k string, def int) int {
	if _, ok := m.f.Get(m.key(k)); !ok {
		return def
	}
	return m.uint(k)
}

// floatOr reads an optional float.
func (m *meta) floatOr(k string, def float64) float64 {
	if _, ok := m.f.Get(m.key(k)); !ok {
		return def
	}
	v, ok := m.f.Float(m.key(k))
	if !ok {
		m.fail("model metadata %s is not a number", m.key(k))
	}
	return v
}

// weight declares a tensor as a graph weight after checking that the file
// holds it with the expected row-major shape (GGUF dims reversed).
func weight(b *ir.Builder, f *gguf.File, name string, shape ...int) (*ir.Value, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("model file has no tensor %q", name)
	}
	if len(t.Dims) != len(shape) {
		return nil, fmt.Errorf("tensor %q has %d dims %v, want %d", name, len(t.Dims), t.Dims, len(shape))
	}
	s := make(ir.Shape, len(shape))
	for i, want := range shape {
		got := t.Dims[len(t.Dims)-1-i]
		if got != uint64(want) {
			return nil, fmt.Errorf("tensor %q has GGUF dims %v, want %v", name, t.Dims, reversed(shape))
		}
		s[i] = ir.D(int64(want))
	}
	return b.Weight(name, ir.Type{DType: t.Type, Shape: s}), nil
}

// optionalWeight is weight for tensors a layout may omit (biases).
func optionalWeight(b *ir.Builder, f *gguf.File, name string, shape ...int) (*ir.Value, error) {
	if _, ok := f.Tensor(name); !ok {
		return nil, nil
	}
	return weight(b, f, name, shape...)
}

func reversed(s []int) []int {
	r := make([]int, len(s))
	for i, v := range s {
		r[len(s)-1-i] = v
	}
	return r
}
