package synth

import (
	"fmt"
	"sort"
	"strings"

	"github.com/minerva-llm/minerva/ir"
)

// presets are real llama-family shapes (the published configs), so synthetic
// files exercise the same tensor sizes as the models users run.
var presets = map[string]Llama{
	// Karpathy's TinyStories 15M (llama2.c), 32000-token Llama-2 vocabulary.
	"stories15m": {NLayer: 6, NEmbd: 288, NHead: 6, NHeadKV: 6, NFF: 768, ContextLength: 256},
	// TinyLlama-1.1B: GQA with 4 kv heads.
	"tinyllama-1.1b": {NLayer: 22, NEmbd: 2048, NHead: 32, NHeadKV: 4, NFF: 5632, ContextLength: 2048},
	// Llama-2-7B.
	"llama-7b": {NLayer: 32, NEmbd: 4096, NHead: 32, NHeadKV: 32, NFF: 11008, ContextLength: 4096},
}

// presetVocab is the vocabulary size of every preset (Llama-2's tokenizer).
const presetVocab = 32000

// Presets lists the preset names.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Preset returns the named shape with matrices of the given dtype. Its
// vocabulary is Vocab() padded to 32000 tokens with unused pieces, unless
// the caller replaces Tokens/Scores/Types (e.g. with a real vocabulary).
func Preset(name string, matrix ir.DType, seed uint64) (Llama, error) {
	p, ok := presets[name]
	if !ok {
		return Llama{}, fmt.Errorf("unknown preset %q (presets: %s)", name, strings.Join(Presets(), ", "))
	}
	p.Name = "minerva-synthetic-" + name
	p.RopeBase, p.RMSEps = 10000, 1e-5
	p.Matrix, p.Seed = matrix, seed
	p.Tokens, p.Scores, p.Types = Vocab()
	for i := len(p.Tokens); i < presetVocab; i++ {
		p.Tokens = append(p.Tokens, fmt.Sprintf("▁extra%d", i))
		p.Scores = append(p.Scores, -1e4)
		p.Types = append(p.Types, 1)
	}
	return p, nil
}
