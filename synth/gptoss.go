package synth

import (
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// GPTOSS describes a gpt-oss model to synthesise: the tensor names, shapes
// and metadata keys of the real GGUF files (ggml-org's gpt-oss-20b), as the
// frontend and the reference engine read them.
type GPTOSS struct {
	Name          string
	NLayer        int
	NEmbd         int
	NHead         int
	NHeadKV       int
	HeadDim       int
	NExpert       int
	NExpertUsed   int
	NFFExp        int
	SlidingWindow int
	ContextLength int
	RopeBase      float64
	YaRNFactor    float64
	YaRNOrigCtx   int
	RMSEps        float64
	// Experts is the dtype of the expert matrices (MXFP4 in the real files);
	// Matrix that of token_embd, output and the attention matrices (Q8_0 in
	// the real files). Norms, biases, sinks and the router stay F32.
	Experts ir.DType
	Matrix  ir.DType
	Seed    uint64
	// Tokens, Types and Merges form the byte-level BPE vocabulary; EOT is
	// the id of its end-of-text token (BOS and EOS). BPEVocab() builds one.
	Tokens []string
	Types  []int32
	Merges []string
	EOT    int
}

// Matrix gains, as the golden gpt-oss fixtures draw them: a matrix of fan-in
// K is N(0, (gain/√K)²). Expert gate/up at 3 make about 1–2 % of the
// pre-activations reach the ±7 clamp, so the clamp is exercised.
const (
	gainAttn    = 1.0
	gainRouter  = 1.5
	gainGateUp  = 3.0
	gainDown    = 0.5
	gainOutput  = 2.0
	stdBias     = 0.2
	stdEmbd     = 1.0
	stdSink     = 1.0
	chunkValues = 1 << 20 // values drawn and quantized per piece
)

// Write emits the model as a GGUF v3 file. Tensors are generated while they
// are written, a piece at a time on every CPU, so memory stays at a few
// pieces whatever the model's size; the bytes depend on Seed alone.
func (m GPTOSS) Write(out io.Writer) (int64, error) {
	if err := m.check(); err != nil {
		return 0, err
	}
	w := gguf.NewWriter(3)
	kv := func(k string, v gguf.Value) { w.AddKV("gpt-oss."+k, v) }
	u32 := func(n int) gguf.Value { return gguf.Uint32(uint32(n)) }
	w.AddKV("general.architecture", gguf.String("gpt-oss"))
	w.AddKV("general.name", gguf.String(m.Name))
	kv("block_count", u32(m.NLayer))
	kv("context_length", u32(m.ContextLength))
	kv("embedding_length", u32(m.NEmbd))
	kv("feed_forward_length", u32(m.NFFExp))
	kv("expert_feed_forward_length", u32(m.NFFExp))
	kv("expert_count", u32(m.NExpert))
	kv("expert_used_count", u32(m.NExpertUsed))
	kv("attention.head_count", u32(m.NHead))
	kv("attention.head_count_kv", u32(m.NHeadKV))
	kv("attention.key_length", u32(m.HeadDim))
	kv("attention.value_length", u32(m.HeadDim))
	kv("attention.layer_norm_rms_epsilon", gguf.Float32(float32(m.RMSEps)))
	kv("attention.sliding_window", u32(m.SlidingWindow))
	kv("rope.freq_base", gguf.Float32(float32(m.RopeBase)))
	if m.YaRNFactor != 0 {
		kv("rope.scaling.type", gguf.String("yarn"))
		kv("rope.scaling.factor", gguf.Float32(float32(m.YaRNFactor)))
		kv("rope.scaling.original_context_length", u32(m.YaRNOrigCtx))
	}
	w.AddKV("tokenizer.ggml.model", gguf.String("gpt2"))
	// The real files say gpt-4o; the tokenizer package has GPT-2's
	// pre-tokenizer, which splits this synthetic vocabulary's text the same
	// way for ASCII words.
	w.AddKV("tokenizer.ggml.pre", gguf.String("gpt-2"))
	w.AddKV("tokenizer.ggml.tokens", gguf.StringArray(m.Tokens))
	w.AddKV("tokenizer.ggml.token_type", gguf.Int32Array(m.Types))
	w.AddKV("tokenizer.ggml.merges", gguf.StringArray(m.Merges))
	w.AddKV("tokenizer.ggml.bos_token_id", u32(m.EOT))
	w.AddKV("tokenizer.ggml.eos_token_id", u32(m.EOT))
	w.AddKV("tokenizer.ggml.add_bos_token", gguf.Bool(false))
	if err := m.addTensors(w); err != nil {
		return 0, fmt.Errorf("synth: %w", err)
	}
	return w.WriteTo(out)
}

// addTensors adds m's tensors to w as producers that draw them while the
// file is written. The router is F32 as in the real GGUF files, or of
// Matrix's dtype when that is MLX affine, as in mlx-lm's directories.
func (m GPTOSS) addTensors(w tensorSink) error {
	var err error
	router := ir.F32
	if _, _, ok := m.Matrix.MLXAffineParams(); ok {
		router = m.Matrix
	}
	// tensor adds a tensor of row-major shape dims (GGUF ne reversed) whose
	// values are N(0, std²), or 1 + std·N(0, 1) for norms.
	tensor := func(name string, typ ir.DType, std, mean float64, shape ...int) {
		if err != nil {
			return
		}
		ne := make([]uint64, len(shape))
		n := int64(1)
		for i, d := range shape {
			ne[len(shape)-1-i] = uint64(d)
			n *= int64(d)
		}
		err = w.AddTensorFunc(name, typ, ne, m.producer(name, typ, n, int64(shape[len(shape)-1]), std, mean))
	}
	matrix := func(name string, typ ir.DType, gain float64, shape ...int) {
		tensor(name, typ, gain/math.Sqrt(float64(shape[len(shape)-1])), 0, shape...)
	}
	nv, q, kvd := len(m.Tokens), m.NHead*m.HeadDim, m.NHeadKV*m.HeadDim
	tensor("token_embd.weight", m.Matrix, stdEmbd, 0, nv, m.NEmbd)
	for l := 0; l < m.NLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		tensor(p+"attn_norm.weight", ir.F32, 0.1, 1, m.NEmbd)
		matrix(p+"attn_q.weight", m.Matrix, gainAttn, q, m.NEmbd)
		tensor(p+"attn_q.bias", ir.F32, stdBias, 0, q)
		matrix(p+"attn_k.weight", m.Matrix, gainAttn, kvd, m.NEmbd)
		tensor(p+"attn_k.bias", ir.F32, stdBias, 0, kvd)
		matrix(p+"attn_v.weight", m.Matrix, gainAttn, kvd, m.NEmbd)
		tensor(p+"attn_v.bias", ir.F32, stdBias, 0, kvd)
		matrix(p+"attn_output.weight", m.Matrix, gainAttn, m.NEmbd, q)
		tensor(p+"attn_output.bias", ir.F32, stdBias, 0, m.NEmbd)
		tensor(p+"attn_sinks.weight", ir.F32, stdSink, 0, m.NHead)
		tensor(p+"post_attention_norm.weight", ir.F32, 0.1, 1, m.NEmbd)
		matrix(p+"ffn_gate_inp.weight", router, gainRouter, m.NExpert, m.NEmbd)
		tensor(p+"ffn_gate_inp.bias", ir.F32, stdBias, 0, m.NExpert)
		matrix(p+"ffn_gate_exps.weight", m.Experts, gainGateUp, m.NExpert, m.NFFExp, m.NEmbd)
		tensor(p+"ffn_gate_exps.bias", ir.F32, stdBias, 0, m.NExpert, m.NFFExp)
		matrix(p+"ffn_up_exps.weight", m.Experts, gainGateUp, m.NExpert, m.NFFExp, m.NEmbd)
		tensor(p+"ffn_up_exps.bias", ir.F32, stdBias, 0, m.NExpert, m.NFFExp)
		matrix(p+"ffn_down_exps.weight", m.Experts, gainDown, m.NExpert, m.NEmbd, m.NFFExp)
		tensor(p+"ffn_down_exps.bias", ir.F32, stdBias, 0, m.NExpert, m.NEmbd)
	}
	tensor("output_norm.weight", ir.F32, 0.1, 1, m.NEmbd)
	matrix("output.weight", m.Matrix, gainOutput, nv, m.NEmbd)
	return err
}

// check reports what in m the gpt-oss loader would refuse, before any
// weight is drawn.
func (m GPTOSS) check() error {
	switch {
	case m.NLayer <= 0 || m.NEmbd <= 0 || m.NHead <= 0 || m.NHeadKV <= 0 || m.HeadDim <= 0:
		return fmt.Errorf("synth: gpt-oss needs positive layer, embedding, head and head-size counts")
	case m.NHead%m.NHeadKV != 0:
		return fmt.Errorf("synth: %d heads are not a multiple of %d kv heads", m.NHead, m.NHeadKV)
	case m.NExpert <= 0 || m.NExpertUsed <= 0 || m.NExpertUsed > m.NExpert || m.NFFExp <= 0:
		return fmt.Errorf("synth: gpt-oss needs 0 < expert_used_count %d ≤ expert_count %d and a positive n_ff_exp", m.NExpertUsed, m.NExpert)
	case len(m.Tokens) == 0 || len(m.Types) != len(m.Tokens) || len(m.Merges) == 0 || m.EOT < 0 || m.EOT >= len(m.Tokens):
		return fmt.Errorf("synth: gpt-oss needs a byte-level BPE vocabulary (tokens, types, merges and an end-of-text id)")
	case !quant.CanQuantize(m.Experts) || !quant.CanQuantize(m.Matrix):
		return fmt.Errorf("synth: cannot write %s experts with %s matrices", m.Experts, m.Matrix)
	}
	return nil
}

// producer writes n values mean + std·N(0, 1) of one tensor as typ (see
// drawPieces).
func (m GPTOSS) producer(name string, typ ir.DType, n, row int64, std, mean float64) func(io.Writer) error {
	return func(w io.Writer) error { return drawPieces(w, m.Seed, name, typ, n, row, std, mean, nil) }
}

// drawPieces writes n values mean + std·rowScale(r)·N(0, 1) (rowScale nil:
// 1) of one tensor with rows of row values as typ, in pieces of whole rows
// (about chunkValues values each). Each piece has its own generator, seeded
// from the model seed, the tensor name and the piece index, so the pieces
// are drawn in parallel on GOMAXPROCS goroutines and the bytes do not
// depend on the number of CPUs; a batch of pieces is written as soon as it
// is done, so a tensor larger than memory can stream.
func drawPieces(w io.Writer, seed uint64, name string, typ ir.DType, n, row int64, std, mean float64, rowScale func(r int64) float64) error {
	h := fnv.New64a()
	h.Write([]byte(name))
	stream := h.Sum64()
	piece := max(row, chunkValues/row*row)
	pieces := int((n + piece - 1) / piece)
	workers := runtime.GOMAXPROCS(0)
	outs := make([][]byte, workers)
	errs := make([]error, workers)
	for base := 0; base < pieces; base += workers {
		batch := min(workers, pieces-base)
		var wg sync.WaitGroup
		for i := 0; i < batch; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				lo := int64(base+i) * piece
				vals := make([]float32, min(n, lo+piece)-lo)
				rng := rand.New(rand.NewPCG(seed, stream+uint64(base+i)))
				for j := range vals {
					s := std
					if rowScale != nil {
						s *= rowScale((lo + int64(j)) / row)
					}
					vals[j] = float32(mean + s*rng.NormFloat64())
				}
				size, err := typ.RowBytes(int64(len(vals)))
				if err == nil {
					outs[i] = make([]byte, size)
					err = quant.Quantize(typ, vals, outs[i])
				}
				errs[i] = err
			}(i)
		}
		wg.Wait()
		for i := 0; i < batch; i++ {
			if errs[i] != nil {
				return errs[i]
			}
			if _, err := w.Write(outs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// BPEVocab returns a byte-level BPE vocabulary of n tokens (n ≥ 512) that
// can encode any text: the 256 byte symbols of GPT-2's byte-to-unicode map,
// common English words built by left-to-right merges, reserved tokens to
// fill it up, and "<|endoftext|>" (a control token) as the last id, eot.
func BPEVocab(n int) (tokens []string, types []int32, merges []string, eot int) {
	const (
		normal  = 1
		control = 3
	)
	have := map[string]bool{}
	add := func(tok string, ty int32) {
		have[tok] = true
		tokens = append(tokens, tok)
		types = append(types, ty)
	}
	next := rune(256)
	var byteRune [256]string
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) {
			r = next
			next++
		}
		byteRune[b] = string(r)
		add(string(r), normal)
	}
	space := byteRune[' ']
	words := []string{"the", "and", "was", "to", "a", "he", "she", "it", "of", "in", "they", "said", "time",
		"once", "upon", "there", "day", "little", "big", "happy", "dog", "cat", "park", "ran", "saw", "with",
		"her", "his", "friend", "play", "loved", "sun", "tree", "home", "followed", "all", "way"}
	for _, word := range words {
		for _, w := range []string{space + word, word} {
			runes := []rune(w)
			for i := 2; i <= len(runes) && len(tokens) < n-1; i++ {
				left, right, joined := string(runes[:i-1]), string(runes[i-1]), string(runes[:i])
				if have[joined] {
					continue
				}
				merges = append(merges, left+" "+right)
				add(joined, normal)
			}
		}
	}
	for i := len(tokens); i < n-1; i++ {
		add(fmt.Sprintf("<|reserved_%d|>", i), control)
	}
	add("<|endoftext|>", control)
	return tokens, types, merges, len(tokens) - 1
}

// gptossPresets are the published gpt-oss shapes, and a tiny one with the
// same structure (n_head·head_dim ≠ n_embd, a sliding window that prompts
// cross, the real RoPE/YaRN values) for tests.
var gptossPresets = map[string]GPTOSS{
	"gpt-oss-20b": {NLayer: 24, NEmbd: 2880, NHead: 64, NHeadKV: 8, HeadDim: 64, NExpert: 32, NExpertUsed: 4,
		NFFExp: 2880, SlidingWindow: 128, ContextLength: 131072},
	"gpt-oss-120b": {NLayer: 36, NEmbd: 2880, NHead: 64, NHeadKV: 8, HeadDim: 64, NExpert: 128, NExpertUsed: 4,
		NFFExp: 2880, SlidingWindow: 128, ContextLength: 131072},
	"gpt-oss-tiny": {NLayer: 2, NEmbd: 64, NHead: 4, NHeadKV: 2, HeadDim: 32, NExpert: 4, NExpertUsed: 2,
		NFFExp: 64, SlidingWindow: 4, ContextLength: 512},
}

// gptossVocab is the vocabulary size of a preset: o200k_harmony's for the
// real shapes, 512 for the tiny one.
var gptossVocab = map[string]int{"gpt-oss-20b": 201088, "gpt-oss-120b": 201088, "gpt-oss-tiny": 512}

// IsGPTOSSPreset reports whether name is a gpt-oss preset.
func IsGPTOSSPreset(name string) bool { _, ok := gptossPresets[name]; return ok }

// GPTOSSPresets lists the gpt-oss preset names.
func GPTOSSPresets() []string {
	names := make([]string, 0, len(gptossPresets))
	for n := range gptossPresets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// GPTOSSPreset returns the named gpt-oss shape with expert matrices of dtype
// experts. As in the real files the other large matrices (token_embd,
// output, attention) are Q8_0 when the experts are quantized, and of the
// experts' dtype when those are f32, f16 or bf16.
func GPTOSSPreset(name string, experts ir.DType, seed uint64) (GPTOSS, error) {
	p, ok := gptossPresets[name]
	if !ok {
		return GPTOSS{}, fmt.Errorf("unknown gpt-oss preset %q (presets: %s)", name, strings.Join(GPTOSSPresets(), ", "))
	}
	p.Name = "minerva-synthetic-" + name
	p.RopeBase, p.YaRNFactor, p.YaRNOrigCtx, p.RMSEps = 150000, 32, 4096, 1e-5
	p.Experts, p.Matrix, p.Seed = experts, ir.Q8_0, seed
	switch experts {
	case ir.F32, ir.F16, ir.BF16:
		p.Matrix = experts
	}
	p.Tokens, p.Types, p.Merges, p.EOT = BPEVocab(gptossVocab[name])
	return p, nil
}
