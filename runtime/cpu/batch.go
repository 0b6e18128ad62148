package cpu

import "github.com/minerva-llm/minerva/runtime"

// StepRows runs rows of several slots in one step (runtime.BatchProgram):
// every matmul reads its weights once for all the rows. A row's result does
// not depend on the other rows: activations are quantized row by row, the
// work split of a matmul never changes a dot (chunkRows), the dot kernels
// over one, four or eight activation rows give the one-row kernel's bits
// (kern's TestDotRowsMatchesDot, and the packed group kernels agree bit for
// bit), and attention splits each row's KV range by the op's kv_splits
// alone. TestBatchInvariance holds a request's logits to that.
func (p *program) StepRows(r runtime.Rows) ([][]float32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, runtime.ErrClosed
	}
	if err := runtime.CheckRows(p.cfg, p.sig.TokenLimit, r); err != nil {
		return nil, err
	}
	slots := make([]int, r.Len())
	for i, s := range r.Slots {
		slots[i] = int(s)
	}
	return p.step(r.Tokens, r.Pos, slots, r.Logits)
}
