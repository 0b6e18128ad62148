package hf

import (
	"fmt"
	"math"

	"github.com/minerva-llm/minerva/plan"
)

// Generation is generation_config.json: the ids that end generation and
// the sampling defaults the model was published with.
type Generation struct {
	// BOS and PAD are -1 when not given. EOS lists every id that ends
	// generation (Llama 3 lists several), from generation_config.json or,
	// without one, config.json.
	BOS, PAD int32
	EOS      []int32
	// DoSample is false for greedy decoding, transformers' default; the
	// sampling values are those given, or transformers' defaults
	// (temperature 1, top_k 50, top_p 1, min_p 0, repetition_penalty 1).
	DoSample                                   bool
	Temperature, TopP, MinP, RepetitionPenalty float64
	TopK                                       int
	// MaxLength and MaxNewTokens, 0 when not given.
	MaxLength, MaxNewTokens int
}

// Sampling is the plan's sampling defaults as transformers' generate would
// sample with this configuration: greedy (temperature 0) unless do_sample.
func (g Generation) Sampling() plan.Sampling {
	s := plan.Sampling{TopP: 1, RepeatPenalty: g.RepetitionPenalty}
	if s.RepeatPenalty == 0 {
		s.RepeatPenalty = 1
	}
	if g.DoSample {
		s.Temperature, s.TopK, s.TopP, s.MinP = g.Temperature, g.TopK, g.TopP, g.MinP
	}
	return s
}

// parseGeneration reads generation_config.json at path; token ids are held
// to the config's vocab_size.
func parseGeneration(path string, data []byte, sp *spec) (Generation, error) {
	c, err := parseConfig(path, data)
	if err != nil {
		return Generation{}, err
	}
	g := Generation{BOS: -1, PAD: -1, Temperature: 1, TopK: 50, TopP: 1, RepetitionPenalty: 1}
	one := func(key string) int32 {
		ids, err := tokenIDs(path, c, key, sp)
		if err != nil && c.err == nil {
			c.err = err
		}
		if len(ids) == 0 {
			return -1
		}
		return ids[0]
	}
	g.BOS, g.PAD = one("bos_token_id"), one("pad_token_id")
	if g.EOS, err = tokenIDs(path, c, "eos_token_id", sp); err != nil {
		return Generation{}, err
	}
	g.DoSample = c.boolOr("do_sample", false)
	nonNeg := func(key string, def float64) float64 {
		if !c.has(key) {
			return def
		}
		n, ok := c.number(key)
		if !ok {
			return def
		}
		var v float64
		if _, err := fmt.Sscan(string(n), &v); err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			c.fail("%s = %s is not a non-negative number", key, n)
		}
		return v
	}
	g.Temperature = nonNeg("temperature", 1)
	g.TopP = nonNeg("top_p", 1)
	g.MinP = nonNeg("min_p", 0)
	g.RepetitionPenalty = c.floatOr("repetition_penalty", 1)
	g.TopK = int(nonNeg("top_k", 50))
	g.MaxLength = int(nonNeg("max_length", 0))
	g.MaxNewTokens = int(nonNeg("max_new_tokens", 0))
	switch {
	case c.err != nil:
		return Generation{}, c.err
	case g.TopP == 0 || g.TopP > 1:
		return Generation{}, fmt.Errorf("%s: top_p %v is not in (0, 1]", path, g.TopP)
	case g.MinP > 1:
		return Generation{}, fmt.Errorf("%s: min_p %v is not in [0, 1]", path, g.MinP)
	}
	return g, nil
}

// tokenIDs reads key (an id or a list of ids; null is none) as token ids
// below the config's vocab_size.
func tokenIDs(path string, c *config, key string, sp *spec) ([]int32, error) {
	ids := c.ints(key)
	if c.err != nil {
		return nil, c.err
	}
	vocab, _ := sp.meta[sp.fam.arch+".vocab_size"].Uint()
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if id < 0 || uint64(id) >= vocab {
			return nil, fmt.Errorf("%s: %s %d is outside the vocabulary (vocab_size %d)", path, key, id, vocab)
		}
		out = append(out, int32(id))
	}
	return out, nil
}

// EOS lists the ids that end generation: generation_config.json's (or
// config.json's) eos_token_id, and the tokenizer's EOS if it is not among
// them.
func (m *Model) EOS() []int32 {
	out := append([]int32(nil), m.Generation.EOS...)
	if e := m.vocab.EOS; e >= 0 {
		found := false
		for _, id := range out {
			found = found || id == e
		}
		if !found {
			out = append(out, e)
		}
	}
	return out
}

// ChatTemplate is tokenizer_config.json's chat template ("" when there is
// none).
func (m *Model) ChatTemplate() string { return m.TokenizerConfig.ChatTemplate }
