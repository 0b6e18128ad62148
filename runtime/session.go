// Package runtime runs a compiled model: it holds the KV cache state between
// steps, samples tokens and drives generation. The reference backend is the
// interpreter in ir/eval; later backends plug in behind the same Session.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
)

// ErrContextFull is returned when a step would write past the KV cache.
var ErrContextFull = errors.New("context is full")

// Session is one sequence being generated: a machine with its KV cache and
// the number of positions already filled.
type Session struct {
	m      *eval.Machine
	nVocab int
	pos    int
}

// NewSession prepares the reference backend for graph g with a KV cache of
// ctx positions. The graph must output "logits" of shape [T, n_vocab].
func NewSession(g *ir.Graph, w eval.Weights, ctx int) (*Session, error) {
	out := g.Output("logits")
	if out == nil || len(out.Type.Shape) != 2 || !out.Type.Shape[1].IsConst() {
		return nil, fmt.Errorf("graph has no logits output of shape [T, n_vocab]")
	}
	m, err := eval.New(g, w, int64(ctx))
	if err != nil {
		return nil, err
	}
	return &Session{m: m, nVocab: int(out.Type.Shape[1].N)}, nil
}

// Pos is the number of positions already in the KV cache.
func (s *Session) Pos() int { return s.pos }

// Context is the KV cache capacity in positions.
func (s *Session) Context() int { return int(s.m.Context()) }

// VocabSize is the length of one logits row.
func (s *Session) VocabSize() int { return s.nVocab }

// Reset forgets the sequence.
func (s *Session) Reset() { s.m.Reset(); s.pos = 0 }

// Eval appends tokens to the sequence in one step and returns the logits of
// every one of them, row by row.
func (s *Session) Eval(tokens []int32) ([][]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("no tokens to evaluate")
	}
	if s.pos+len(tokens) > s.Context() {
		return nil, fmt.Errorf("%w: %d positions used + %d new > context %d", ErrContextFull, s.pos, len(tokens), s.Context())
	}
	pos := make([]int32, len(tokens))
	for i := range pos {
		pos[i] = int32(s.pos + i)
	}
	shape := []int64{int64(len(tokens))}
	res, err := s.m.Run(map[string]eval.Tensor{
		"tokens": {Shape: shape, I32: tokens},
		"pos":    {Shape: shape, I32: pos},
	})
	if err != nil {
		return nil, err
	}
	s.pos += len(tokens)
	logits := res["logits"].F32
	rows := make([][]float32, len(tokens))
	for i := range rows {
		rows[i] = logits[i*s.nVocab : (i+1)*s.nVocab : (i+1)*s.nVocab]
	}
	return rows, nil
}

// GenerateOptions control one generation.
type GenerateOptions struct {
	MaxTokens int
	Sampler   SamplerConfig
	EOS       int32 // -1 for none
	IgnoreEOS bool
	// OnToken is called with every generated token as soon as it is chosen;
	// returning an error stops generation with that error.
	OnToken func(id int32) error
	// KeepLogits records the logits of every prompt position and every
	// generated step in the result (for --dump-logits and tests).
	KeepLogits bool
}

// Timings reports where the time went.
type Timings struct {
	PromptTokens int           `json:"prompt_tokens"`
	PromptTime   time.Duration `json:"prompt_ns"`
	GenTokens    int           `json:"gen_tokens"`
	GenTime      time.Duration `json:"gen_ns"`
}

// StopReason says why generation ended.
type StopReason string

const (
	StopLength  StopReason = "length"  // MaxTokens reached
	StopEOS     StopReason = "eos"     // the model produced EOS
	StopContext StopReason = "context" // the KV cache is full
)

// Result is what Generate produced.
type Result struct {
	Tokens       []int32
	PromptLogits [][]float32 // every prompt position (KeepLogits)
	GenLogits    [][]float32 // the logits each generated token was chosen from (KeepLogits)
	Stop         StopReason
	Timings      Timings
}

// Generate evaluates the prompt in one step, then samples up to MaxTokens
// tokens one step at a time. It stops early on EOS (unless IgnoreEOS), at the
// context limit (Stop = StopContext, no error), or when ctx is cancelled.
func Generate(ctx context.Context, s *Session, prompt []int32, opts GenerateOptions) (*Result, error) {
	sampler, err := NewSampler(opts.Sampler)
	if err != nil {
		return nil, err
	}
	if len(prompt) == 0 {
		return nil, fmt.Errorf("the prompt is empty")
	}
	if len(prompt) > s.Context()-s.Pos() {
		return nil, fmt.Errorf("%w: the prompt has %d tokens but only %d positions are left", ErrContextFull, len(prompt), s.Context()-s.Pos())
	}
	res := &Result{Stop: StopLength}
	history := append([]int32(nil), prompt...)
	start := time.Now()
	rows, err := s.Eval(prompt)
	if err != nil {
		return nil, err
	}
	res.Timings.PromptTokens, res.Timings.PromptTime = len(prompt), time.Since(start)
	if opts.KeepLogits {
		for _, r := range rows {
			res.PromptLogits = append(res.PromptLogits, append([]float32(nil), r...))
		}
	}
	logits := rows[len(rows)-1]
	start = time.Now()
	defer func() { res.Timings.GenTokens, res.Timings.GenTime = len(res.Tokens), time.Since(start) }()
	for len(res.Tokens) < opts.MaxTokens {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if opts.KeepLogits {
			res.GenLogits = append(res.GenLogits, append([]float32(nil), logits...))
		}
		id := sampler.Sample(logits, history)
		res.Tokens = append(res.Tokens, id)
		history = append(history, id)
		if opts.OnToken != nil {
			if err := opts.OnToken(id); err != nil {
				return res, err
			}
		}
		if id == opts.EOS && opts.EOS >= 0 && !opts.IgnoreEOS {
			res.Stop = StopEOS
			break
		}
		if len(res.Tokens) == opts.MaxTokens {
			break
		}
		if s.Pos() >= s.Context() {
			res.Stop = StopContext
			break
		}
		rows, err := s.Eval([]int32{id})
		if err != nil {
			return res, err
		}
		logits = rows[0]
	}
	return res, nil
}
