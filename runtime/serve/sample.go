package serve

import (
	"container/heap"
	"fmt"
	"math"
	"slices"

	"github.com/minerva-llm/minerva/runtime"
)

// Sampling are one request's sampling settings. The zero value of each
// filter means off; Temperature 0 is greedy decoding (the highest logit,
// the lowest id on a tie, as runtime.Argmax).
type Sampling struct {
	Temperature float64
	TopK        int
	TopP        float64 // 0 or 1: off
	MinP        float64
	Seed        uint64
	// Penalties over the last PenaltyLastN tokens of the sequence, prompt
	// included (0: 64), as llama.cpp applies them: repetition divides a
	// positive logit (multiplies a negative one), then frequency subtracts
	// count·penalty and presence subtracts penalty once for a token seen.
	RepetitionPenalty float64 // 0 or 1: off
	FrequencyPenalty  float64
	PresencePenalty   float64
	PenaltyLastN      int
	// LogitBias is added to the logits of the ids it names before anything
	// else (OpenAI's logit_bias).
	LogitBias map[int32]float64
}

// DefaultSampling is what a request that names no setting gets:
// llama-server's defaults, so clients written against it sample alike.
func DefaultSampling() Sampling {
	return Sampling{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepetitionPenalty: 1}
}

// check rejects settings that mean nothing, naming the request field.
func (s Sampling) check() error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	switch {
	case bad(s.Temperature) || s.Temperature < 0:
		return fieldError{"temperature", fmt.Sprintf("temperature %v must be ≥ 0", s.Temperature)}
	case s.TopK < 0:
		return fieldError{"top_k", fmt.Sprintf("top_k %d must be ≥ 0", s.TopK)}
	case bad(s.TopP) || s.TopP < 0 || s.TopP > 1:
		return fieldError{"top_p", fmt.Sprintf("top_p %v must be in [0, 1]", s.TopP)}
	case bad(s.MinP) || s.MinP < 0 || s.MinP >= 1:
		return fieldError{"min_p", fmt.Sprintf("min_p %v must be in [0, 1)", s.MinP)}
	case bad(s.RepetitionPenalty) || s.RepetitionPenalty < 0:
		return fieldError{"repetition_penalty", fmt.Sprintf("repetition_penalty %v must be > 0", s.RepetitionPenalty)}
	case bad(s.FrequencyPenalty) || math.Abs(s.FrequencyPenalty) > 2:
		return fieldError{"frequency_penalty", fmt.Sprintf("frequency_penalty %v must be in [-2, 2]", s.FrequencyPenalty)}
	case bad(s.PresencePenalty) || math.Abs(s.PresencePenalty) > 2:
		return fieldError{"presence_penalty", fmt.Sprintf("presence_penalty %v must be in [-2, 2]", s.PresencePenalty)}
	case s.PenaltyLastN < 0:
		return fieldError{"repeat_last_n", fmt.Sprintf("repeat_last_n %d must be ≥ 0", s.PenaltyLastN)}
	}
	for id, b := range s.LogitBias {
		if bad(b) || math.Abs(b) > 100 {
			return fieldError{"logit_bias", fmt.Sprintf("logit_bias of token %d is %v: biases lie in [-100, 100]", id, b)}
		}
	}
	return nil
}

// sampler draws one sequence's tokens: the bias and penalties here, then
// runtime.Sampler for top-k, top-p, min-p, temperature and the seeded draw.
type sampler struct {
	s      Sampling
	rt     *runtime.Sampler // nil: greedy after bias and penalties
	counts map[int32]int
	sub    []float32 // top-k candidates' logits, reused
	ids    []int32
}

func newSampler(s Sampling) (*sampler, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	sm := &sampler{s: s}
	if s.Temperature > 0 {
		topP := s.TopP
		if topP == 0 {
			topP = 1
		}
		rt, err := runtime.NewSampler(runtime.SamplerConfig{Temperature: s.Temperature, TopK: s.TopK, TopP: topP,
			MinP: s.MinP, RepeatPenalty: 1, Seed: s.Seed})
		if err != nil {
			return nil, err
		}
		sm.rt = rt
	}
	return sm, nil
}

// penalized reports whether the penalties or biases change any logit.
func (sm *sampler) penalized() bool {
	s := sm.s
	return len(s.LogitBias) > 0 || (s.RepetitionPenalty != 0 && s.RepetitionPenalty != 1) ||
		s.FrequencyPenalty != 0 || s.PresencePenalty != 0
}

// next picks the token after history (prompt and generated tokens) from
// logits, which it may modify (the step's rows belong to the scheduler).
func (sm *sampler) next(logits []float32, history []int32) int32 {
	if sm.penalized() {
		sm.adjust(logits, history)
	}
	if sm.rt == nil {
		return runtime.Argmax(logits)
	}
	k := sm.s.TopK
	if k <= 0 || k >= len(logits) {
		return sm.rt.Sample(logits, nil)
	}
	// runtime.Sampler sorts every candidate; with top-k only the k best can
	// be drawn, so it is handed just those, in id order: its stable sort
	// then ranks them exactly as it ranks the whole vocabulary, and the
	// draw is the same.
	sm.ids = topK(logits, k, sm.ids[:0])
	sm.sub = sm.sub[:0]
	for _, id := range sm.ids {
		sm.sub = append(sm.sub, logits[id])
	}
	return sm.ids[sm.rt.Sample(sm.sub, nil)]
}

func (sm *sampler) adjust(logits []float32, history []int32) {
	s := sm.s
	for id, b := range s.LogitBias {
		if id >= 0 && int(id) < len(logits) {
			logits[id] += float32(b)
		}
	}
	rep := s.RepetitionPenalty
	if rep == 0 {
		rep = 1
	}
	if rep == 1 && s.FrequencyPenalty == 0 && s.PresencePenalty == 0 {
		return
	}
	n := s.PenaltyLastN
	if n == 0 {
		n = 64
	}
	if sm.counts == nil {
		sm.counts = map[int32]int{}
	}
	clear(sm.counts)
	for _, id := range history[max(0, len(history)-n):] {
		sm.counts[id]++
	}
	for id, c := range sm.counts {
		if id < 0 || int(id) >= len(logits) {
			continue
		}
		l := logits[id]
		if l <= 0 {
			l *= float32(rep)
		} else {
			l /= float32(rep)
		}
		l -= float32(c)*float32(s.FrequencyPenalty) + float32(s.PresencePenalty)
		logits[id] = l
	}
}

// topK returns the ids of the k largest logits (the lower id first among
// equal logits, as runtime.Argmax ranks them), in ascending id order.
func topK(logits []float32, k int, out []int32) []int32 {
	h := minHeap{logits: logits}
	for i := range logits {
		id := int32(i)
		if len(h.ids) < k {
			heap.Push(&h, id)
		} else if h.better(id, h.ids[0]) {
			h.ids[0] = id
			heap.Fix(&h, 0)
		}
	}
	out = append(out, h.ids...)
	slices.Sort(out)
	return out
}

// minHeap keeps the worst of the best k candidates at the top.
type minHeap struct {
	logits []float32
	ids    []int32
}

// better ranks a above b: a higher logit, or the same and a lower id. A
// NaN ranks below everything.
func (h *minHeap) better(a, b int32) bool {
	la, lb := h.logits[a], h.logits[b]
	switch {
	case la != la:
		return false
	case lb != lb:
		return true
	case la != lb:
		return la > lb
	}
	return a < b
}

func (h *minHeap) Len() int           { return len(h.ids) }
func (h *minHeap) Less(i, j int) bool { return h.better(h.ids[j], h.ids[i]) }
func (h *minHeap) Swap(i, j int)      { h.ids[i], h.ids[j] = h.ids[j], h.ids[i] }
func (h *minHeap) Push(x any)         { h.ids = append(h.ids, x.(int32)) }
func (h *minHeap) Pop() any {
	x := h.ids[len(h.ids)-1]
	h.ids = h.ids[:len(h.ids)-1]
	return x
}
