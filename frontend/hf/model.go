// Package hf reads a Hugging Face model directory (as transformers'
// save_pretrained or mlx_lm.convert write one): config.json, the weights in
// SafeTensors files (one, or shards listed by model.safetensors.index.json),
// generation_config.json, and the tokenizer (tokenizer.json with
// tokenizer_config.json). It presents the directory as an arch.File, in
// GGUF's terms: config.json becomes the metadata keys the family builders
// read, HF tensor names become GGUF's, so that each family of frontend/arch
// keeps one builder for both formats.
//
// The q and k projections stay in HF's rotate-half row order: the model
// says so through arch.Layout.RotateHalf and a llama graph is built with
// NEOX RoPE, which is the same rotation on those rows (GGUF's converter
// permutes the rows instead, for "normal" RoPE). Weights are used from the
// mapped shards as stored; only 1-D gains and biases are widened to F32.
//
// Everything is checked against config.json before a graph is built: each
// tensor's presence, dtype and shape, with errors naming the file, the
// tensor and its byte offset. Like frontend/safetensors, the package opens
// nothing itself: Open reads the directory through the Opener it is given
// (frontend.Open's, which counts each file it opens).
package hf

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/frontend/safetensors"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/tokenizer"
)

// The files of a model directory that Open reads.
const (
	ConfigName          = "config.json"
	GenerationName      = "generation_config.json"
	TokenizerName       = "tokenizer.json"
	TokenizerConfigName = "tokenizer_config.json"
	SingleName          = "model.safetensors"
)

// Size limits of the JSON files, so that a file's size alone never decides
// an allocation beyond what any real model needs (Gemma's tokenizer.json,
// one of the largest, is 33 MB).
const (
	maxConfig    = 16 << 20
	maxIndex     = 64 << 20
	maxTokenizer = 256 << 20
)

// Opener opens a file of the directory for reading.
type Opener func(path string) (*os.File, error)

// Part is a file of the directory that Open read.
type Part struct {
	Path string // absolute or as given: Dir joined with the file name
	Size int64
	Role string // "config", "index", "shard", "generation", "tokenizer", "tokenizer config"
}

// Model is an opened model directory. Its shards stay mapped until Close.
type Model struct {
	Dir   string
	Class string // the transformers class, e.g. "LlamaForCausalLM"
	// Parts lists the files read, in the order they were opened.
	Parts []Part
	// Tensors is the weights' container: the shards, or the one file.
	Tensors *safetensors.Set
	// Generation is generation_config.json (zero when there is none).
	Generation Generation
	// TokenizerConfig is tokenizer_config.json's chat template and special
	// token texts; HasTokenizer says whether a tokenizer.json was read.
	TokenizerConfig tokenizer.HFConfig
	HasTokenizer    bool
	// Err is why this build cannot run the model, for a directory opened
	// with Inspect (Open fails with it instead); nil when it can.
	Err error

	cfg     *config
	spec    *spec
	quant   *quantSpec
	vocab   tokenizer.Vocab
	weights map[string]*decision // by GGUF name
	names   []string             // GGUF names, sorted
	sum     [32]byte             // identity hash (Fingerprint)
	size    int64
}

var _ arch.File = (*Model)(nil)

// Open reads the model directory dir through open. Errors are one line
// naming the file at fault.
func Open(dir string, open Opener) (*Model, error) { return openDir(dir, open, false) }

// Inspect opens a directory as Open does, except that a model this build
// cannot run (an architecture or quantization it does not support,
// tensors that disagree with config.json) still opens, with the reason in
// Err, so that its files, config and tensors can be shown. A file that
// cannot be read or parsed is still an error.
func Inspect(dir string, open Opener) (*Model, error) { return openDir(dir, open, true) }

func openDir(dir string, open Opener, lenient bool) (m *Model, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	present := map[string]bool{}
	for _, e := range entries {
		if e.Type().IsRegular() || e.Type()&fs.ModeSymlink != 0 {
			present[e.Name()] = true
		}
	}
	m = &Model{Dir: dir, weights: map[string]*decision{}}
	var shards []*safetensors.File
	defer func() {
		if err != nil {
			for _, f := range shards {
				f.Close()
			}
		}
	}()
	hash := sha256.New()
	// read reads a whole (small) file, recording it and hashing its bytes
	// into the identity.
	read := func(name, role string, limit int64) ([]byte, error) {
		data, part, err := readFile(open, filepath.Join(dir, name), role, limit)
		if err != nil {
			return nil, err
		}
		m.Parts = append(m.Parts, part)
		identify(hash, name, part.Size, data)
		return data, nil
	}

	if !present[ConfigName] {
		return nil, fmt.Errorf("%s has no %s: not a Hugging Face model directory", dir, ConfigName)
	}
	data, err := read(ConfigName, "config", maxConfig)
	if err != nil {
		return nil, err
	}
	cpath := filepath.Join(dir, ConfigName)
	if m.cfg, err = parseConfig(cpath, data); err != nil {
		return nil, err
	}
	// refuse records why the model cannot run: fatal for Open, kept in
	// Err for Inspect.
	refuse := func(err error) error {
		if !lenient {
			return err
		}
		if m.Err == nil {
			m.Err = err
		}
		return nil
	}
	if m.quant, err = parseQuant(m.cfg); err != nil {
		if err := refuse(err); err != nil {
			return nil, err
		}
	}
	if fam, err := findFamily(m.cfg); err != nil {
		if err := refuse(err); err != nil {
			return nil, err
		}
	} else if m.Err == nil {
		m.Class = fam.class
		if m.spec, err = translate(m.cfg, fam, filepath.Base(filepath.Clean(dir))); err != nil {
			if err := refuse(err); err != nil {
				return nil, err
			}
		}
	}

	// The weights: the index and its shards, or the one file.
	var idx *safetensors.Index
	switch {
	case present[safetensors.IndexName]:
		data, err := read(safetensors.IndexName, "index", maxIndex)
		if err != nil {
			return nil, err
		}
		if idx, err = safetensors.ParseIndex(filepath.Join(dir, safetensors.IndexName), data); err != nil {
			return nil, err
		}
		for _, s := range idx.Shards {
			if !present[s] {
				first := ""
				for _, t := range slices.Sorted(maps.Keys(idx.WeightMap)) {
					if idx.WeightMap[t] == s {
						first = t
						break
					}
				}
				return nil, &safetensors.Error{Path: idx.Path, Tensor: first, Offset: idx.EntryOffset(first),
					Msg: fmt.Sprintf("weight_map puts it in shard %q, which is missing from %s", s, dir)}
			}
		}
	case present[SingleName]:
	default:
		var found []string
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".safetensors") {
				found = append(found, e.Name())
			}
		}
		switch {
		case len(found) == 1:
			return nil, fmt.Errorf("%s has no %s or %s (it has %s: rename it %s)", dir, SingleName, safetensors.IndexName, found[0], SingleName)
		case len(found) > 1:
			return nil, fmt.Errorf("%s has %d .safetensors files but no %s to say which tensors each holds", dir, len(found), safetensors.IndexName)
		case present["pytorch_model.bin"] || present["pytorch_model.bin.index.json"]:
			return nil, fmt.Errorf("%s holds PyTorch pickles (pytorch_model.bin), which are not read: convert them to safetensors", dir)
		}
		return nil, fmt.Errorf("%s has no weights (%s or %s)", dir, SingleName, safetensors.IndexName)
	}
	names := []string{SingleName}
	if idx != nil {
		names = idx.Shards
	}
	for _, name := range names {
		f, part, err := openShard(open, filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		shards = append(shards, f)
		m.Parts = append(m.Parts, part)
		identify(hash, name, part.Size, f.Header())
	}
	if m.Tensors, err = safetensors.NewSet(idx, shards); err != nil {
		return nil, err
	}

	m.Generation = Generation{BOS: -1, PAD: -1}
	if present[GenerationName] {
		data, err := read(GenerationName, "generation", maxConfig)
		if err != nil {
			return nil, err
		}
		if m.spec != nil {
			if m.Generation, err = parseGeneration(filepath.Join(dir, GenerationName), data, m.spec); err != nil {
				if err := refuse(err); err != nil {
					return nil, err
				}
			}
		}
	} else if m.spec != nil {
		// config.json's eos_token_id is transformers' fallback.
		if m.Generation.EOS, err = tokenIDs(cpath, m.cfg, "eos_token_id", m.spec); err != nil {
			if err := refuse(err); err != nil {
				return nil, err
			}
		}
	}
	if err := m.readTokenizer(present, read); err != nil {
		if err := refuse(err); err != nil {
			return nil, err
		}
	}
	if m.spec != nil {
		if err := m.decideAll(); err != nil {
			if err := refuse(err); err != nil {
				return nil, err
			}
		}
	}
	hash.Sum(m.sum[:0])
	for _, p := range m.Parts {
		m.size += p.Size
	}
	return m, nil
}

// readTokenizer reads tokenizer.json and tokenizer_config.json when the
// directory has them. A directory without a tokenizer still loads: it runs
// from token ids.
func (m *Model) readTokenizer(present map[string]bool, read func(name, role string, limit int64) ([]byte, error)) error {
	m.vocab = tokenizer.Vocab{BOS: -1, EOS: -1, UNK: -1, PAD: -1}
	if !present[TokenizerName] {
		return nil
	}
	tj, err := read(TokenizerName, "tokenizer", maxTokenizer)
	if err != nil {
		return err
	}
	var cj []byte
	if present[TokenizerConfigName] {
		if cj, err = read(TokenizerConfigName, "tokenizer config", maxConfig); err != nil {
			return err
		}
	}
	// ParseHF's errors start with the name of the file at fault.
	if m.vocab, m.TokenizerConfig, err = tokenizer.ParseHF(tj, cj); err != nil {
		return fmt.Errorf("%s/%w", m.Dir, err)
	}
	m.HasTokenizer = true
	return nil
}

// decideAll makes the dtype decision for every tensor config.json says
// the graph reads, checks its shape, and refuses any tensor left over.
func (m *Model) decideAll() error {
	consumed := map[string]bool{}
	if m.spec.experts != nil {
		ds, err := m.resolveExperts()
		if err != nil {
			return err
		}
		for _, d := range ds {
			m.weights[d.info.Name] = d
			for _, p := range d.parts {
				consumed[p] = true
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(m.spec.slots)) {
		s := m.spec.slots[name]
		t, f, ok := m.Tensors.Tensor(name)
		if !ok {
			if s.need {
				return fmt.Errorf("%s: no tensor %q, which %s needs (config.json: %s)", m.Dir, name, m.Class, m.shapeSummary())
			}
			continue
		}
		d, err := m.decide(name, s.gguf, s.shape, f, t)
		if err != nil {
			return err
		}
		if err := checkShape(f, t, d.shape, s.shape); err != nil {
			return err
		}
		m.weights[s.gguf] = d
		for _, p := range d.parts {
			consumed[p] = true
		}
	}
	for _, name := range m.Tensors.Names() {
		if consumed[name] || m.spec.skip[name] != "" {
			continue
		}
		t, f, _ := m.Tensors.Tensor(name)
		return &safetensors.Error{Path: f.Path, Tensor: name, Offset: t.At,
			Msg: fmt.Sprintf("is not part of a %s model as config.json describes it (it may change the math, so the model is refused)", m.Class)}
	}
	if fr := m.spec.ropeFreqs; fr != nil {
		b := make([]byte, 4*len(fr))
		for i, x := range fr {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		m.weights["rope_freqs.weight"] = &decision{hf: "", data: b, stored: "F32 (from rope_scaling)",
			info: gguf.TensorInfo{Name: "rope_freqs.weight", Dims: []uint64{uint64(len(fr))}, Type: ir.F32, Size: uint64(len(b))}}
	}
	m.names = slices.Sorted(maps.Keys(m.weights))
	return nil
}

// checkShape holds a tensor's logical shape (a quantized weight's element
// count, not its words') to the shape config.json implies.
func checkShape(f *safetensors.File, t *safetensors.Tensor, shape []uint64, want []dim) error {
	ok := len(shape) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = shape[i] == uint64(want[i].n)
	}
	if ok {
		return nil
	}
	ws := make([]string, len(want))
	for i, d := range want {
		ws[i] = d.String()
	}
	return &safetensors.Error{Path: f.Path, Tensor: t.Name, Offset: t.At,
		Msg: fmt.Sprintf("is %s %v, but config.json makes it [%s]", t.DType, shape, strings.Join(ws, ", "))}
}

// shapeSummary names the config's sizes for a message.
func (m *Model) shapeSummary() string {
	a := m.spec.fam.arch
	get := func(k string) uint64 { v, _ := m.Uint(a + "." + k); return v }
	return fmt.Sprintf("%d layers, hidden_size %d, %d heads", get("block_count"), get("embedding_length"), get("attention.head_count"))
}

// readFile reads a whole file of at most limit bytes.
func readFile(open Opener, path, role string, limit int64) ([]byte, Part, error) {
	fh, err := open(path)
	if err != nil {
		return nil, Part{}, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, Part{}, err
	}
	switch {
	case !st.Mode().IsRegular():
		return nil, Part{}, fmt.Errorf("%s is not a regular file", path)
	case st.Size() > limit:
		return nil, Part{}, fmt.Errorf("%s is %d bytes, more than the %d a %s file may be", path, st.Size(), limit, role)
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(fh, data); err != nil {
		return nil, Part{}, fmt.Errorf("%s: %w", path, err)
	}
	return data, Part{Path: path, Size: st.Size(), Role: role}, nil
}

// openShard opens and maps a safetensors file.
func openShard(open Opener, path string) (*safetensors.File, Part, error) {
	fh, err := open(path)
	if err != nil {
		return nil, Part{}, err
	}
	defer fh.Close() // the mapping outlives it
	f, err := safetensors.OpenFile(fh)
	if err != nil {
		return nil, Part{}, err
	}
	return f, Part{Path: path, Size: f.Size(), Role: "shard"}, nil
}

// identify hashes one file into the identity: its name, size and the bytes
// that define it (a JSON file whole; a shard's header, which fixes every
// tensor's name, type, shape and place, as a GGUF file's header does).
func identify(h io.Writer, name string, size int64, data []byte) {
	var n [8]byte
	io.WriteString(h, name)
	h.Write([]byte{0})
	binary.LittleEndian.PutUint64(n[:], uint64(size))
	h.Write(n[:])
	binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
	h.Write(n[:])
	h.Write(data)
}

// Fingerprint is the directory's identity: the SHA-256 over every file
// read (name, size, and a JSON file's contents or a shard's header), and
// the files' total size. A plan records it to check that the directory is
// unchanged, as it records a GGUF file's header hash.
func (m *Model) Fingerprint() ([32]byte, int64) { return m.sum, m.size }

// Close unmaps the shards. Closing twice is harmless.
func (m *Model) Close() error {
	if m.Tensors == nil {
		return nil
	}
	return m.Tensors.Close()
}

// The arch.File methods: the directory in GGUF's terms.

// Architecture is the GGUF family that builds the graph ("" when the
// architecture is not supported: see Err).
func (m *Model) Architecture() string {
	if m.spec == nil {
		return ""
	}
	return m.spec.fam.arch
}

// Get returns a GGUF metadata value translated from config.json.
func (m *Model) Get(key string) (gguf.Value, bool) {
	if m.spec == nil {
		return gguf.Value{}, false
	}
	v, ok := m.spec.meta[key]
	return v, ok
}

// String returns a string metadata value.
func (m *Model) String(key string) (string, bool) { v, _ := m.Get(key); return v.Str() }

// Uint returns an integer metadata value.
func (m *Model) Uint(key string) (uint64, bool) { v, _ := m.Get(key); return v.Uint() }

// Float returns a float metadata value.
func (m *Model) Float(key string) (float64, bool) { v, _ := m.Get(key); return v.Float() }

// Tensor describes a graph weight by its GGUF name: dims GGUF-ordered, the
// ir dtype the dtype decision chose.
func (m *Model) Tensor(name string) (*gguf.TensorInfo, bool) {
	d, ok := m.weights[name]
	if !ok {
		return nil, false
	}
	return &d.info, true
}

// TensorNames lists the graph weights by GGUF name.
func (m *Model) TensorNames() []string { return m.names }

// WeightBytes serves a graph weight's bytes: a slice of the mapped shard,
// or the widened copy of a 1-D tensor. It is ir/eval.Weights.
func (m *Model) WeightBytes(name string) ([]byte, error) {
	d, ok := m.weights[name]
	if !ok {
		return nil, fmt.Errorf("tensor %q is not in the model directory", name)
	}
	b, err := d.bytes()
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	if b == nil {
		return nil, fmt.Errorf("tensor %q: the model directory was closed", name)
	}
	return b, nil
}

// Vocab is the tokenizer's vocabulary; without tokenizer.json it has no
// tokens (the model runs from token ids).
func (m *Model) Vocab() (tokenizer.Vocab, error) { return m.vocab, nil }

// Layout: HF q/k rows are rotate-half, and the embedding may have more
// rows than the tokenizer has tokens.
func (m *Model) Layout() arch.Layout { return arch.Layout{RotateHalf: true, ShortVocab: true} }

// Weight describes one graph weight for inspect.
type Weight struct {
	GGUF   string   // the graph's name
	HF     string   // the HF tensor ("" for one made from config.json)
	File   string   // the shard holding it
	Stored string   // the dtype on disk
	Shape  []uint64 // HF shape, outermost first
	Type   string   // the dtype the graph reads
	Bytes  uint64
}

// Weights lists the graph weights, sorted by HF name.
func (m *Model) Weights() []Weight {
	out := make([]Weight, 0, len(m.weights))
	for _, d := range m.weights {
		w := Weight{GGUF: d.info.Name, HF: d.hf, Stored: d.stored, Type: strings.ToUpper(d.info.Type.String()), Bytes: d.info.Size}
		if d.t != nil {
			w.File, w.Shape = filepath.Base(d.file.Path), d.shape
		} else {
			w.Shape = d.info.Dims
		}
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].HF+"\x00"+out[i].GGUF < out[j].HF+"\x00"+out[j].GGUF })
	return out
}

// Quantization describes config.json's quantization for inspect ("" when
// the model is not quantized).
func (m *Model) Quantization() string {
	q := m.quant
	if q == nil {
		return ""
	}
	var parts []string
	if q.method != "" {
		parts = append(parts, q.method+" experts (_blocks and _scales)")
		if len(q.notConverts) > 0 {
			parts = append(parts, "float: "+strings.Join(q.notConverts, ", "))
		}
	}
	if q.global != nil {
		parts = append(parts, q.global.String())
	}
	for _, k := range slices.Sorted(maps.Keys(q.modules)) {
		if p := q.modules[k]; p == nil {
			parts = append(parts, k+": float")
		} else {
			parts = append(parts, k+": "+p.String())
		}
	}
	return strings.Join(parts, "; ") + " (config.json " + q.key + ")"
}

// ConfigKeys lists config.json's keys and values (JSON text, cut to 80
// bytes), sorted, for inspect.
func (m *Model) ConfigKeys() [][2]string {
	var out [][2]string
	for _, k := range slices.Sorted(maps.Keys(m.cfg.raw)) {
		v := strings.Join(strings.Fields(string(m.cfg.raw[k])), " ")
		if len(v) > 80 {
			v = v[:80] + "…"
		}
		out = append(out, [2]string{k, v})
	}
	return out
}
