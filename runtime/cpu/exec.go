package cpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/rope"
	"github.com/minerva-llm/minerva/quant"
	"github.com/minerva-llm/minerva/runtime/cpu/kern"
)

// exec is one step: T rows, each a token at a position of a slot.
type exec struct {
	p      *program
	T      int
	tokens []int32
	pos    []int32
	// slots[t] is row t's slot: rows of several slots share a step
	// (runtime.Rows), each writing and reading its own slot's part of
	// every state (base).
	slots []int
	// coldKV: every row is the only one of its slot in the step (decode,
	// or a serving step of decode rows), so attention reads each cache row
	// once, from memory (see attention's lookahead prefetch).
	coldKV bool
	// ropes are the rotation tables this step has made: the layers of a
	// model share their rope parameters and positions, so one table serves
	// them all (a serving step of eight rows spent 1% of its time, on one
	// thread, recomputing 256 cosines and sines per layer).
	ropes []*ropeTab
	// want lists the rows whose logits the step returns (nil: all). The
	// output matmul computes only those rows (logitRows).
	want []int
	// acts says what program.acts holds when actsOK: the activation rows
	// the last matmul encoded, which the next one reuses when it reads the
	// same rows encoded the same way (actsKey). Per step, as values are.
	acts   actsKey
	actsOK bool
}

// logitRows returns the rows nd computes when it is the logits matmul and
// the step wants fewer rows than it has, nil otherwise (all rows). The
// output matmul is row by row, so its rows alone give the bits a full step
// gives them (kern's dot kernels do not depend on the rows beside).
func (e *exec) logitRows(nd *node) []int {
	if e.want == nil || len(e.want) == e.T || nd.idx != e.p.logits || nd.tpow != 1 {
		return nil
	}
	if op := nd.v.Op; op != ir.OpMatMul && op != ir.OpFusedMatMul {
		return nil
	}
	return e.want
}

// out returns the node's own buffer, sized for this step.
func (e *exec) out(nd *node) []float32 {
	n := int(nd.elems)
	rows := e.T
	if sel := e.logitRows(nd); sel != nil {
		rows = len(sel)
	}
	for i := 0; i < nd.tpow; i++ {
		n *= rows
	}
	var b []float32
	if nd.arena >= 0 {
		// The memory plan's place: T·offset in the step's arena, shared
		// with values whose lifetimes do not overlap (passes/memory.go).
		at := int(nd.arena) * e.T
		b = e.p.arena[at : at+n : at+n]
	} else {
		b = growF32(e.p.bufs[nd.idx], n)
		e.p.bufs[nd.idx] = b
	}
	e.p.vals[nd.idx] = b
	return b
}

// f32 returns the float32 data of operand value index i.
func (e *exec) f32(i int) []float32 {
	if c := e.p.consts[i]; c != nil {
		return c.f32
	}
	return e.p.vals[i]
}

func (e *exec) i32(i int) ([]int32, error) {
	switch i {
	case e.p.tokIdx:
		return e.tokens, nil
	case e.p.posIdx:
		return e.pos, nil
	}
	return nil, fmt.Errorf("integer operand %v is not an input", e.p.g.Values[i])
}

// cache returns a state, f32 or f16.
func (e *exec) cache(st int) *state { return e.p.states[st] }

// oneRowPerSlot reports whether no two of the step's rows share a slot
// (slots: their slots). Steps of more rows than a decode batch holds are
// prompts, and it does not look.
func oneRowPerSlot(slots []int) bool {
	if len(slots) > 256 {
		return false
	}
	for i, s := range slots {
		for _, o := range slots[:i] {
			if o == s {
				return false
			}
		}
	}
	return true
}

// base is the offset in s of row t's slot: its first element.
func (e *exec) base(s *state, t int) int { return e.slots[t] * s.slotStride }

// steps is the CPU backend's op table: how a step computes each op.
var steps = map[ir.Op]func(*exec, *node) error{
	ir.OpEmbed:          (*exec).embed,
	ir.OpRMSNorm:        (*exec).rmsnorm,
	ir.OpMatMul:         (*exec).matmul,
	ir.OpFusedMatMul:    (*exec).matmul,
	ir.OpSwiGLU:         (*exec).matmul,
	ir.OpQKVRoPE:        (*exec).matmul,
	ir.OpAdd:            (*exec).binary,
	ir.OpMul:            (*exec).binary,
	ir.OpSiLU:           (*exec).unary,
	ir.OpGELU:           (*exec).unary,
	ir.OpSoftmax:        (*exec).softmax,
	ir.OpRoPE:           (*exec).rope,
	ir.OpKVWrite:        (*exec).kvwrite,
	ir.OpAttention:      (*exec).attention,
	ir.OpFlashAttention: (*exec).attention,
	ir.OpTopKSoftmax:    (*exec).topkSoftmax,
	ir.OpMoE:            (*exec).moe,
	ir.OpReshape:        (*exec).reshape,
	ir.OpConcat:         (*exec).concat,
}

// Supports reports whether the CPU backend computes op (leaf ops are
// buffers).
func Supports(op ir.Op) bool {
	_, ok := steps[op]
	return ok || op.IsLeaf()
}

func (e *exec) run(nd *node) error { return nd.step(e, nd) }

func (e *exec) rmsnorm(nd *node) error {
	v := nd.v
	x := e.f32(nd.args[0])
	var gain []float32
	if len(nd.args) == 2 {
		gain = e.f32(nd.args[1])
	}
	out := e.out(nd)
	w := int(v.Type.Shape.Last().N)
	rmsnormRows(e.p.ks, x, out, w, v.Attrs.Float("eps", 0), gain)
	return nil
}

func (e *exec) binary(nd *node) error {
	a, b := e.f32(nd.args[0]), e.f32(nd.args[1])
	out := e.out(nd)
	nb := len(b)
	if nb == 0 {
		return nil
	}
	if nd.v.Op == ir.OpAdd {
		for i, x := range a {
			out[i] = x + b[i%nb]
		}
	} else {
		for i, x := range a {
			out[i] = x * b[i%nb]
		}
	}
	return nil
}

func (e *exec) unary(nd *node) error {
	f := silu
	if nd.v.Op == ir.OpGELU {
		f = gelu
	}
	a := e.f32(nd.args[0])
	out := e.out(nd)
	for i, x := range a {
		out[i] = float32(f(float64(x)))
	}
	return nil
}

func (e *exec) softmax(nd *node) error {
	a := e.f32(nd.args[0])
	out := e.out(nd)
	w := int(nd.v.Type.Shape.Last().N)
	for r := 0; r+w <= len(a) && w > 0; r += w {
		softmaxRow(a[r:r+w], out[r:r+w])
	}
	return nil
}

func (e *exec) rope(nd *node) error {
	v := nd.v
	x := e.f32(nd.args[0])
	out := e.out(nd)
	copy(out, x)
	pos, err := e.i32(nd.args[1])
	if err != nil {
		return err
	}
	r := e.ropeTable(nd.rope, pos)
	width := int(v.Type.Shape[1].N)
	hd := int(v.Attrs.Int("head_dim", 0))
	for t := range pos {
		for h := 0; h < width/hd; h++ {
			r.apply(t, out[t*width+h*hd:t*width+(h+1)*hd])
		}
	}
	return nil
}

func (e *exec) kvwrite(nd *node) error {
	x := e.f32(nd.args[1])
	pos, err := e.i32(nd.args[2])
	if err != nil {
		return err
	}
	st := e.cache(nd.st)
	w, hw := st.info.Width, st.hw
	for t, q := range pos {
		for h := 0; h*hw < w; h++ {
			writeRow(e.p.ks, st, st.at(e.base(st, t), int(q), h), x[t*w+h*hw:t*w+(h+1)*hw])
		}
	}
	return nil
}

func (e *exec) reshape(nd *node) error {
	if nd.st < 0 {
		e.p.vals[nd.idx] = e.f32(nd.args[0])
	}
	return nil
}

func (e *exec) concat(nd *node) error {
	out := e.out(nd)[:0]
	for _, a := range nd.args {
		out = append(out, e.f32(a)...)
	}
	return nil
}

// writeRow stores x at element off of st (for q8_0 both whole blocks:
// checkHeads holds heads to them), converted to the cache type by ks.
// (Half by half in Go, the f16 rows took 191 ms of Llama-2 7B's 512-token
// prefill in its 32 kvwrite ops alone.)
func writeRow(ks kern.Kernels, st *state, off int, x []float32) {
	switch {
	case st.f32 != nil:
		copy(st.f32[off:off+len(x)], x)
	case st.f16 != nil:
		ks.F32ToF16(st.f16[off:off+len(x)], x)
	default:
		// ggml's quantize_row_q8_0, as the interpreter rounds the row.
		b := off / q8Block * q8BlockBytes
		_ = quant.Quantize(ir.Q8_0, x, st.q8[b:b+len(x)/q8Block*q8BlockBytes])
	}
}

func (e *exec) embed(nd *node) error {
	c := e.p.consts[nd.args[0]]
	ids, err := e.i32(nd.args[1])
	if err != nil {
		return err
	}
	out := e.out(nd)
	n, d := int(c.shape[0]), int(c.shape[1])
	rb, err := c.dt.RowBytes(int64(d))
	if err != nil {
		return err
	}
	for i, id := range ids {
		if id < 0 || int(id) >= n {
			return fmt.Errorf("token id %d at position %d is outside the vocabulary (%d)", id, i, n)
		}
		dst := out[i*d : (i+1)*d]
		if c.f32 != nil {
			copy(dst, c.f32[int(id)*d:])
			continue
		}
		if err := quant.Dequantize(c.dt, c.data[int64(id)*rb:int64(id+1)*rb], dst); err != nil {
			return err
		}
	}
	return nil
}

// rmsnormRows normalizes rows of width w: the sum of squares in float64
// (ggml accumulates it in double), the scale applied in float64 and rounded,
// then the gain multiplied in float32 — the interpreter's steps, except
// that the sum runs in eight lanes (kern.Kernels.SumSquares), which
// reassociates it within 1e-15 of the one chain the interpreter adds.
func rmsnormRows(ks kern.Kernels, x, out []float32, w int, eps float64, gain []float32) {
	for r := 0; r+w <= len(x); r += w {
		rmsnormRow(ks, x[r:r+w], out[r:r+w], eps, gain)
	}
}

// rmsnormRow is one row of rmsnormRows; o may be row. A decode matmul's
// caller normalizes its input alone while the helpers wait, so its time
// is the step's. With one chain of float64 additions and a scalar scale
// loop a 2048-wide row took 2.7 µs with its data in L1, 0.66 µs with the
// kernels (AVX2); TinyLlama's 22 QKV ops a decode step took 24–94 µs less
// in all (alternate steps of one process, depth 512, Q4_0, Q4_K, Q6_K).
func rmsnormRow(ks kern.Kernels, row, o []float32, eps float64, gain []float32) {
	scale := 1 / math.Sqrt(ks.SumSquares(row)/float64(len(row))+eps)
	ks.ScaleRow(o[:len(row)], row, scale, gain)
}

func softmaxRow(in, out []float32) {
	m := math.Inf(-1)
	for _, e := range in {
		m = math.Max(m, float64(e))
	}
	var sum float64
	for _, e := range in {
		sum += math.Exp(float64(e) - m)
	}
	for j, e := range in {
		out[j] = float32(math.Exp(float64(e)-m) / sum)
	}
}

// ropeTab holds cos and sin (magnitude scale included) per token and pair,
// computed in float64 exactly as the interpreter does.
type ropeTab struct {
	params rope.Params
	pos    []int32   // the step's positions it was made for
	cs     []float64 // [T][NRot/2][2]
}

// ropeTable returns the table of the rotation rp at positions pos, made
// once per step for each distinct (parameters, positions).
func (e *exec) ropeTable(rp rope.Params, pos []int32) *ropeTab {
	for _, r := range e.ropes {
		if r.params.Equal(rp) && slices.Equal(r.pos, pos) {
			return r
		}
	}
	r := newRope(rp, pos)
	e.ropes = append(e.ropes, r)
	return r
}

func newRope(rp rope.Params, pos []int32) *ropeTab {
	nrot := rp.NRot
	mscale := rp.MScale()
	r := &ropeTab{params: rp, pos: pos, cs: make([]float64, len(pos)*nrot)}
	for t, p := range pos {
		for i := 0; i < nrot/2; i++ {
			theta := rp.Theta(p, i)
			r.cs[t*nrot+2*i] = math.Cos(theta) * mscale
			r.cs[t*nrot+2*i+1] = math.Sin(theta) * mscale
		}
	}
	return r
}

// apply rotates one head of token t in place.
func (r *ropeTab) apply(t int, row []float32) {
	nrot := r.params.NRot
	cs := r.cs[t*nrot : (t+1)*nrot]
	half := nrot / 2
	for i := 0; i < half; i++ {
		c, s := cs[2*i], cs[2*i+1]
		j0, j1 := 2*i, 2*i+1
		if r.params.Neox {
			j0, j1 = i, i+half
		}
		x0, x1 := float64(row[j0]), float64(row[j1])
		row[j0] = float32(x0*c - x1*s)
		row[j1] = float32(x0*s + x1*c)
	}
}
