// Package runtime runs a compiled model: it holds the KV cache state between
// steps, samples tokens and drives generation.
//
// The layers, from the bottom:
//
//   - Backend and Program (backend.go): a graph compiled on a device, with
//     its weights resident and a contiguous KV cache of sequence slots. The
//     reference backend (the interpreter of ir/eval) is registered as
//     "reference"; CUDA, Metal and CPU backends plug in the same way.
//   - Session: one sequence in one slot of a Program; Eval appends tokens.
//   - Generate: prompt, sampling, streaming callbacks, and the stop rules
//     (EOS, stop strings, MaxTokens, context limit, cancellation).
//   - Model and Engine (model.go): the library entry point, from a model
//     file to streamed text.
package runtime

import (
	"errors"
	"fmt"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
)

// ErrContextFull is returned when a step would write past the KV cache.
var ErrContextFull = errors.New("context is full")

// Session is one sequence being generated: a slot of a Program (its rows of
// the KV cache) and the number of positions already filled.
//
// A Session is not safe for concurrent use; sessions of one Engine may be
// used from different goroutines.
type Session struct {
	prog  Program
	slot  int
	pos   int
	model *Model       // set by Engine.NewSession: enables GenerateText
	done  func() error // Close: frees the slot, or the program it owns
}

// NewSession prepares the reference backend for graph g with a KV cache of
// ctx positions, in the cache type the graph declares. The graph must output
// "logits" of shape [T, n_vocab]. The session owns its one-slot program;
// Close frees it (or let the garbage collector do so).
func NewSession(g *ir.Graph, w eval.Weights, ctx int) (*Session, error) {
	b, _ := LookupBackend("reference")
	p, err := b.Compile(g, w, ProgramConfig{Context: ctx, Slots: 1})
	if err != nil {
		return nil, err
	}
	return &Session{prog: p, done: p.Close}, nil
}

// NewProgramSession runs a sequence in slot `slot` of p, which the caller
// keeps owning: it must not give the slot to anyone else while the session
// is in use, and Close on the session only resets the slot. The slot is
// reset first.
func NewProgramSession(p Program, slot int) (*Session, error) {
	if err := p.ResetSlot(slot); err != nil {
		return nil, err
	}
	return &Session{prog: p, slot: slot, done: func() error { return p.ResetSlot(slot) }}, nil
}

// Pos is the number of positions already in the KV cache.
func (s *Session) Pos() int { return s.pos }

// Context is the KV cache capacity in positions.
func (s *Session) Context() int { return s.prog.Config().Context }

// VocabSize is the length of one logits row.
func (s *Session) VocabSize() int { return s.prog.VocabSize() }

// Slot is the sequence slot of the program the session runs in.
func (s *Session) Slot() int { return s.slot }

// Program is the compiled program the session steps.
func (s *Session) Program() Program { return s.prog }

// Reset forgets the sequence.
func (s *Session) Reset() {
	// ResetSlot fails only for a closed program or a bad slot, and then so
	// will the next Eval, with the reason.
	_ = s.prog.ResetSlot(s.slot)
	s.pos = 0
}

// Truncate keeps the first n positions of the sequence and forgets the
// rest, so that the next Eval writes at position n: a chat turn whose
// prompt shares only a prefix with what the cache holds re-evaluates the
// tokens after that prefix, not the whole conversation. The rows past n are
// not cleared: every backend's step attends only to the rows at or before
// each token's position (Program.Step), and the next steps overwrite them.
func (s *Session) Truncate(n int) error {
	if n < 0 || n > s.pos {
		return fmt.Errorf("truncate to %d positions: the sequence holds %d", n, s.pos)
	}
	if n == 0 {
		s.Reset()
		return nil
	}
	s.pos = n
	return nil
}

// Close ends the session: it frees its slot (an Engine's session), or the
// program it owns (NewSession). Using the session afterwards is an error.
func (s *Session) Close() error {
	if s.done == nil {
		return nil
	}
	done := s.done
	s.done = nil
	s.prog = closedProgram{s.prog.Config(), s.prog.VocabSize()}
	return done()
}

// Eval appends tokens to the sequence in one step and returns the logits of
// every one of them, row by row.
func (s *Session) Eval(tokens []int32) ([][]float32, error) {
	pos, err := s.positions(tokens)
	if err != nil {
		return nil, err
	}
	rows, err := s.prog.Step(s.slot, tokens, pos)
	if err != nil {
		return nil, err
	}
	s.pos += len(tokens)
	return rows, nil
}

// EvalLast appends tokens like Eval and returns the logits of the last
// one alone. A BatchProgram computes only that row of the output matmul
// (a prompt chunk's other rows are never sampled from); another program
// steps as Eval does and the row is picked from its result.
func (s *Session) EvalLast(tokens []int32) ([]float32, error) {
	pos, err := s.positions(tokens)
	if err != nil {
		return nil, err
	}
	slots := make([]int32, len(tokens))
	for i := range slots {
		slots[i] = int32(s.slot)
	}
	rows, err := StepRows(s.prog, Rows{Slots: slots, Tokens: tokens, Pos: pos, Logits: []int{len(tokens) - 1}})
	if err != nil {
		return nil, err
	}
	if len(rows) != 1 {
		return nil, fmt.Errorf("a step asked for one logits row returned %d", len(rows))
	}
	s.pos += len(tokens)
	return rows[0], nil
}

// EvalGreedy appends tokens like Eval and returns only the greedy token
// after the last (Argmax of its logits): on the device when the program is
// a GreedyProgram, sparing the copy of the logits, else from Eval's row.
func (s *Session) EvalGreedy(tokens []int32) (int32, error) {
	gp, ok := s.prog.(GreedyProgram)
	if !ok {
		last, err := s.EvalLast(tokens)
		if err != nil {
			return 0, err
		}
		return Argmax(last), nil
	}
	pos, err := s.positions(tokens)
	if err != nil {
		return 0, err
	}
	id, err := gp.StepGreedy(s.slot, tokens, pos)
	if err != nil {
		return 0, err
	}
	s.pos += len(tokens)
	return id, nil
}

// positions checks that tokens fit and returns their cache positions.
func (s *Session) positions(tokens []int32) ([]int32, error) {
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
	return pos, nil
}

// closedProgram stands in for the program of a closed session.
type closedProgram struct {
	cfg    ProgramConfig
	nVocab int
}

func (c closedProgram) Config() ProgramConfig                           { return c.cfg }
func (c closedProgram) VocabSize() int                                  { return c.nVocab }
func (c closedProgram) CacheBytes() int64                               { return 0 }
func (c closedProgram) Step(int, []int32, []int32) ([][]float32, error) { return nil, ErrClosed }
func (c closedProgram) ResetSlot(int) error                             { return ErrClosed }
func (c closedProgram) Close() error                                    { return nil }
