package runtime

import (
	"fmt"
)

// Rows is one batched step: row i evaluates token Tokens[i] at position
// Pos[i] of sequence slot Slots[i]. Rows of several slots share the step, so
// that a backend reads the weights once for all of them (continuous
// batching: the decode rows of every running sequence beside chunks of new
// prompts). Rows of one slot keep their order; a row attends to the rows of
// its own slot at positions ≤ its own, those written by earlier steps and
// by earlier rows of this one.
type Rows struct {
	Slots, Tokens, Pos []int32
	// Logits lists the rows whose logits the step returns, ascending; nil
	// returns every row. A prompt chunk needs only its last row, and copying
	// a vocabulary-wide row for each of 512 prompt tokens costs more than
	// the step's own output matmul reads.
	Logits []int
}

// Len is the number of rows.
func (r Rows) Len() int { return len(r.Tokens) }

// Add appends one row.
func (r *Rows) Add(slot int, token, pos int32) {
	r.Slots = append(r.Slots, int32(slot))
	r.Tokens = append(r.Tokens, token)
	r.Pos = append(r.Pos, pos)
}

// BatchProgram is a Program that steps rows of several slots at once
// (StepRows): the CPU backend, the reference interpreter and the CUDA and
// Metal programs.
//
// On the CPU backend and the interpreter, for every row, the result is bit
// for bit what Step gives for the same token, position and cache contents,
// whatever the other rows of the step: a request's tokens do not depend on
// who it shares the steps with. The GPU programs agree within float
// rounding (a step of one row runs other kernels than a longer one).
type BatchProgram interface {
	Program
	// StepRows runs the rows and returns the logits of the rows r.Logits
	// names (every row when nil), in that order, in memory the caller owns.
	StepRows(r Rows) ([][]float32, error)
}

// StepRows steps rows on any program: in one step on a BatchProgram, and on
// one that is not as one Step per slot, in the
// order the slots first appear. The results are the same; only the second
// reads the weights once per slot instead of once per step.
func StepRows(p Program, r Rows) ([][]float32, error) {
	if bp, ok := p.(BatchProgram); ok {
		return bp.StepRows(r)
	}
	return StepRowsBySlot(p.Config(), r, p.Step)
}

// StepRowsBySlot runs r as one step per slot with step (a Program's Step),
// after checking the rows as CheckRows does with no token limit (step
// checks the tokens), and returns the rows r.Logits asks for. It serves
// programs without a batched step and a backend whose single step is its
// oracle.
func StepRowsBySlot(cfg ProgramConfig, r Rows, step func(slot int, tokens, pos []int32) ([][]float32, error)) ([][]float32, error) {
	if err := CheckRows(cfg, -1, r); err != nil {
		return nil, err
	}
	n := r.Len()
	all := make([][]float32, n)
	done := make([]bool, n)
	for i := 0; i < n; i++ {
		if done[i] {
			continue
		}
		s := r.Slots[i]
		var idx []int
		var tokens, pos []int32
		for j := i; j < n; j++ {
			if r.Slots[j] == s {
				idx = append(idx, j)
				tokens = append(tokens, r.Tokens[j])
				pos = append(pos, r.Pos[j])
				done[j] = true
			}
		}
		rows, err := step(int(s), tokens, pos)
		if err != nil {
			return nil, err
		}
		if len(rows) != len(idx) {
			return nil, fmt.Errorf("a step of %d tokens returned %d logits rows", len(idx), len(rows))
		}
		for k, j := range idx {
			all[j] = rows[k]
		}
	}
	return PickRows(all, r.Logits), nil
}

// PickRows returns the rows of all that want names (all when want is nil).
func PickRows(all [][]float32, want []int) [][]float32 {
	if want == nil {
		return all
	}
	out := make([][]float32, len(want))
	for i, j := range want {
		out[i] = all[j]
	}
	return out
}

// CheckRows validates a batched step's rows; every backend calls it so that
// all reject the same steps with the same errors. tokenLimit < 0 skips the
// token check. Besides CheckStep's rules for each row, a step may not write
// one cache row twice (two rows with the same slot and position), and
// Logits must name rows in ascending order.
func CheckRows(cfg ProgramConfig, tokenLimit int, r Rows) error {
	n := len(r.Tokens)
	if n == 0 {
		return fmt.Errorf("no tokens to evaluate")
	}
	if len(r.Slots) != n || len(r.Pos) != n {
		return fmt.Errorf("%d tokens, %d slots and %d positions: one of each per row", n, len(r.Slots), len(r.Pos))
	}
	seen := make(map[[2]int32]int, n)
	for i := 0; i < n; i++ {
		s, id, p := r.Slots[i], r.Tokens[i], r.Pos[i]
		if s < 0 || int(s) >= cfg.Slots {
			return fmt.Errorf("row %d: slot %d is out of range (the program has %d)", i, s, cfg.Slots)
		}
		if tokenLimit >= 0 && (id < 0 || int(id) >= tokenLimit) {
			return fmt.Errorf("row %d: token %d is outside the vocabulary of %d", i, id, tokenLimit)
		}
		if p < 0 || int(p) >= cfg.Context {
			return fmt.Errorf("%w: row %d: position %d is outside the context of %d", ErrContextFull, i, p, cfg.Context)
		}
		if j, dup := seen[[2]int32{s, p}]; dup {
			return fmt.Errorf("rows %d and %d both write position %d of slot %d", j, i, p, s)
		}
		seen[[2]int32{s, p}] = i
	}
	for k, j := range r.Logits {
		if j < 0 || j >= n || k > 0 && j <= r.Logits[k-1] {
			return fmt.Errorf("logits rows %v are not ascending row numbers below %d", r.Logits, n)
		}
	}
	return nil
}
