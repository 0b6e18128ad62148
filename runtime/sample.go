package runtime

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// SamplerConfig selects how the next token is drawn from the logits.
// Temperature 0 is greedy decoding: the highest logit, the lowest id on a tie.
type SamplerConfig struct {
	Temperature   float64
	TopK          int     // 0 = off
	TopP          float64 // 1 = off
	MinP          float64 // 0 = off
	RepeatPenalty float64 // 1 = off
	RepeatLastN   int     // how many recent tokens the penalty looks at (0 = 64)
	Seed          uint64
}

// Validate rejects settings that cannot mean anything.
func (c SamplerConfig) Validate() error {
	switch {
	case c.Temperature < 0 || math.IsNaN(c.Temperature) || math.IsInf(c.Temperature, 0):
		return fmt.Errorf("temperature %v must be ≥ 0", c.Temperature)
	case c.TopK < 0:
		return fmt.Errorf("top-k %d must be ≥ 0", c.TopK)
	case !(c.TopP > 0 && c.TopP <= 1):
		return fmt.Errorf("top-p %v must be in (0, 1]", c.TopP)
	case !(c.MinP >= 0 && c.MinP < 1):
		return fmt.Errorf("min-p %v must be in [0, 1)", c.MinP)
	case !(c.RepeatPenalty > 0) || math.IsInf(c.RepeatPenalty, 0):
		return fmt.Errorf("repeat penalty %v must be > 0", c.RepeatPenalty)
	case c.RepeatLastN < 0:
		return fmt.Errorf("repeat-last-n %d must be ≥ 0", c.RepeatLastN)
	}
	return nil
}

// DefaultSampler is greedy decoding with every filter off.
func DefaultSampler() SamplerConfig { return SamplerConfig{TopP: 1, RepeatPenalty: 1} }

// Sampler draws tokens; it owns a seeded generator so runs are repeatable.
type Sampler struct {
	cfg SamplerConfig
	rng *rand.Rand
}

// NewSampler validates cfg and seeds the generator.
func NewSampler(cfg SamplerConfig) (*Sampler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Sampler{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6d696e65727661))}, nil
}

// Argmax returns the index of the largest value, the lowest index on a tie;
// NaNs are skipped (0 when every value is NaN), as the CUDA argmax kernel
// does.
func Argmax(logits []float32) int32 {
	best := -1
	for i, v := range logits {
		if v == v && (best < 0 || v > logits[best]) { // NaN never wins
			best = i
		}
	}
	return int32(max(best, 0))
}

type candidate struct {
	id    int32
	logit float64
}

// Greedy reports whether Sample is Argmax of the logits alone.
func (s *Sampler) Greedy() bool { return s.cfg.Temperature == 0 && s.cfg.RepeatPenalty == 1 }

// Sample picks the next token. history holds the tokens so far (prompt and
// generated), which the repetition penalty reads. The order of the filters
// follows llama.cpp: penalty, top-k, top-p, min-p, temperature.
func (s *Sampler) Sample(logits []float32, history []int32) int32 {
	c := s.cfg
	if s.Greedy() {
		return Argmax(logits)
	}
	cands := make([]candidate, len(logits))
	for i, v := range logits {
		cands[i] = candidate{int32(i), float64(v)}
	}
	if c.RepeatPenalty != 1 {
		n := c.RepeatLastN
		if n == 0 {
			n = 64
		}
		seen := map[int32]bool{}
		for i := max(0, len(history)-n); i < len(history); i++ {
			seen[history[i]] = true
		}
		for id := range seen {
			if id < 0 || int(id) >= len(cands) {
				continue
			}
			if l := &cands[id].logit; *l > 0 {
				*l /= c.RepeatPenalty
			} else {
				*l *= c.RepeatPenalty
			}
		}
	}
	// Highest logit first; ties keep the lower id first so greedy stays stable.
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].logit > cands[j].logit })
	if c.Temperature == 0 {
		return cands[0].id
	}
	if c.TopK > 0 && c.TopK < len(cands) {
		cands = cands[:c.TopK]
	}
	probs := softmax(cands, 1)
	if c.TopP < 1 {
		var cum float64
		for i, p := range probs {
			cum += p
			if cum >= c.TopP {
				cands, probs = cands[:i+1], probs[:i+1]
				break
			}
		}
	}
	if c.MinP > 0 {
		limit := probs[0] * c.MinP
		keep := 1
		for keep < len(probs) && probs[keep] >= limit {
			keep++
		}
		cands = cands[:keep]
	}
	probs = softmax(cands, c.Temperature)
	r := s.rng.Float64()
	for i, p := range probs {
		r -= p
		if r < 0 {
			return cands[i].id
		}
	}
	return cands[len(cands)-1].id
}

// softmax of the candidates' logits divided by temp (candidates sorted, so
// the first holds the maximum).
func softmax(cands []candidate, temp float64) []float64 {
	p := make([]float64, len(cands))
	var sum float64
	for i, c := range cands {
		p[i] = math.Exp((c.logit - cands[0].logit) / temp)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}
