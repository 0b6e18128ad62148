package synth

import (
	"fmt"
	"sort"
	"strings"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/rope"
)

// preset is a real shape (the published config) or a small one of the same
// family for tests, with the size of its vocabulary.
type preset struct {
	Llama
	vocab int
}

// presets are real llama-like shapes, so synthetic files exercise the same
// tensor sizes as the models users run, and "-tiny" shapes of each new
// family that tests can load and run in milliseconds. Rope base, RMS
// epsilon, context and vocabulary size are the published ones too: the
// vocabulary sets the size of token_embd and output, a tenth of a 7B
// model's bytes.
var presets = map[string]preset{
	// Karpathy's TinyStories 15M (llama2.c), 32000-token Llama-2 vocabulary.
	"stories15m": {Llama{NLayer: 6, NEmbd: 288, NHead: 6, NHeadKV: 6, NFF: 768, ContextLength: 256,
		RopeBase: 10000, RMSEps: 1e-5}, 32000},
	// TinyLlama-1.1B: GQA with 4 kv heads.
	"tinyllama-1.1b": {Llama{NLayer: 22, NEmbd: 2048, NHead: 32, NHeadKV: 4, NFF: 5632, ContextLength: 2048,
		RopeBase: 10000, RMSEps: 1e-5}, 32000},
	// Llama-3.1-8B: GQA 32/8, 128K context through rope_freqs (factor 8
	// over an 8192-token original context). Its 128256-row vocabulary is
	// the SentencePiece one padded (the shapes are what benchmarks need).
	"llama-3.1-8b": {Llama{NLayer: 32, NEmbd: 4096, NHead: 32, NHeadKV: 8, NFF: 14336, ContextLength: 131072,
		RopeBase: 500000, RMSEps: 1e-5}, 128256},
	// Llama-2-7B.
	"llama-7b": {Llama{NLayer: 32, NEmbd: 4096, NHead: 32, NHeadKV: 32, NFF: 11008, ContextLength: 4096,
		RopeBase: 10000, RMSEps: 1e-5}, 32000},

	// Qwen2.5-7B: q/k/v biases, GQA 28/4, untied output.
	"qwen2.5-7b": {Llama{Arch: "qwen2", NLayer: 28, NEmbd: 3584, NHead: 28, NHeadKV: 4, NFF: 18944,
		ContextLength: 32768, RopeBase: 1e6, RMSEps: 1e-6}, 152064},
	// Qwen3-8B: per-head q/k norms, head_dim 128 from key_length.
	"qwen3-8b": {Llama{Arch: "qwen3", NLayer: 36, NEmbd: 4096, NHead: 32, NHeadKV: 8, HeadDim: 128, NFF: 12288,
		ContextLength: 40960, RopeBase: 1e6, RMSEps: 1e-6}, 151936},
	// Phi-3-mini-4k: fused attn_qkv and gate/up, 32 kv heads (no GQA),
	// head_dim 96, the 2047-token sliding window on every layer.
	"phi3-mini": {Llama{Arch: "phi3", NLayer: 32, NEmbd: 3072, NHead: 32, NHeadKV: 32, NFF: 8192,
		ContextLength: 4096, RopeBase: 1e4, RMSEps: 1e-5, SlidingWindow: 2047}, 32064},

	// Test shapes: two layers, dimensions that K-quant blocks (256) divide,
	// and each family's peculiarity kept — GQA everywhere, qwen3's
	// n_head·head_dim ≠ n_embd, phi3's head_dim 96 and a window (8) that a
	// dozen-token prompt crosses. Std is about 1/√n_embd, so activations
	// stay O(1) and the logits are far from uniform.
	"qwen2-tiny": {Llama{Arch: "qwen2", NLayer: 2, NEmbd: 256, NHead: 4, NHeadKV: 2, NFF: 512,
		ContextLength: 512, RopeBase: 1e6, RMSEps: 1e-6, Std: 0.06}, 512},
	"qwen3-tiny": {Llama{Arch: "qwen3", NLayer: 2, NEmbd: 256, NHead: 8, NHeadKV: 2, HeadDim: 64, NFF: 512,
		ContextLength: 512, RopeBase: 1e6, RMSEps: 1e-6, Std: 0.06}, 512},
	"llama-3.1-tiny": {Llama{NLayer: 2, NEmbd: 256, NHead: 4, NHeadKV: 2, NFF: 512,
		ContextLength: 131072, RopeBase: 500000, RMSEps: 1e-5, Std: 0.06}, 512},
	"phi3-tiny": {Llama{Arch: "phi3", NLayer: 2, NEmbd: 768, NHead: 8, NHeadKV: 4, NFF: 512,
		ContextLength: 512, RopeBase: 1e4, RMSEps: 1e-5, SlidingWindow: 8, Std: 0.04}, 512},
}

// Presets lists the preset names of every family.
func Presets() []string { return PresetsOf("") }

// PresetsOf lists the preset names of one architecture ("": all).
func PresetsOf(arch string) []string {
	names := make([]string, 0, len(presets))
	for n, p := range presets {
		if arch == "" || p.arch() == arch {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Preset returns the named shape with matrices of the given dtype and the
// vocabulary of its family, unless the caller replaces Tokens/Scores/Types
// (and Merges/Pre/EOT) with a real one:
//   - llama and phi3: SentencePiece, Vocab() padded with unused pieces to
//     the preset's size; phi3's ends with Phi-3's chat tokens at their real
//     ids (32000–32010), which llama.cpp's loader looks up by name;
//   - qwen2 and qwen3: byte-level BPE, BPEVocab() of the preset's size with
//     Qwen's pre-tokenizer.
func Preset(name string, matrix ir.DType, seed uint64) (Llama, error) {
	p, ok := presets[name]
	if !ok {
		return Llama{}, fmt.Errorf("unknown preset %q (presets: %s)", name, strings.Join(Presets(), ", "))
	}
	m := p.Llama
	m.Arch = m.arch()
	if name == "llama-3.1-8b" || name == "llama-3.1-tiny" {
		m.RopeFreqs = rope.Llama3Factors(m.RopeBase, m.headDim(), 8, 1, 4, 8192)
	}
	m.Name = "minerva-synthetic-" + name
	m.Matrix, m.Seed = matrix, seed
	if pre := families[m.arch()].pre; pre != "" {
		m.Tokens, m.Types, m.Merges, m.EOT = BPEVocab(p.vocab)
		m.Pre = pre
		return m, nil
	}
	m.Tokens, m.Scores, m.Types = Vocab()
	var tail []string
	if m.arch() == "phi3" && p.vocab >= len(m.Tokens)+len(phi3Tokens) {
		tail = phi3Tokens
	}
	for i := len(m.Tokens); i < p.vocab; i++ {
		j := i - (p.vocab - len(tail))
		switch {
		case j >= 0 && j < len(tail):
			m.Tokens = append(m.Tokens, tail[j])
			m.Types = append(m.Types, 3) // control
		default:
			m.Tokens = append(m.Tokens, fmt.Sprintf("▁extra%d", i))
			m.Types = append(m.Types, 1)
		}
		m.Scores = append(m.Scores, -1e4)
	}
	return m, nil
}

// phi3Tokens are Phi-3-mini's added tokens, ids 32000–32063: eleven chat
// tokens, then the padding rows of its 32064-row embedding, named as the
// GGUF converter names them.
var phi3Tokens = func() []string {
	t := []string{"<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>", "<|placeholder3|>",
		"<|placeholder4|>", "<|system|>", "<|end|>", "<|placeholder5|>", "<|placeholder6|>", "<|user|>"}
	for id := 32000 + len(t); id < 32064; id++ {
		t = append(t, fmt.Sprintf("[PAD%d]", id))
	}
	return t
}()
