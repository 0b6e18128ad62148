// Package arch turns a model's metadata and tensor table into an ir.Graph:
// one file per architecture family, shared helpers here. The builders read
// a File, which speaks GGUF's terms; a GGUF file is one as it stands, and
// frontend/hf presents a Hugging Face directory as one.
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
	// CacheType is the KV cache element type: ir.F32 (default), ir.F16 or
	// ir.Q8_0.
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

// File is a model's metadata and tensor table as the family builders read
// them, in GGUF's terms: metadata keys such as "llama.block_count", tensors
// named as GGUF names them ("blk.0.attn_q.weight") with GGUF dims (row
// length first). A GGUF file is such a File as it stands (Load wraps it);
// frontend/hf translates a Hugging Face directory's config.json and tensor
// names into the same terms. So a family keeps one builder whatever the
// format on disk, and what a format may differ in is Layout.
type File interface {
	Architecture() string
	Get(key string) (gguf.Value, bool)
	String(key string) (string, bool)
	Uint(key string) (uint64, bool)
	Float(key string) (float64, bool)
	Tensor(name string) (*gguf.TensorInfo, bool)
	// TensorNames lists every tensor, so that one the graph does not read
	// is refused (checkConsumed).
	TensorNames() []string
	WeightBytes(name string) ([]byte, error)
	// Vocab is the tokenizer's vocabulary.
	Vocab() (tokenizer.Vocab, error)
	Layout() Layout
}

// Layout is how a File's tensors and tokenizer may differ from a GGUF
// file's. The zero value is GGUF.
type Layout struct {
	// RotateHalf: the q and k rows of each head are in Hugging Face's
	// rotate-half order (element i pairs with i + head_dim/2), where a GGUF
	// file of a "normal"-RoPE family (llama) holds them permuted for
	// adjacent pairs. Such a family then builds its graph with NEOX RoPE,
	// which rotates exactly those pairs: the same scores, with the weights
	// used as stored (no permuted copy).
	RotateHalf bool
	// ShortVocab: the tokenizer may have fewer tokens than the embedding
	// has rows, or none at all. Hugging Face models pad the embedding (Qwen:
	// 151,936 rows for 151,669 tokens), and a directory without tokenizer
	// files still runs from token ids. A GGUF file's counts must agree, as
	// llama.cpp requires.
	ShortVocab bool
}

// checkVocab holds a vocabulary of n tokens to the embedding's rows as
// the File's layout says.
func checkVocab(f File, n, rows int) error {
	if n == rows || f.Layout().ShortVocab && n < rows {
		return nil
	}
	return fmt.Errorf("tokenizer has %d tokens but token_embd.weight has %d rows", n, rows)
}

// ggufFile is a GGUF file as a File.
type ggufFile struct{ *gguf.File }

func (f ggufFile) TensorNames() []string {
	names := make([]string, len(f.Tensors))
	for i, t := range f.Tensors {
		names[i] = t.Name
	}
	return names
}

func (f ggufFile) Vocab() (tokenizer.Vocab, error) { return LoadVocab(f.File) }
func (f ggufFile) Layout() Layout                  { return Layout{} }

// builders maps a GGUF general.architecture to its frontend; each family
// file adds itself.
var builders = map[string]func(f File, opts Options) (*Model, error){
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
func Load(f *gguf.File, opts Options) (*Model, error) { return LoadFile(ggufFile{f}, opts) }

// LoadFile builds the model graph for a model in any format that presents
// itself as a File (a GGUF file, a Hugging Face directory).
func LoadFile(f File, opts Options) (*Model, error) {
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
	if !ir.IsCacheType(opts.CacheType) {
		return nil, fmt.Errorf("KV cache type %s is not f32, f16 or q8_0", opts.CacheType)
	}
	if opts.VCacheType == 0 {
		opts.VCacheType = opts.CacheType
	}
	if !ir.IsCacheType(opts.VCacheType) {
		return nil, fmt.Errorf("V cache type %s is not f32, f16 or q8_0", opts.VCacheType)
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
func checkConsumed(f File, g *ir.Graph) error {
	used := map[string]bool{}
	for _, v := range g.Values {
		if v.Op == ir.OpWeight {
			used[v.Name()] = true
		}
		if v.Attrs.Floats("freq_factors") != nil {
			used["rope_freqs.weight"] = true
		}
	}
	for _, name := range f.TensorNames() {
		if !used[name] {
			return fmt.Errorf("tensor %q is not used by the %s architecture (it may change the math, so the model is refused)", name, f.Architecture())
		}
	}
	return nil
}

// Weights serves tensor bytes from the model's File to the interpreter and
// backends (gguf.File.WeightBytes for a GGUF file).
type Weights struct{ f File }

// WeightBytes returns the raw bytes of the named tensor.
func (w *Weights) WeightBytes(name string) ([]byte, error) { return w.f.WeightBytes(name) }

// meta reads typed metadata with the architecture prefix and collects the
// first error, so a frontend can read a dozen keys and check once.
type meta struct {
	f    File
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
func weight(b *ir.Builder, f File, name string, shape ...int) (*ir.Value, error) {
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
func optionalWeight(b *ir.Builder, f File, name string, shape ...int) (*ir.Value, error) {
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
