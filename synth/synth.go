// Package synth writes random-weight model files with the exact tensor names,
// shapes and metadata of real architectures, so that tests and benchmarks can
// run at real scale without downloads. Values are drawn like trained weights
// (matrices N(0, σ²), norm gains 1 + 0.1·N(0, 1)), never zeros, and a seed
// makes every file reproducible.
package synth

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// Llama describes a llama-family model to synthesise.
type Llama struct {
	Name          string
	NLayer        int
	NEmbd         int
	NHead         int
	NHeadKV       int
	NFF           int
	ContextLength int
	RopeBase      float64
	RMSEps        float64
	// Matrix is the dtype of every 2-D weight; norms stay F32.
	Matrix ir.DType
	// Std is the standard deviation of matrix entries (0 means 0.02).
	Std  float64
	Seed uint64
	// Tied omits output.weight, so the logits reuse token_embd.weight (as in
	// models with tied embeddings). The other tensors are unchanged.
	Tied bool
	// Tokens, Scores and Types form the SentencePiece vocabulary written
	// into the file; Vocab() gives a small self-contained one.
	Tokens []string
	Scores []float32
	Types  []int32
}

// Write emits the model as a GGUF v3 file.
func (m Llama) Write(out io.Writer) (int64, error) {
	if m.NHead == 0 || m.NEmbd%m.NHead != 0 || m.NHeadKV == 0 || m.NHead%m.NHeadKV != 0 {
		return 0, fmt.Errorf("synth: heads %d/%d do not divide embedding %d", m.NHead, m.NHeadKV, m.NEmbd)
	}
	if len(m.Tokens) == 0 || len(m.Scores) != len(m.Tokens) || len(m.Types) != len(m.Tokens) {
		return 0, fmt.Errorf("synth: vocabulary needs tokens, scores and types of one length")
	}
	if !quant.CanQuantize(m.Matrix) {
		return 0, fmt.Errorf("synth: cannot write %s matrices", m.Matrix)
	}
	std := m.Std
	if std == 0 {
		std = 0.02
	}
	rng := rand.New(rand.NewPCG(m.Seed, 0x73796e7468))
	headDim := m.NEmbd / m.NHead
	w := gguf.NewWriter(3)
	w.AddKV("general.architecture", gguf.String("llama"))
	w.AddKV("general.name", gguf.String(m.Name))
	w.AddKV("llama.context_length", gguf.Uint32(uint32(m.ContextLength)))
	w.AddKV("llama.embedding_length", gguf.Uint32(uint32(m.NEmbd)))
	w.AddKV("llama.block_count", gguf.Uint32(uint32(m.NLayer)))
	w.AddKV("llama.feed_forward_length", gguf.Uint32(uint32(m.NFF)))
	w.AddKV("llama.rope.dimension_count", gguf.Uint32(uint32(headDim)))
	w.AddKV("llama.attention.head_count", gguf.Uint32(uint32(m.NHead)))
	w.AddKV("llama.attention.head_count_kv", gguf.Uint32(uint32(m.NHeadKV)))
	w.AddKV("llama.attention.layer_norm_rms_epsilon", gguf.Float32(float32(m.RMSEps)))
	w.AddKV("llama.rope.freq_base", gguf.Float32(float32(m.RopeBase)))
	w.AddKV("tokenizer.ggml.model", gguf.String("llama"))
	w.AddKV("tokenizer.ggml.tokens", gguf.StringArray(m.Tokens))
	w.AddKV("tokenizer.ggml.scores", gguf.Float32Array(m.Scores))
	w.AddKV("tokenizer.ggml.token_type", gguf.Int32Array(m.Types))
	w.AddKV("tokenizer.ggml.bos_token_id", gguf.Uint32(1))
	w.AddKV("tokenizer.ggml.eos_token_id", gguf.Uint32(2))
	w.AddKV("tokenizer.ggml.unknown_token_id", gguf.Uint32(0))
	w.AddKV("tokenizer.ggml.add_bos_token", gguf.Bool(true))

	var err error
	// addParallel draws a large matrix in pieces of whole rows, each from
	// its own generator (seeded by the model seed, the tensor name and the
	// piece), on every CPU: a 7B model is written in seconds, and its bytes
	// do not depend on the number of CPUs. rowScale, if set, scales row r.
	addParallel := func(name string, rows, cols int, rowScale func(r int64) float64) {
		if err != nil {
			return
		}
		var data bytes.Buffer
		e := drawPieces(&data, m.Seed, name, m.Matrix, int64(rows)*int64(cols), int64(cols), std, 0, rowScale)
		if e == nil {
			e = w.AddTensor(name, m.Matrix, []uint64{uint64(cols), uint64(rows)}, data.Bytes())
		}
		if e != nil {
			err = fmt.Errorf("synth: %s: %w", name, e)
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
	matrix := func(name string, rows, cols int) {
		if int64(rows)*int64(cols) >= parallelValues {
			addParallel(name, rows, cols, nil)
			return
		}
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * std)
		}
		add(name, m.Matrix, v, uint64(cols), uint64(rows))
	}
	norm := func(name string) {
		v := make([]float32, m.NEmbd)
		for i := range v {
			v[i] = float32(1 + 0.1*rng.NormFloat64())
		}
		add(name, ir.F32, v, uint64(m.NEmbd))
	}
	nv := len(m.Tokens)
	kvDim := m.NHeadKV * headDim
	matrix("token_embd.weight", nv, m.NEmbd)
	for l := 0; l < m.NLayer; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		norm(p + "attn_norm.weight")
		matrix(p+"attn_q.weight", m.NEmbd, m.NEmbd)
		matrix(p+"attn_k.weight", kvDim, m.NEmbd)
		matrix(p+"attn_v.weight", kvDim, m.NEmbd)
		matrix(p+"attn_output.weight", m.NEmbd, m.NEmbd)
		norm(p + "ffn_norm.weight")
		matrix(p+"ffn_gate.weight", m.NFF, m.NEmbd)
		matrix(p+"ffn_up.weight", m.NFF, m.NEmbd)
		matrix(p+"ffn_down.weight", m.NEmbd, m.NFF)
	}
	norm("output_norm.weight")
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
			add("output.weight", m.Matrix, output, uint64(m.NEmbd), uint64(nv))
		}
	}
	if err != nil {
		return 0, err
	}
	return w.WriteTo(out)
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
