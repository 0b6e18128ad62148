package cpu

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/minerva-llm/minerva/runtime/cpu/kern"

	"github.com/minerva-llm/minerva/ir"
)

// rowChunk is the least number of output features one work item computes.
// Every output feature is computed by one dot per activation row whatever
// the split, so the split of work never changes a result, only how well the
// workers share it.
const rowChunk = 16

// chunkRows returns the output features per work item for an n×k weight
// matrix times r activation rows: n split into up to eight items per
// worker, but items of at least chunkElems weight elements (while the matrix
// allows one per worker). A worker streams an item's rows from memory in one
// run, and the hardware prefetchers need long runs: on one thread, decode
// over a 2048-wide packed Q4_0 matrix ran at 17.5 GB/s in 32-row items and
// 29.7 GB/s in 128-row items (kern's BenchmarkPackedStream). The result is
// a multiple of 8, so items start on the packed kernels' row groups, and at
// least rowChunk. r does not change the split: every item costs the same
// per activation row.
func (p *program) chunkRows(n, k, r int) int {
	w := p.pool.n
	c := (n + 8*w - 1) / (8 * w)
	if c*k < chunkElems {
		c = (chunkElems + k - 1) / max(1, k)
	}
	c = min(c, (n+w-1)/w)
	return max(rowChunk, (c+7)&^7)
}

// splitRows cuts n output features into work items for guided scheduling:
// large items first (a quarter of what is left per worker's share: long
// streaming runs), shrinking to an eighth of chunkRows' size at the end, so
// that the workers finish within a small item of each other. It returns the
// item boundaries (items+1 values) in p.bounds, valid until the next call.
// Items are multiples of 16 rows so that the packed kernels' pairs of
// groups (kern.Packed.Dots) never straddle two.
//
// The last items are what one worker may wait on while the other ends: at
// half of chunkRows (64 rows of a 2048-wide matrix, 176 of SwiGLU's pairs
// of 5632 rows) the caller waited 9.4 µs a run for its helper in a
// TinyLlama Q5_K decode (per-run timers, 111 runs a step), at an eighth 6.0.
func (p *program) splitRows(n, k, r int) []int {
	w := p.pool.n
	least := max(rowChunk, (p.chunkRows(n, k, r)/8+15)&^15)
	b := append(p.bounds[:0], 0)
	for at := 0; at < n; {
		c := max(least, ((n-at+2*w-1)/(2*w)+15)&^15)
		at = min(n, at+c)
		b = append(b, at)
	}
	p.bounds = b
	return b
}

// splitHeads is splitRows for the QKV op's work items, which are runs of
// whole heads of hd rows (each item applies its heads' rope and cache
// writes): the long runs first, shrinking to about an eighth of chunkRows'
// rows (at least one head) at the end. It returns the head boundaries in
// p.headBounds, valid until the next call. Against runs of equal length
// (about chunkRows' rows each) TinyLlama's Q4_0 QKV op took 3–6% less time
// in decode, in alternating steps of three runs.
func (p *program) splitHeads(heads, hd, k, r int) []int {
	w := p.pool.n
	least := max(1, (p.chunkRows(heads*hd, k, r)/8+hd-1)/hd)
	b := append(p.headBounds[:0], 0)
	for at := 0; at < heads; {
		c := max(least, (heads-at+2*w-1)/(2*w))
		at = min(heads, at+c)
		b = append(b, at)
	}
	p.headBounds = b
	return b
}

// chunkElems is the least number of weight elements of a work item (see
// chunkRows): 147 KB of Q4_0, 272 KB of Q8_0.
const chunkElems = 1 << 18

// weightRows reads the rows of one weight matrix: through its packed form
// (kern.Packed, eight rows interleaved) when the active kernels have one for
// its dtype, else row by row with kern.Dot.
type weightRows struct {
	dt     ir.DType
	k, rb  int
	data   []byte
	packed *kern.Packed
	ks     kern.Kernels // the program's kernel variant
	// floatActs: the activations are float32 rows already rounded as the
	// reference engine rounds them (refround.go), and each dot decodes the
	// weight row and multiplies in float.
	floatActs bool
}

func (c *cval) rows(ks kern.Kernels) weightRows {
	_, k, rb, _ := c.matrix()
	return weightRows{dt: c.dt, k: k, rb: rb, data: c.data, packed: c.packed, ks: ks}
}

// bytesOf returns the weight bytes that rows [j0, j0+cnt) are read from
// (their packed groups, or their rows).
func (w weightRows) bytesOf(j0, cnt int) []byte {
	if w.packed != nil && !w.floatActs {
		return w.packed.RowsBytes(j0, cnt)
	}
	lo, hi := j0*w.rb, min((j0+cnt)*w.rb, len(w.data))
	if lo >= hi {
		return nil
	}
	return w.data[lo:hi]
}

// oneRow is what a matmul op's decode steps (one activation row) read
// before its run, worked out once and kept in the node (decodePlan): the
// matrix's shape and rows, the activation row's bytes, the work items for
// one row, the key of its encoded row, and what the workers read ahead of
// the op (warm). Worked out at each step, the lookups (the shape's dtype
// table is a map) missed the caches the weights had just streamed
// through: 2.3 µs an op, 0.21 ms of a TinyLlama Q4_0 decode step's 89
// matmuls (per-op timers), spent by the caller alone. Kept, steps took
// 0.02–0.28 ms less (alternate steps of one process, depth 512, seven
// measurements over six files).
type oneRow struct {
	wr       weightRows
	N, K, ab int
	b        []int // item bounds for one row (items)
	key      actsKey
	// warm is entry w the weights of worker w's first item (rows
	// [b[w]·unit, b[w+1]·unit) of each of the matrices at row offsets
	// offs), at most aheadBytes of them, in the order the item reads them;
	// nil on one worker. It is never written again, so the pool may hand
	// it to its workers at any time (pool.warmUp, pool.tail).
	warm *[][][]byte
}

// items returns a matmul node's work items for R rows: b's bounds count
// unit weight rows each (QKV: heads), and offs are the first rows of the
// matrices an item reads (SwiGLU: gate, then up). b is p.bounds or
// p.headBounds, valid until the next call.
func (p *program) items(nd *node, N, K, R int) (b []int, unit int, offs []int) {
	switch nd.v.Op {
	case ir.OpSwiGLU:
		return p.splitRows(N/2, 2*K, R), 1, []int{0, N / 2}
	case ir.OpQKVRoPE:
		return p.splitHeads(nd.attn.nh+2*nd.attn.nkv, nd.attn.hd, K, R), nd.attn.hd, []int{0}
	}
	return p.splitRows(N, K, R), 1, []int{0}
}

// aheadBytes bounds what one worker reads ahead of a run (pool.warmUp):
// more than it streams in the longest serial part of a decode op (a norm
// and an encoding, about 10 µs) and well inside its core's L2.
const aheadBytes = 256 << 10

// isMatMul reports whether node i is a matmul op with constant weights.
func (p *program) isMatMul(i int) bool {
	nd := &p.nodes[i]
	switch nd.v.Op {
	case ir.OpMatMul, ir.OpFusedMatMul, ir.OpSwiGLU, ir.OpQKVRoPE:
		return p.consts[nd.ix.w] != nil
	}
	return false
}

// matmulRow works out matmul node nd's weight rows, shape, activation row
// bytes and encoded row key.
func (p *program) matmulRow(nd *node) (*oneRow, error) {
	c := p.consts[nd.ix.w]
	N, K, _, err := c.matrix()
	if err != nil {
		return nil, err
	}
	wr := p.emulated(c.rows(p.ks))
	return &oneRow{wr: wr, N: N, K: K, ab: wr.actBytes(),
		key: actsKey{x: nd.ix.x, enc: actsEncodingOf(wr), norm: nd.parts.Norm, eps: nd.parts.Eps, gain: nd.ix.gain}}, nil
}

// decodePlan returns node i's plan for one activation row, made at its
// first call (a decode matmul, or the step loop asking for the next
// matmul's read-ahead); nil for a node that is no matmul.
func (p *program) decodePlan(i int) *oneRow {
	if i < 0 {
		return nil
	}
	nd := &p.nodes[i]
	if nd.one != nil { // on the step's hot path: the node's line alone
		return nd.one
	}
	if !p.isMatMul(i) {
		return nil
	}
	one, err := p.matmulRow(nd)
	if err != nil {
		return nil // the op reports it when it runs
	}
	b, unit, offs := p.items(nd, one.N, one.K, 1)
	one.b = slices.Clone(b)
	if p.pool.n > 1 {
		set := make([][][]byte, min(p.pool.n, len(b)-1))
		for w := range set {
			left := aheadBytes
			for _, off := range offs {
				bs := one.wr.bytesOf(off+b[w]*unit, (b[w+1]-b[w])*unit)
				bs = bs[:min(len(bs), left)]
				left -= len(bs)
				set[w] = append(set[w], bs)
			}
		}
		one.warm = &set
	}
	nd.one = one
	return one
}

// actBytes is the byte length of an activation row in the layout the
// matrix's kernels read.
func (w weightRows) actBytes() int {
	if w.floatActs {
		return 4 * w.k
	}
	if w.packed != nil {
		return w.packed.ActBytes()
	}
	return actBytes(w.dt, w.k)
}

// dots sets dst[r*ld+j] to the dot of weight row j0+j with activation row r
// (rows ab bytes apart), for j < cnt and r < R. tmp holds at least R floats.
func (w weightRows) dots(j0, cnt int, acts []byte, ab, R int, dst []float32, ld int, tmp []float32) {
	if w.floatActs {
		w.floatDots(j0, cnt, acts, ab, R, dst, ld)
		return
	}
	if w.packed != nil {
		w.packed.Dots(j0, cnt, acts, ab, R, dst, ld)
		return
	}
	if R == 1 {
		w.ks.MatVec(w.dt, w.k, w.data[j0*w.rb:(j0+cnt)*w.rb], acts, dst[:cnt])
		return
	}
	tmp = tmp[:R]
	for j := 0; j < cnt; j++ {
		w.ks.DotRows(w.dt, w.k, w.data[(j0+j)*w.rb:][:w.rb], acts, ab, tmp)
		for r, s := range tmp {
			dst[r*ld+j] = s
		}
	}
}

// scratchFloats bounds the part of a worker's scratch that holds R rows of
// outputs before their epilogue (SwiGLU's gate and up, QKV's heads): 256
// KB, in L2. Sized by the whole work item instead, a 512-token micro-batch
// of TinyLlama kept 14 MB of scratch, the largest thing a long prompt adds
// to the heap after the KV cache and the arena.
const scratchFloats = 1 << 16

// passRows is how many output features a work item computes at once when
// each keeps perRow·R floats in scratch: whole groups of sixteen rows (the
// pair kernels'), at least one group.
func passRows(perRow, R int) int {
	return max(16, scratchFloats/(perRow*R)&^15)
}

// scratchFor returns worker w's scratch buffer with at least n floats.
func (p *program) scratchFor(w, n int) []float32 {
	p.scratch[w] = growF32(p.scratch[w], n)
	return p.scratch[w]
}

// matmul runs the matmul family: an optional RMSNorm prologue in float,
// the activation rows quantized once to the weight type's partner format,
// then every output feature computed by one worker as kern dots, with the
// op's epilogue (bias, residual, swiglu gating, rope and KV writes).
func (e *exec) matmul(nd *node) error {
	v := nd.v
	parts := nd.parts
	p := e.p
	x := e.f32(nd.ix.x)
	// The node's plan for one row (decodePlan): a decode step's, asked
	// for once here.
	var plan *oneRow
	if e.T == 1 {
		plan = p.decodePlan(nd.order)
	}
	one := plan
	if one == nil || len(x) != one.K { // a prompt or batch: rows of their own
		var err error
		if one, err = p.matmulRow(nd); err != nil {
			return err
		}
	}
	wr, N, K, ab, key := one.wr, one.N, one.K, one.ab, one.key
	R := len(x) / K
	sel := e.logitRows(nd)
	if sel != nil {
		// Only the rows asked for: their activations gathered, the
		// rest of the output matmul (vocabulary × width per row) skipped.
		if len(sel) == 0 {
			e.out(nd)
			return nil
		}
		p.xsel = gatherRows(p.xsel, x, K, sel)
		x, R = p.xsel, len(sel)
	}
	if nd.idx == p.logits {
		p.logitRowsDone += int64(R)
	}
	// The work items, cut before the activations are encoded so that the
	// helpers read their first items' weights meanwhile (one row: decode,
	// or a prompt's last row's logits, where the caller encodes alone).
	var b []int
	if R == 1 {
		if plan == nil { // a prompt's one logits row
			plan = p.decodePlan(nd.order)
		}
		if plan != nil {
			p.pool.warmUp(plan.warm)
			b = plan.b
		}
	}
	if b == nil {
		b, _, _ = p.items(nd, N, K, R)
	}
	var acts []byte
	// Gathered logits rows are not the value's rows: never reused.
	if actsReuse && sel == nil && e.actsOK && e.acts == key {
		acts = p.acts[:R*ab]
		if actsReused != nil {
			actsReused.Add(1)
		}
	} else {
		acts = e.encodeInput(parts, nd.ix.gain, wr, x, R, K, ab)
		e.acts, e.actsOK = key, sel == nil
	}
	var bias []float32
	if parts.Bias != nil {
		bias = e.f32(nd.ix.bias)
	}
	switch v.Op {
	case ir.OpMatMul, ir.OpFusedMatMul:
		var res []float32
		if parts.Residual != nil {
			res = e.f32(nd.ix.residual)
			if sel != nil {
				p.rsel = gatherRows(p.rsel, res, N, sel)
				res = p.rsel
			}
		}
		out := e.out(nd)
		p.pool.run(len(b)-1, func(w, it int) {
			j0 := b[it]
			cnt := b[it+1] - j0
			wr.dots(j0, cnt, acts, ab, R, out[j0:], N, p.scratchFor(w, R))
			if bias == nil && res == nil {
				return
			}
			// (o + bias) + res, each addition as Axpy with α = 1: the
			// product 1·x is exact, so each is one rounded sum, as a
			// scalar loop gives it.
			for r := 0; r < R; r++ {
				o := out[r*N+j0:][:cnt]
				if bias != nil {
					p.ks.Axpy(o, 1, bias[j0:j0+cnt])
				}
				if res != nil {
					p.ks.Axpy(o, 1, res[r*N+j0:][:cnt])
				}
			}
		})
	case ir.OpSwiGLU:
		F := N / 2
		out := e.out(nd)
		p.pool.run(len(b)-1, func(w, it int) {
			// In passes over the item's rows; every output is the same
			// dot however the rows are split.
			pass := passRows(2, R)
			for j0, end := b[it], b[it+1]; j0 < end; j0 += pass {
				cnt := min(pass, end-j0)
				buf := p.scratchFor(w, 2*R*cnt+R)
				g, u, tmp := buf[:R*cnt], buf[R*cnt:2*R*cnt], buf[2*R*cnt:]
				wr.dots(j0, cnt, acts, ab, R, g, cnt, tmp)
				wr.dots(F+j0, cnt, acts, ab, R, u, cnt, tmp)
				for r := 0; r < R; r++ {
					e.p.ks.SiLUMul(out[r*F+j0:][:cnt], g[r*cnt:], u[r*cnt:])
				}
			}
		})
	case ir.OpQKVRoPE:
		return e.qkv(nd, parts, R, wr, acts, ab, bias, b)
	}
	return nil
}

// actsKey identifies a matmul's encoded activation rows: the input value
// (values do not change within a step; it fixes the rows and their width),
// the fused norm's parameters and the encoding, which with the width gives
// the bytes of a row. A layer whose q, k and v projections stay apart (a
// Q4_K_M file's Q6_K attn_v stops fuse-qkv) normalizes and encodes its
// input once instead of three times.
type actsKey struct {
	x    int
	enc  actsEncoding
	norm bool
	eps  float64
	gain int // value index, -1 for none
}

// actsReuse lets a matmul reuse the previous one's activation rows; tests
// turn it off to compare. actsReused counts the reuses when a test sets it.
var (
	actsReuse  = true
	actsReused *atomic.Int64
)

// actsBuf returns program.acts grown to n bytes for a writer: what the
// memo (exec.acts) says it holds is stale from here on.
func (e *exec) actsBuf(n int) []byte {
	p := e.p
	if cap(p.acts) < n {
		p.acts = alignedBytes(n)
	}
	e.actsOK = false
	return p.acts[:n]
}

// encodeInput fills program.acts with the R rows of x (width K), each
// normalized when the matmul is fused with an rmsnorm and then encoded for
// wr (program.encodeActs), ab bytes a row, and returns them: each row in
// one work item, one pass over the workers, not two (a serving step of
// eight rows had some 270 of them).
func (e *exec) encodeInput(parts ir.Parts, gainIx int, wr weightRows, x []float32, R, K, ab int) []byte {
	p := e.p
	var gain, xn []float32
	if parts.Norm {
		if gainIx >= 0 {
			gain = e.f32(gainIx)
		}
		p.xnorm = growF32(p.xnorm, R*K)
		xn = p.xnorm
	}
	acts := e.actsBuf(R * ab)
	enc := actsEncodingOf(wr)
	if R == 1 { // decode: no closure for the pool to hold (an allocation)
		p.encodeRow(enc, x, xn, parts.Eps, gain, acts, K, ab, 0)
		return acts
	}
	p.pool.run(R, func(_, r int) { p.encodeRow(enc, x, xn, parts.Eps, gain, acts, K, ab, r) })
	return acts
}

// encodeRow is encodeInput's row r: x's row normalized into xn's when xn
// is not nil, then encoded into acts.
func (p *program) encodeRow(enc actsEncoding, x, xn []float32, eps float64, gain []float32, acts []byte, K, ab, r int) {
	xr := x[r*K : (r+1)*K]
	if xn != nil {
		rmsnormRow(p.ks, xr, xn[r*K:(r+1)*K], eps, gain)
		xr = xn[r*K : (r+1)*K]
	}
	p.encodeActs(enc, xr, acts[r*ab:(r+1)*ab])
}

func (e *exec) qkv(nd *node, parts ir.Parts, R int, wr weightRows, acts []byte, ab int, bias []float32, hb []int) error {
	p := e.p
	H, Hkv, hd := nd.attn.nh, nd.attn.nkv, nd.attn.hd
	pos, err := e.i32(nd.ix.pos)
	if err != nil {
		return err
	}
	if len(pos) != R {
		return fmt.Errorf("%d positions for %d rows", len(pos), R)
	}
	kst := e.cache(p.stOf[nd.ix.kCache])
	vst := e.cache(p.stOf[nd.ix.vCache])
	rt := e.ropeTable(nd.rope, pos)
	out := e.out(nd)
	qd := H * hd
	// Qwen3's per-head norms of q and k, before the rotation.
	var qn, kn []float32
	if parts.QNorm != nil {
		qn, kn = e.f32(nd.ix.qNorm), e.f32(nd.ix.kNorm)
	}
	// Work items are runs of whole heads, hb their bounds, cut as
	// splitRows cuts rows (splitHeads).
	// Each item's heads in passes that keep scratch in L2 (as SwiGLU).
	hpp := max(1, passRows(1, R)/hd)
	p.pool.run(len(hb)-1, func(w, it int) {
		for h0, end := hb[it], hb[it+1]; h0 < end; h0 += hpp {
			h1 := min(end, h0+hpp)
			rows := (h1 - h0) * hd
			buf := p.scratchFor(w, R*rows+R)
			all := buf[:R*rows]
			wr.dots(h0*hd, rows, acts, ab, R, all, rows, buf[R*rows:])
			for h := h0; h < h1; h++ {
				for r := 0; r < R; r++ {
					hv := all[r*rows+(h-h0)*hd:][:hd]
					if bias != nil {
						p.ks.Axpy(hv, 1, bias[h*hd:(h+1)*hd]) // hv + bias, as above
					}
					switch {
					case h < H:
						if qn != nil {
							rmsnormRow(p.ks, hv, hv, parts.QKEps, qn)
						}
						rt.apply(r, hv)
						copy(out[r*qd+h*hd:r*qd+(h+1)*hd], hv)
					case h < H+Hkv:
						if kn != nil {
							rmsnormRow(p.ks, hv, hv, parts.QKEps, kn)
						}
						rt.apply(r, hv)
						writeRow(p.ks, kst, kst.at(e.base(kst, r), int(pos[r]), h-H), hv)
					default:
						writeRow(p.ks, vst, vst.at(e.base(vst, r), int(pos[r]), h-H-Hkv), hv)
					}
				}
			}
		}
	})
	return nil
}

// gatherRows copies rows sel of x (rows of width k) into buf, grown as
// needed, and returns it.
func gatherRows(buf, x []float32, k int, sel []int) []float32 {
	buf = growF32(buf, len(sel)*k)
	for i, r := range sel {
		copy(buf[i*k:(i+1)*k], x[r*k:(r+1)*k])
	}
	return buf
}
