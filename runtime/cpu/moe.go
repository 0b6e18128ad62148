package cpu

import (
	"fmt"
	"math"

	"github.com/minerva-llm/minerva/internal/mmap"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime/cpu/kern"
)

// Mixture of experts on the CPU: topk_softmax (the router's selection) and
// moe (the selected experts' clamped SwiGLU blocks and their weighted sum).
//
// moe reads only the weight rows of the experts some token of the step
// selected: with gpt-oss-20b's 32 experts and 4 used, a decode step touches
// an eighth of the expert bytes, which is what makes the model fast on a
// CPU at all. The work is laid out expert-major: every (token, expert)
// pair with a non-zero route weight gets a row, the rows of one expert are
// contiguous, and work items are (expert, chunk of output rows), so a
// weight row is read once per step however many tokens chose its expert.

// topkSoftmax is ir.OpTopKSoftmax: per row the k largest logits, lower index
// first on equal logits, replaced by their softmax (float64, in that order,
// as the interpreter sums it); every other entry is 0.
func (e *exec) topkSoftmax(nd *node) error {
	x := e.f32(nd.args[0])
	out := e.out(nd)
	w := int(nd.v.Type.Shape.Last().N)
	k := int(nd.v.Attrs.Int("k", 0))
	if w <= 0 || k <= 0 || k > w {
		return fmt.Errorf("k = %d is outside 1..%d", k, w)
	}
	rows := len(x) / w
	top := make([]int, 0, k)
	for r := 0; r < rows; r++ {
		row, o := x[r*w:(r+1)*w], out[r*w:(r+1)*w]
		top = topK(row, k, top[:0])
		clear(o)
		m := float64(row[top[0]])
		var sum float64
		for _, j := range top {
			sum += math.Exp(float64(row[j]) - m)
		}
		for _, j := range top {
			o[j] = float32(math.Exp(float64(row[j])-m) / sum)
		}
	}
	return nil
}

// topK appends to top the indices of row's k largest values in descending
// order; on equal values the lower index comes first (a stable sort's
// order). An insertion into a k-long list: k is 2…4 for real routers.
// NaN logits are taken only while the list is not full, and in index order,
// so bad input gives NaN weights, never an out-of-range index.
func topK(row []float32, k int, top []int) []int {
	for j, v := range row {
		if len(top) == k && !(v > row[top[k-1]]) {
			continue
		}
		if len(top) < k {
			top = append(top, j)
		} else {
			top[k-1] = j
		}
		for i := len(top) - 1; i > 0 && v > row[top[i-1]]; i-- {
			top[i], top[i-1] = top[i-1], top[i]
		}
	}
	return top
}

// moeAct is the gated activation of a moe op, computed in float64 as the
// interpreter does and rounded once.
type moeAct struct {
	oai          bool
	alpha, limit float64
}

func (a moeAct) apply(g, u float32) float32 {
	gf, uf := float64(g), float64(u)
	if !a.oai {
		return float32(silu(gf) * uf)
	}
	gf = math.Min(gf, a.limit)
	uf = math.Max(-a.limit, math.Min(uf, a.limit))
	return float32(gf / (1 + math.Exp(-a.alpha*gf)) * (uf + 1))
}

// moeWeights is one of the three expert tensors: E matrices of n rows of k
// elements, expert-major.
type moeWeights struct {
	dt    ir.DType
	n, k  int
	rb    int // bytes per row
	data  []byte
	act   ir.DType // the activation format its dots read
	actRB int      // bytes per activation row
	// packed are the experts' matrices in group-kernel form (cval.experts),
	// nil when the rows are read raw; actRB is then the packed format's.
	// arena holds them (cval.expertArena).
	packed []*kern.Packed
	arena  []byte
}

// dots sets dst[r*ld+j] to the dot of row j0+j of expert ex with
// activation row r (rows stride bytes apart), for j < cnt and r < R: the
// packed group kernels, or one weight row against the R rows at a time.
func (m moeWeights) dots(ks kern.Kernels, ex, j0, cnt int, acts []byte, stride, R int, dst []float32, ld int, tmp []float32) {
	if m.packed != nil {
		m.packed[ex].Dots(j0, cnt, acts, stride, R, dst, ld)
		return
	}
	tmp = tmp[:R]
	for j := 0; j < cnt; j++ {
		ks.DotRows(m.dt, m.k, m.row(ex, j0+j), acts, stride, tmp)
		for r, s := range tmp {
			dst[r*ld+j] = s
		}
	}
}

func (m moeWeights) row(e, j int) []byte {
	off := (e*m.n + j) * m.rb
	return m.data[off : off+m.rb]
}

// expertWeights checks one expert tensor and describes it.
func expertWeights(c *cval, what string, e, n, k int) (moeWeights, error) {
	if c == nil {
		return moeWeights{}, fmt.Errorf("the %s weights must be constant", what)
	}
	if len(c.shape) != 3 || c.shape[0] != int64(e) || c.shape[1] != int64(n) || c.shape[2] != int64(k) {
		return moeWeights{}, fmt.Errorf("%s weights have shape %v, want [%d %d %d]", what, c.shape, e, n, k)
	}
	if !kernSupported(c.dt) {
		return moeWeights{}, fmt.Errorf("%s weights of type %s are not supported", what, c.dt)
	}
	rb, err := c.dt.RowBytes(int64(k))
	if err != nil {
		return moeWeights{}, fmt.Errorf("%s weights: %w", what, err)
	}
	at := actType(c.dt)
	arb, err := at.RowBytes(int64(k))
	if err != nil {
		return moeWeights{}, fmt.Errorf("%s weights: activations of %d elements as %s: %w", what, k, at, err)
	}
	if int64(len(c.data)) != int64(e)*int64(n)*rb {
		return moeWeights{}, fmt.Errorf("%s weights have %d bytes, want %d", what, len(c.data), int64(e)*int64(n)*rb)
	}
	m := moeWeights{dt: c.dt, n: n, k: k, rb: int(rb), data: c.data, act: at, actRB: int(arb)}
	if c.experts != nil {
		m.packed, m.arena, m.actRB = c.experts, c.expertArena, kern.PackedActBytes(k)
	}
	return m, nil
}

// packableExperts prepares c, an [E, n, k] expert tensor, for packing one
// expert at a time (packExpert) when the active variant has group kernels
// for c's dtype and n is a multiple of 8, and reports whether it did.
// Experts are packed the first time a step selects them, not at load: a
// copy of every expert at load would hold a gpt-oss-20b file's 11 GB twice
// while packing and, beside the page cache, evict the file between runs
// (load went from 6 to 40–53 s on a 23 GB machine).
func (p *program) packableExperts(c *cval, E, n, k int) bool {
	if c.experts != nil {
		return true
	}
	if !packedExpertTypes[c.dt] || !p.ks.PackedSupported(c.dt) || n%8 != 0 || k%32 != 0 {
		return false
	}
	// One mapping for all the experts (kern.PackInto: huge pages, so that
	// packing is not bound by page faults); only packed experts' pages
	// become resident.
	arena, unmap, err := mmap.Anon(E * kern.PackedBytes(c.dt, n, k))
	if err != nil {
		return false
	}
	c.experts, c.expertArena, c.expertUnmap = make([]*kern.Packed, E), arena, unmap
	return true
}

// packedExpertTypes are the expert dtypes whose group kernels read the
// packed Q8_0 activation format (kern.PackedActBytes), which moeWeights
// encodes.
var packedExpertTypes = map[ir.DType]bool{ir.Q4_0: true, ir.Q8_0: true, ir.MXFP4: true}

// packExpert packs expert ex of m (packable) unless it is packed, then
// releases its source pages: no step reads them again.
func (p *program) packExpert(m moeWeights, ex int) error {
	if m.packed[ex] != nil {
		return nil
	}
	size, pb := m.n*m.rb, kern.PackedBytes(m.dt, m.n, m.k)
	src := m.data[ex*size : (ex+1)*size]
	q := p.ks.PackInto(m.dt, m.n, m.k, src, m.arena[ex*pb:(ex+1)*pb])
	if q == nil {
		return fmt.Errorf("packing expert %d's %d×%d %s matrix failed", ex, m.n, m.k, m.dt)
	}
	m.packed[ex] = q
	mmap.ReleaseMapped(src)
	return nil
}

// prepareMoE checks a moe node at compile time: constant expert tensors of
// a dtype the kernels handle, row lengths the activation formats can
// encode, a known activation; the other constant operands (biases) get
// their float32 form.
func (p *program) prepareMoE(nd *node) error {
	v := nd.v
	if len(nd.args) != 5 && len(nd.args) != 8 {
		return fmt.Errorf("moe takes 5 or 8 operands, got %d", len(nd.args))
	}
	if _, err := moeActOf(v.Attrs); err != nil {
		return err
	}
	dims, err := p.moeShape(nd)
	if err != nil {
		return err
	}
	// Experts are packed into eight-row groups where the kernels have
	// group kernels for their dtype (MXFP4, Q4_0, Q8_0): a step's few rows
	// per expert then run the group kernels instead of one weight row at a
	// time (packableExperts). Otherwise a step reads a few experts in no
	// predictable order: map all their pages now, or every first read of a
	// page during the first tens of tokens is a page fault (see
	// mmap.Populate).
	for i, m := range []moeWeights{dims.gate, dims.up, dims.down} {
		if !p.packableExperts(p.consts[nd.args[2+i]], dims.E, m.n, m.k) {
			mmap.Populate(m.data)
		}
	}
	for j, a := range nd.args {
		if c := p.consts[a]; c != nil && (j < 2 || j > 4) {
			if err := c.ensureF32(); err != nil {
				return err
			}
		}
	}
	return nil
}

func moeActOf(a ir.Attrs) (moeAct, error) {
	switch act := a.Str("act", ""); act {
	case ir.MoEActSiLU:
		return moeAct{}, nil
	case ir.MoEActSwiGLUOAI:
		return moeAct{oai: true, alpha: a.Float("alpha", 0), limit: a.Float("limit", 0)}, nil
	default:
		return moeAct{}, fmt.Errorf("unknown moe activation %q", act)
	}
}

// moeDims are a moe node's sizes and expert tensors.
type moeDims struct {
	E, F, D        int
	gate, up, down moeWeights
}

func (p *program) moeShape(nd *node) (moeDims, error) {
	gc := p.consts[nd.args[2]]
	if gc == nil || len(gc.shape) != 3 {
		return moeDims{}, fmt.Errorf("the gate weights must be a constant [E, F, D]")
	}
	E, F, D := int(gc.shape[0]), int(gc.shape[1]), int(gc.shape[2])
	d := moeDims{E: E, F: F, D: D}
	var err error
	if d.gate, err = expertWeights(gc, "gate", E, F, D); err != nil {
		return d, err
	}
	if d.up, err = expertWeights(p.consts[nd.args[3]], "up", E, F, D); err != nil {
		return d, err
	}
	if d.down, err = expertWeights(p.consts[nd.args[4]], "down", E, D, F); err != nil {
		return d, err
	}
	return d, nil
}

// moeBuffers is a program's moe scratch, reused across steps and layers.
type moeBuffers struct {
	pairOf []int32     // [T][E]: the pair row of (token, expert), or -1
	start  []int       // per active expert: its first pair row; one more at the end
	expert []int       // per active expert: its index
	tok    []int       // per pair row: the token
	xg, xu []byte      // per pair row: the token's activations for gate / up
	hid    []float32   // per pair row: act(gate, up), F floats
	hq     []byte      // per pair row: hid encoded for down
	y      []float32   // per pair row: down·hid + bias, D floats
	acc    [][]float64 // per worker: one token's weighted sum
}

func growBytes(b []byte, n int) []byte {
	if cap(b) < n {
		return alignedBytes(n + n/4)[:n]
	}
	return b[:n]
}

// moe is ir.OpMoE. Steps: (1) list the (token, expert) pairs with a
// non-zero route weight, expert-major; (2) encode each token's input once
// per activation format and copy it to its pair rows, so that an expert's
// activation rows are contiguous for its dots (packed experts: Packed.Dots;
// else kern.DotRows); (3) gate and up dots per (expert,
// chunk of F rows), biases and the gated activation; (4) encode each pair's
// hidden row for down; (5) down dots per (expert, chunk of D rows) with its
// bias; (6) per token the route-weighted sum over its experts in expert
// order, accumulated in float64 as the interpreter does.
func (e *exec) moe(nd *node) error {
	p := e.p
	dims, err := p.moeShape(nd)
	if err != nil {
		return err
	}
	act, err := moeActOf(nd.v.Attrs)
	if err != nil {
		return err
	}
	E, F, D := dims.E, dims.F, dims.D
	x, route := e.f32(nd.args[0]), e.f32(nd.args[1])
	T := len(x) / D
	if len(route) != T*E {
		return fmt.Errorf("route has %d weights for %d tokens × %d experts", len(route), T, E)
	}
	var bg, bu, bd []float32
	if len(nd.args) == 8 {
		bg, bu, bd = e.f32(nd.args[5]), e.f32(nd.args[6]), e.f32(nd.args[7])
		if len(bg) != E*F || len(bu) != E*F || len(bd) != E*D {
			return fmt.Errorf("moe biases have %d, %d and %d values, want %d, %d and %d", len(bg), len(bu), len(bd), E*F, E*F, E*D)
		}
	}
	if p.moeBuf == nil {
		p.moeBuf = &moeBuffers{}
	}
	b := p.moeBuf

	// (1) pairs, expert-major, tokens ascending within an expert.
	b.pairOf = growI32(b.pairOf, T*E)
	for i := range b.pairOf {
		b.pairOf[i] = -1
	}
	b.start, b.expert, b.tok = b.start[:0], b.expert[:0], b.tok[:0]
	for ex := 0; ex < E; ex++ {
		first := len(b.tok)
		for t := 0; t < T; t++ {
			if route[t*E+ex] != 0 {
				b.pairOf[t*E+ex] = int32(len(b.tok))
				b.tok = append(b.tok, t)
			}
		}
		if len(b.tok) > first {
			b.start = append(b.start, first)
			b.expert = append(b.expert, ex)
		}
	}
	b.start = append(b.start, len(b.tok))
	P, nAct := len(b.tok), len(b.expert)
	out := e.out(nd)
	if P == 0 {
		clear(out)
		return nil
	}
	// Experts selected for the first time are packed now (packableExperts).
	for _, ex := range b.expert {
		for _, m := range []moeWeights{dims.gate, dims.up, dims.down} {
			if m.packed != nil {
				if err := p.packExpert(m, ex); err != nil {
					return err
				}
			}
		}
	}

	// (2) inputs encoded once per token, then gathered into pair rows.
	gRB, uRB := dims.gate.actRB, dims.up.actRB
	sameAct := dims.gate.act == dims.up.act && (dims.gate.packed == nil) == (dims.up.packed == nil)
	buf := e.actsBuf(T * (gRB + uRB))
	qg, qu := buf[:T*gRB], buf[T*gRB:]
	gEnc, uEnc := rowEncoding(dims.gate.dt, dims.gate.packed != nil), rowEncoding(dims.up.dt, dims.up.packed != nil)
	p.pool.run(T, func(_, t int) {
		xr := x[t*D : (t+1)*D]
		p.encodeActs(gEnc, xr, qg[t*gRB:(t+1)*gRB])
		if !sameAct {
			p.encodeActs(uEnc, xr, qu[t*uRB:(t+1)*uRB])
		}
	})
	if sameAct {
		qu = qg
	}
	b.xg = growBytes(b.xg, P*gRB)
	b.xu = growBytes(b.xu, P*uRB)
	for r, t := range b.tok {
		copy(b.xg[r*gRB:(r+1)*gRB], qg[t*gRB:])
		copy(b.xu[r*uRB:(r+1)*uRB], qu[t*uRB:])
	}

	// (3) gate and up, the activation into hid.
	b.hid = growF32(b.hid, P*F)
	ch := p.moeChunk(F, D, P, nAct)
	perE := (F + ch - 1) / ch
	p.pool.run(nAct*perE, func(w, it int) {
		i, j0 := it/perE, (it%perE)*ch
		j1 := min(F, j0+ch)
		ex, r0, r1 := b.expert[i], b.start[i], b.start[i+1]
		R, cnt := r1-r0, j1-j0
		tmp := p.scratchFor(w, 2*R*cnt+R)
		g, u := tmp[:R*cnt], tmp[R*cnt:2*R*cnt]
		xg, xu := b.xg[r0*gRB:r1*gRB], b.xu[r0*uRB:r1*uRB]
		dims.gate.dots(p.ks, ex, j0, cnt, xg, gRB, R, g, cnt, tmp[2*R*cnt:])
		dims.up.dots(p.ks, ex, j0, cnt, xu, uRB, R, u, cnt, tmp[2*R*cnt:])
		for j := j0; j < j1; j++ {
			var gb, ub float32
			if bg != nil {
				gb, ub = bg[ex*F+j], bu[ex*F+j]
			}
			for r := 0; r < R; r++ {
				b.hid[(r0+r)*F+j] = act.apply(g[r*cnt+j-j0]+gb, u[r*cnt+j-j0]+ub)
			}
		}
	})

	// (4) hidden rows encoded for down.
	dRB := dims.down.actRB
	b.hq = growBytes(b.hq, P*dRB)
	dEnc := rowEncoding(dims.down.dt, dims.down.packed != nil)
	p.pool.run(P, func(_, r int) {
		p.encodeActs(dEnc, b.hid[r*F:(r+1)*F], b.hq[r*dRB:(r+1)*dRB])
	})

	// (5) down with its bias into y.
	b.y = growF32(b.y, P*D)
	ch = p.moeChunk(D, F, P, nAct)
	perE = (D + ch - 1) / ch
	p.pool.run(nAct*perE, func(w, it int) {
		i, j0 := it/perE, (it%perE)*ch
		j1 := min(D, j0+ch)
		ex, r0, r1 := b.expert[i], b.start[i], b.start[i+1]
		R, cnt := r1-r0, j1-j0
		tmp := p.scratchFor(w, R*cnt+R)
		hq := b.hq[r0*dRB : r1*dRB]
		dims.down.dots(p.ks, ex, j0, cnt, hq, dRB, R, tmp, cnt, tmp[R*cnt:])
		for j := j0; j < j1; j++ {
			var db float32
			if bd != nil {
				db = bd[ex*D+j]
			}
			for r := 0; r < R; r++ {
				b.y[(r0+r)*D+j] = tmp[r*cnt+j-j0] + db
			}
		}
	})

	// (6) weighted sum per token, experts in index order.
	if len(b.acc) < p.pool.n {
		b.acc = make([][]float64, p.pool.n)
	}
	p.pool.run(T, func(w, t int) {
		if cap(b.acc[w]) < D {
			b.acc[w] = make([]float64, D)
		}
		acc := b.acc[w][:D]
		clear(acc)
		for ex := 0; ex < E; ex++ {
			r := int(b.pairOf[t*E+ex])
			if r < 0 {
				continue
			}
			wt := float64(route[t*E+ex])
			for i, yi := range b.y[r*D : (r+1)*D] {
				acc[i] += wt * float64(yi)
			}
		}
		o := out[t*D : (t+1)*D]
		for i, s := range acc {
			o[i] = float32(s)
		}
	})
	return nil
}

// moeChunk is the output rows per work item for n×k expert matrices, r pair
// rows and a active experts: items of about chunkElems weight elements per
// pair row (each item streams its rows from memory in one run; see
// chunkRows), at least rowChunk rows, and at least two items per worker
// while items of rowChunk rows exist (in decode a gpt-oss layer has only 4
// experts' worth of rows).
func (p *program) moeChunk(n, k, r, a int) int {
	perExpert := max(1, r/max(1, a))
	c := max(rowChunk, (chunkElems+k*perExpert-1)/max(1, k*perExpert))
	if lim := n * a / (2 * p.pool.n); c > lim {
		c = max(rowChunk, lim)
	}
	// Whole pairs of eight-row groups for the packed kernels (rowChunk is
	// 16): a chunk that splits a group computes the group twice.
	c = (c + rowChunk - 1) / rowChunk * rowChunk
	return min(c, n)
}

func growI32(b []int32, n int) []int32 {
	if cap(b) < n {
		return make([]int32, n, n+n/4)
	}
	return b[:n]
}
