package serve_test

import (
	"sync"
	"sync/atomic"

	"github.com/minerva-llm/minerva/runtime"
)

// gateProgram is a runtime.BatchProgram whose steps wait for the test:
// each step takes one value from gate, so the test decides when steps
// happen and sees every step's rows. Its logits put one token ahead: 100
// plus the row's position modulo 50 (never an end-of-generation token of
// stories260K's vocabulary).
type gateProgram struct {
	cfg   runtime.ProgramConfig
	vocab int
	gate  chan struct{}
	// waiting: a step waits at the gate, so the scheduler has pushed
	// every event of the steps before it.
	waiting atomic.Bool

	mu     sync.Mutex
	steps  []runtime.Rows
	resets []int
}

func newGateProgram(slots, ctx, vocab int) *gateProgram {
	return &gateProgram{cfg: runtime.ProgramConfig{Slots: slots, Context: ctx}, vocab: vocab, gate: make(chan struct{})}
}

func (p *gateProgram) Config() runtime.ProgramConfig { return p.cfg }
func (p *gateProgram) VocabSize() int                { return p.vocab }
func (p *gateProgram) CacheBytes() int64             { return 0 }
func (p *gateProgram) Close() error                  { return nil }

func (p *gateProgram) ResetSlot(slot int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resets = append(p.resets, slot)
	return nil
}

func (p *gateProgram) Step(slot int, tokens, pos []int32) ([][]float32, error) {
	r := runtime.Rows{Tokens: tokens, Pos: pos}
	for range tokens {
		r.Slots = append(r.Slots, int32(slot))
	}
	return p.StepRows(r)
}

func (p *gateProgram) StepRows(r runtime.Rows) ([][]float32, error) {
	if err := runtime.CheckRows(p.cfg, p.vocab, r); err != nil {
		return nil, err
	}
	p.waiting.Store(true)
	<-p.gate
	p.mu.Lock()
	p.steps = append(p.steps, r)
	p.mu.Unlock()
	want := r.Logits
	if want == nil {
		for i := range r.Tokens {
			want = append(want, i)
		}
	}
	out := make([][]float32, len(want))
	for i, j := range want {
		row := make([]float32, p.vocab)
		row[100+int(r.Pos[j])%50] = 1
		out[i] = row
	}
	return out, nil
}

// step lets one step run (blocking until the scheduler takes it).
func (p *gateProgram) step() {
	p.waiting.Store(false) // before the step is let through: no stale true
	p.gate <- struct{}{}
}

// stepsWith counts the steps from the first-th on that carry a row of slot.
func (p *gateProgram) stepsWith(slot, first int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.steps[min(first, len(p.steps)):] {
		for _, s := range r.Slots {
			if int(s) == slot {
				n++
				break
			}
		}
	}
	return n
}

func (p *gateProgram) stepCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.steps)
}
