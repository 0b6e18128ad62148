// Package synth writes random-weight model files with the exact tensor names,
// shapes and metadata of real architectures, so that tests and benchmarks can
// run at real scale without downloads. Values are drawn like trained weights
// (matrices N(0, σ²), norm gains 1 + 0.1·N(0, 1)), never zeros, and a seed
// makes every file reproducible.
package synth

import (
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// Llama describes a llama-like decoder to synthesise: llama itself, or
// (Arch) one of the families that differ from it only in layout — qwen2,
// qwen3 and phi3, as the family files of frontend/arch read them.
type Llama struct {
	Name string
	// Arch is general.architecture and the metadata key prefix: "" or
	// "llama", "qwen2", "qwen3" or "phi3" (see families).
	Arch          string
	NLayer        int
	NEmbd         int
	NHead         int
	NHeadKV       int
	NFF           int
	ContextLength int
	RopeBase      float64
	RMSEps        float64
	// HeadDim is the size of a head; 0 means NEmbd/NHead. Only a family
	// that writes attention.key_length (qwen3) may make NHead·HeadDim
	// differ from NEmbd.
	HeadDim int
	// SlidingWindow is attention.sliding_window: required by the families
	// that read it (phi3), refused by the others.
	SlidingWindow int
	// Matrix is the dtype of every 2-D weight; norms and biases stay F32.
	Matrix ir.DType
	// Mix, if set, gives the dtype of each 2-D weight by tensor name
	// instead (KQuantMix).
	Mix func(tensor string) ir.DType
	// Std is the standard deviation of matrix entries (0 means 0.02).
	Std  float64
	Seed uint64
	// RopeFreqs, when set, is written as rope_freqs.weight: Llama 3.1's
	// divisor of each rotated pair's frequency (rope.Llama3Factors), one per
	// pair of a head.
	RopeFreqs []float32
	// Tied omits output.weight, so the logits reuse token_embd.weight (as in
	// models with tied embeddings). The other tensors are unchanged.
	Tied bool
	// Tokens, Scores and Types form the SentencePiece vocabulary written
	// into the file; Vocab() gives a small self-contained one. With Merges
	// the vocabulary is byte-level BPE instead (tokenizer.ggml.model gpt2,
	// pre-tokenizer Pre, no scores) whose end-of-text token EOT is both BOS
	// and EOS, as in Qwen's files; BPEVocab() gives one.
	Tokens []string
	Scores []float32
	Types  []int32
	Merges []string
	Pre    string
	EOT    int
}

// family is how one llama-like architecture lays out its GGUF file beyond
// llama's: data, not code, so that a family is one entry here. Each flag
// is what the family's file in frontend/arch requires (and the others
// refuse).
type family struct {
	qkvBias   bool   // attn_q/k/v.bias (qwen2)
	qkNorm    bool   // attn_q_norm, attn_k_norm [head_dim] before RoPE (qwen3)
	fusedQKV  bool   // one attn_qkv with rows [q; k; v] (phi3)
	fusedUp   bool   // ffn_up with rows [gate; up] and no ffn_gate (phi3)
	keyLength bool   // attention.key_length/value_length give head_dim (qwen3)
	window    bool   // attention.sliding_window on every layer (phi3)
	pre       string // the BPE pre-tokenizer of the family's real vocabulary; "" is SentencePiece
}

var families = map[string]family{
	"llama": {},
	"qwen2": {qkvBias: true, pre: "qwen2"},
	"qwen3": {qkNorm: true, keyLength: true, pre: "qwen2"},
	"phi3":  {fusedQKV: true, fusedUp: true, window: true},
}

// Families lists the architectures Llama can write.
func Families() []string {
	names := make([]string, 0, len(families))
	for n := range families {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// arch is m.Arch with "" meaning llama.
func (m Llama) arch() string {
	if m.Arch == "" {
		return "llama"
	}
	return m.Arch
}

// headDim is m.HeadDim with 0 meaning NEmbd/NHead.
func (m Llama) headDim() int {
	if m.HeadDim == 0 && m.NHead > 0 {
		return m.NEmbd / m.NHead
	}
	return m.HeadDim
}

// matrixType is the dtype of the 2-D weight named tensor with rows of cols
// values: Mix's, else Matrix; an MLX affine dtype whose group does not
// divide the rows leaves the matrix BF16, as mlx-lm leaves such a module
// unquantized.
func (m Llama) matrixType(tensor string, cols int) ir.DType {
	if m.Mix != nil {
		return m.Mix(tensor)
	}
	return mlxOrBF16(m.Matrix, cols)
}

// check reports what in m the family's loader would refuse, before any
// weight is drawn.
func (m Llama) check() (family, error) {
	a := m.arch()
	fam, ok := families[a]
	switch {
	case !ok:
		return fam, fmt.Errorf("synth: unknown architecture %q (%s)", a, strings.Join(Families(), ", "))
	case m.NLayer <= 0 || m.NEmbd <= 0 || m.NFF <= 0:
		return fam, fmt.Errorf("synth: layers %d, embedding %d and feed-forward %d must be positive", m.NLayer, m.NEmbd, m.NFF)
	case m.NHead <= 0 || m.NHeadKV <= 0 || m.NHead%m.NHeadKV != 0:
		return fam, fmt.Errorf("synth: %d heads are not a multiple of %d kv heads", m.NHead, m.NHeadKV)
	case m.HeadDim == 0 && m.NEmbd%m.NHead != 0:
		return fam, fmt.Errorf("synth: heads %d/%d do not divide embedding %d", m.NHead, m.NHeadKV, m.NEmbd)
	case m.HeadDim < 0 || m.headDim()%2 != 0:
		return fam, fmt.Errorf("synth: head size %d must be positive and even (RoPE rotates pairs)", m.headDim())
	case m.headDim()*m.NHead != m.NEmbd && !fam.keyLength:
		return fam, fmt.Errorf("synth: %s needs heads × head size = embedding (%d × %d ≠ %d)", a, m.NHead, m.headDim(), m.NEmbd)
	case fam.window && m.SlidingWindow <= 0:
		return fam, fmt.Errorf("synth: %s needs a sliding window", a)
	case !fam.window && m.SlidingWindow != 0:
		return fam, fmt.Errorf("synth: %s has no sliding window (frontend/arch refuses the key)", a)
	case len(m.Merges) > 0 && (len(m.Types) != len(m.Tokens) || m.EOT < 0 || m.EOT >= len(m.Tokens)):
		return fam, fmt.Errorf("synth: a BPE vocabulary needs token types and an end-of-text id among its %d tokens", len(m.Tokens))
	case len(m.Merges) == 0 && (len(m.Scores) != len(m.Tokens) || len(m.Types) != len(m.Tokens)):
		return fam, fmt.Errorf("synth: vocabulary needs tokens, scores and types of one length")
	case len(m.Tokens) == 0:
		return fam, fmt.Errorf("synth: vocabulary has no tokens")
	case !quant.CanQuantize(m.Matrix):
		return fam, fmt.Errorf("synth: cannot write %s matrices", m.Matrix)
	}
	return fam, nil
}

// Write emits the model as a GGUF v3 file. A llama file has the bytes it
// had before the other families existed: their tensors and keys are only
// added, never drawn, for llama.
func (m Llama) Write(out io.Writer) (int64, error) {
	fam, err := m.check()
	if err != nil {
		return 0, err
	}
	a, headDim := m.arch(), m.headDim()
	u32 := func(n int) gguf.Value { return gguf.Uint32(uint32(n)) }
	w := gguf.NewWriter(3)
	kv := func(k string, v gguf.Value) { w.AddKV(a+"."+k, v) }
	w.AddKV("general.architecture", gguf.String(a))
	w.AddKV("general.name", gguf.String(m.Name))
	kv("context_length", u32(m.ContextLength))
	kv("embedding_length", u32(m.NEmbd))
	kv("block_count", u32(m.NLayer))
	kv("feed_forward_length", u32(m.NFF))
	kv("rope.dimension_count", u32(headDim))
	kv("attention.head_count", u32(m.NHead))
	kv("attention.head_count_kv", u32(m.NHeadKV))
	kv("attention.layer_norm_rms_epsilon", gguf.Float32(float32(m.RMSEps)))
	kv("rope.freq_base", gguf.Float32(float32(m.RopeBase)))
	if fam.keyLength {
		kv("attention.key_length", u32(headDim))
		kv("attention.value_length", u32(headDim))
	}
	if fam.window {
		kv("attention.sliding_window", u32(m.SlidingWindow))
	}
	if len(m.Merges) > 0 {
		w.AddKV("tokenizer.ggml.model", gguf.String("gpt2"))
		if m.Pre != "" {
			w.AddKV("tokenizer.ggml.pre", gguf.String(m.Pre))
		}
		w.AddKV("tokenizer.ggml.tokens", gguf.StringArray(m.Tokens))
		w.AddKV("tokenizer.ggml.token_type", gguf.Int32Array(m.Types))
		w.AddKV("tokenizer.ggml.merges", gguf.StringArray(m.Merges))
		w.AddKV("tokenizer.ggml.bos_token_id", u32(m.EOT))
		w.AddKV("tokenizer.ggml.eos_token_id", u32(m.EOT))
		w.AddKV("tokenizer.ggml.add_bos_token", gguf.Bool(false))
	} else {
		w.AddKV("tokenizer.ggml.model", gguf.String("llama"))
		w.AddKV("tokenizer.ggml.tokens", gguf.StringArray(m.Tokens))
		w.AddKV("tokenizer.ggml.scores", gguf.Float32Array(m.Scores))
		w.AddKV("tokenizer.ggml.token_type", gguf.Int32Array(m.Types))
		w.AddKV("tokenizer.ggml.bos_token_id", gguf.Uint32(1))
		w.AddKV("tokenizer.ggml.eos_token_id", gguf.Uint32(2))
		w.AddKV("tokenizer.ggml.unknown_token_id", gguf.Uint32(0))
		w.AddKV("tokenizer.ggml.add_bos_token", gguf.Bool(true))
	}
	if err := m.addTensors(w, fam); err != nil {
		return 0, err
	}
	return w.WriteTo(out)
}

// tensorSink receives a model's tensors in file order, under their GGUF
// names and dims: a gguf.Writer, or the directory writer (dir.go).
type tensorSink interface {
	AddTensor(name string, typ ir.DType, dims []uint64, data []byte) error
	AddTensorFunc(name string, typ ir.DType, dims []uint64, produce func(io.Writer) error) error
}

// addTensors draws m's tensors into w: the large ones as producers that
// draw while the file is written, the small ones now, from the one
// sequential generator, in an order tests pin.
func (m Llama) addTensors(w tensorSink, fam family) (err error) {
	std := m.Std
	if std == 0 {
		std = 0.02
	}
	rng := rand.New(rand.NewPCG(m.Seed, 0x73796e7468))
	a, headDim := m.arch(), m.headDim()

	// addParallel adds a large matrix that is drawn while the file is
	// written (drawPieces: whole-row pieces, each from its own generator
	// seeded by the model seed, the tensor name and the piece, on every
	// CPU), so a 7B model is written in minutes with a few pieces in memory,
	// and its bytes do not depend on the number of CPUs. rowScale, if set,
	// scales row r.
	addParallel := func(name string, rows, cols int, rowScale func(r int64) float64) {
		if err != nil {
			return
		}
		n, typ, seed := int64(rows)*int64(cols), m.matrixType(name, cols), m.Seed
		// A row the dtype cannot encode fails here, not halfway through
		// writing the file.
		if _, err = typ.RowBytes(int64(cols)); err == nil {
			err = w.AddTensorFunc(name, typ, []uint64{uint64(cols), uint64(rows)}, func(out io.Writer) error {
				return drawPieces(out, seed, name, typ, n, int64(cols), std, 0, rowScale)
			})
		}
		if err != nil {
			err = fmt.Errorf("synth: %s: %w", name, err)
		}
	}
	add := func(name string, typ ir.DType, vals []float32, dims ...uint64) {
		if err != nil {
			return
		}
		n, e := typ.RowBytes(int64(len(vals)))
		if e != nil {
			err = fmt.Errorf("synth: %s: %w", name, e)
			return
		}
		data := make([]byte, n)
		if e := quant.Quantize(typ, vals, data); e != nil {
			err = fmt.Errorf("synth: %s: %w", name, e)
			return
		}
		if e := w.AddTensor(name, typ, dims, data); e != nil {
			err = e
		}
	}
	// Llama draws its smaller matrices from the one sequential generator,
	// which keeps the bytes tests already pin; the other families draw
	// every matrix by name, so none waits in memory for WriteTo.
	byName := a != "llama"
	matrix := func(name string, rows, cols int) {
		if byName || int64(rows)*int64(cols) >= parallelValues {
			addParallel(name, rows, cols, nil)
			return
		}
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * std)
		}
		add(name, m.matrixType(name, cols), v, uint64(cols), uint64(rows))
	}
	// vector adds a 1-D F32 tensor of mean + sd·N(0, 1): norm gains near 1,
	// biases near 0.
	vector := func(name string, n int, mean, sd float64) {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(mean + sd*rng.NormFloat64())
		}
		add(name, ir.F32, v, uint64(n))
	}
	norm := func(name string, n int) { vector(name, n, 1, 0.1) }
	nv := len(m.Tokens)
	qDim, kvDim := m.NHead*headDim, m.NHeadKV*headDim
	matrix("token_embd.weight", nv, m.NEmbd)
	if len(m.RopeFreqs) > 0 {
		add("rope_freqs.weight", ir.F32, m.RopeFreqs, uint64(len(m.RopeFreqs)))
	}
	for l := 0; l < m.NLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		norm(p+"attn_norm.weight", m.NEmbd)
		if fam.fusedQKV {
			matrix(p+"attn_qkv.weight", qDim+2*kvDim, m.NEmbd)
		} else {
			for _, t := range []struct {
				name string
				rows int
			}{{"attn_q", qDim}, {"attn_k", kvDim}, {"attn_v", kvDim}} {
				matrix(p+t.name+".weight", t.rows, m.NEmbd)
				if fam.qkvBias {
					vector(p+t.name+".bias", t.rows, 0, stdBias)
				}
			}
		}
		if fam.qkNorm {
			norm(p+"attn_q_norm.weight", headDim)
			norm(p+"attn_k_norm.weight", headDim)
		}
		matrix(p+"attn_output.weight", m.NEmbd, qDim)
		norm(p+"ffn_norm.weight", m.NEmbd)
		if fam.fusedUp {
			matrix(p+"ffn_up.weight", 2*m.NFF, m.NEmbd)
		} else {
			matrix(p+"ffn_gate.weight", m.NFF, m.NEmbd)
			matrix(p+"ffn_up.weight", m.NFF, m.NEmbd)
		}
		matrix(p+"ffn_down.weight", m.NEmbd, m.NFF)
	}
	norm("output_norm.weight", m.NEmbd)
	// A trained model rarely emits byte-fallback or control tokens; shrinking
	// their output rows gives random weights the same habit, so the text a
	// synthetic model prints is made of word pieces rather than stray bytes.
	if !m.Tied {
		shrink := func(r int64) float64 {
			if m.Types[r] != 1 {
				return 0.25
			}
			return 1
		}
		if int64(nv)*int64(m.NEmbd) >= parallelValues {
			addParallel("output.weight", nv, m.NEmbd, shrink)
		} else {
			output := make([]float32, nv*m.NEmbd)
			for i := range output {
				output[i] = float32(rng.NormFloat64() * std * shrink(int64(i/m.NEmbd)))
			}
			add("output.weight", m.matrixType("output.weight", m.NEmbd), output, uint64(m.NEmbd), uint64(nv))
		}
	}
	return err
}

// mlxOrBF16 is typ, or BF16 when typ is MLX affine with a group size that
// does not divide cols.
func mlxOrBF16(typ ir.DType, cols int) ir.DType {
	if _, group, ok := typ.MLXAffineParams(); ok && cols%group != 0 {
		return ir.BF16
	}
	return typ
}

// Vocab returns a small SentencePiece vocabulary that can encode any text:
// <unk>, <s>, </s>, the 256 byte tokens, then "▁" and common English pieces
// with scores that favour longer pieces.
func Vocab() (tokens []string, scores []float32, types []int32) {
	const (
		normal  = 1
		unknown = 2
		control = 3
		byteTok = 6
	)
	tokens = []string{"<unk>", "<s>", "</s>"}
	scores = []float32{0, 0, 0}
	types = []int32{unknown, control, control}
	for b := 0; b < 256; b++ {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		scores = append(scores, 0)
		types = append(types, byteTok)
	}
	pieces := []string{"▁"}
	for c := 'a'; c <= 'z'; c++ {
		pieces = append(pieces, string(c), "▁"+string(c))
	}
	for c := 'A'; c <= 'Z'; c++ {
		pieces = append(pieces, string(c))
	}
	pieces = append(pieces, ".", ",", "!", "?", "'", "\"", "-")
	for _, w := range []string{"the", "and", "was", "to", "a", "he", "she", "it", "of", "in", "they", "said",
		"time", "once", "upon", "there", "day", "little", "big", "happy", "dog", "cat", "park", "ran", "saw",
		"with", "her", "his", "Once", "The", "Lily", "Tom", "friend", "play", "loved", "sun", "tree", "home"} {
		pieces = append(pieces, "▁"+w)
	}
	pieces = append(pieces, "th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ed", "ing", "ly")
	seen := map[string]bool{}
	for _, p := range pieces {
		if seen[p] {
			continue
		}
		seen[p] = true
		tokens = append(tokens, p)
		// Longer pieces score higher, so merges prefer them.
		scores = append(scores, float32(-1000+100*len([]rune(p)))-float32(len(tokens))*1e-3)
		types = append(types, normal)
	}
	return tokens, scores, types
}

// Default is the built-in model `minervac run` uses when no model is given:
// a 2-layer llama with GQA, F32 weights and the Vocab() vocabulary, seed 1.
func Default() Llama {
	tok, sc, ty := Vocab()
	return Llama{
		Name: "minerva-synthetic-llama", NLayer: 2, NEmbd: 64, NHead: 4, NHeadKV: 2, NFF: 192,
		ContextLength: 512, RopeBase: 10000, RMSEps: 1e-5, Matrix: ir.F32, Std: 0.08, Seed: 1,
		Tokens: tok, Scores: sc, Types: ty,
	}
}

// parallelValues is the matrix size from which Write draws a matrix in
// parallel pieces (drawPieces) rather than from the model's one
// sequential generator: small models keep the bytes they always had.
const parallelValues = 1 << 22
