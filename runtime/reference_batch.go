package runtime

// StepRows runs a batched step on the interpreter as one Step per slot
// (StepRowsBySlot): the interpreter is the oracle, and its machine is bound
// to one slot's caches at a time. Each row's result is what a step of the
// batched backends gives it, since rows of different slots never meet.
func (p *refProgram) StepRows(r Rows) ([][]float32, error) {
	if err := CheckRows(p.cfg, p.sig.TokenLimit, r); err != nil {
		return nil, err
	}
	return StepRowsBySlot(p.cfg, r, p.Step)
}
