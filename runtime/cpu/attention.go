package cpu

import (
	"math"
	"slices"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime/cpu/kern"
)

// attention computes (flash) attention over the slot's cache rows. Every
// (token, head) pair's visible KV range is cut into S parts (flash
// attention's kv_splits; 1 for plain attention); each (token, head, part) is
// one work item walking its rows in tiles with an online softmax and keeping
// a partial (m, l, acc). A second pass merges the parts of each (token,
// head) in order (attentionPasses; with enough work items, each item does
// its parts and merges them in one). Decode (T = 1) thus spreads the KV
// range over the workers; the split depends only on the op, never on the
// worker count.
// With grouped-query attention the heads of a KV head share their items
// (attentionGrouped), each head's partial keeping its bits.
func (e *exec) attention(nd *node) error {
	p := e.p
	sh := nd.attn
	nh, nkv, hd, S, tileKV, window, scale := sh.nh, sh.nkv, sh.hd, sh.S, sh.tileKV, sh.window, sh.scale
	q := e.f32(nd.args[0])
	pos, err := e.i32(nd.args[3])
	if err != nil {
		return err
	}
	var sinks []float32
	if len(nd.args) == 5 {
		sinks = e.f32(nd.args[4])
	}
	kst := e.cache(p.stOf[nd.args[1]])
	vst := e.cache(p.stOf[nd.args[2]])
	dv := vst.info.Width / nkv
	sh.dv = dv
	group := nh / nkv
	T := len(pos)
	out := e.out(nd)
	// A partial is m, l, then acc[dv].
	stride := 2 + dv
	// merge combines the S partials pp of (token, head) th into its output.
	merge := func(th int, pp []float32) {
		t, h := th/nh, th%nh
		m := math.Inf(-1)
		for s := 0; s < S; s++ {
			pr := pp[s*stride:]
			if pr[1] > 0 {
				m = math.Max(m, float64(pr[0]))
			}
		}
		var sink float64
		if sinks != nil {
			sink = float64(sinks[h])
			m = math.Max(m, sink)
		}
		o := out[t*nh*dv+h*dv : t*nh*dv+(h+1)*dv]
		clear(o)
		var l float64
		for s := 0; s < S; s++ {
			pr := pp[s*stride : (s+1)*stride]
			if pr[1] == 0 {
				continue
			}
			r := float32(math.Exp(float64(pr[0]) - m))
			l += float64(pr[1] * r)
			e.p.ks.Axpy(o, r, pr[2:])
		}
		if sinks != nil {
			l += math.Exp(sink - m)
		}
		inv := float32(1 / l)
		for d := range o {
			o[d] *= inv
		}
	}
	if !oneHeadAttention && tokenRunsAttention && hd%8 == 0 && dv%8 == 0 && e.attentionTokenRuns(sh, q, pos, kst, vst, merge) {
		return nil
	}
	if grouped := !oneHeadAttention && group > 1 && hd%8 == 0 && dv%8 == 0; grouped {
		e.attentionGrouped(sh, q, pos, kst, vst, merge)
		return nil
	}
	// item computes partial it = (t·nh + h)·S + s into pr.
	item := func(w, it int, pr []float32) {
		t, h, s := it/(nh*S), (it/S)%nh, it%S
		kh := h / group
		kbase, vbase := e.base(kst, t), e.base(vst, t)
		from, to := kvPart(int(pos[t]), window, s, S, tileKV)
		acc := pr[2:]
		clear(acc)
		m, l := negInf, float32(0)
		qv := q[t*nh*hd+h*hd : t*nh*hd+(h+1)*hd]
		buf := growF32(p.scratch[w], 2*tileKV)
		p.scratch[w] = buf
		sc, wt := buf[:tileKV], buf[tileKV:]
		for j0 := from; j0 < to; j0 += tileKV {
			j1 := min(j0+tileKV, to)
			// The tile's V rows on their way while its K rows are scored
			// (kern.Kernels.Prefetch).
			voff := vst.at(vbase, j0, kh)
			e.p.ks.Prefetch(vst.rowBytes(voff, j1-j0))
			// The tile's scores in one kernel call (rows kw apart).
			koff := kst.at(kbase, j0, kh)
			// Decode reads the cache once, from memory: the next
			// tile's K and V rows (the next part's first, which this
			// worker takes next in one pass) on their way too, a tile
			// ahead. (Llama-7B, 32 heads of 128 at depth 512: 13.5 →
			// 11.8–12.4 ms of attention a step; a prompt's items read
			// their rows from the caches, and its attention took 22%
			// longer with it. TinyLlama's grouped items, whose 11 MB of
			// cache stays in L3, were no faster.)
			if e.coldKV {
				nf, nt := j1, to
				if j1 >= to && s+1 < S {
					nf, nt = kvPart(int(pos[t]), window, s+1, S, tileKV)
				}
				if nf < nt {
					nn := min(nf+tileKV, nt) - nf
					e.p.ks.Prefetch(kst.rowBytes(kst.at(kbase, nf, kh), nn))
					e.p.ks.Prefetch(vst.rowBytes(vst.at(vbase, nf, kh), nn))
				}
			}
			m, l = e.tileOneHead(kst, vst, koff, voff, j1-j0, qv, scale, m, l, acc, sc, wt)
		}
		pr[0], pr[1] = m, l
	}
	oneHead := func(i int) (int, int) { return i, 1 }
	e.attentionPasses(sh, T, T*nh, oneHead, func(w, it int, pp []float32) { item(w, it, pp[it%S*stride:][:stride]) }, merge)
	return nil
}

// attentionPasses runs the two passes of attention over n work items of
// S parts each. Item i covers the G (token, head) pairs th0..th0+G-1 that
// heads(i) returns; item(w, i·S+s, pp) writes part s of them, head g's
// at pp[(g·S+s)·stride:], and merge(th, pp) combines (token, head) th's S
// partials pp into its output.
//
// When there are enough items to share out without the KV split (a batch
// of decode rows, a prompt), each item computes its S parts in turn into
// its worker's own buffer and merges its heads at once: one pass over the
// workers instead of two, and no buffer of T·heads·S partials (a
// 512-token chunk of TinyLlama's had 17 MB), with the same arithmetic.
// "Enough" is four items a worker, or any whole number of items a worker
// when every item has the same rows (one token: decode), so that no worker
// waits on another; a decode step of TinyLlama (4 KV heads) on two workers
// then streams each head's rows in one run instead of handing its parts
// to alternate workers. Otherwise (fewer items than that) the parts are
// shared across the workers and merged in a second pass.
func (e *exec) attentionPasses(sh attnShape, T, n int, heads func(i int) (th0, G int), item func(w, it int, pp []float32), merge func(th int, pp []float32)) {
	p := e.p
	S, stride := sh.S, 2+sh.dv
	hs := S * stride // one head's partials
	if S == 1 || n >= 4*p.pool.n || T == 1 && n%p.pool.n == 0 {
		p.runChunked(n, func(w, i int) {
			th0, G := heads(i)
			pp := growF32(p.attnPart[w], G*hs)
			p.attnPart[w] = pp
			for s := range S {
				item(w, i*S+s, pp)
			}
			for g := range G {
				merge(th0+g, pp[g*hs:(g+1)*hs])
			}
		})
		return
	}
	pairs := T * sh.nh
	p.part = growF32(p.part, pairs*hs)
	part := p.part
	p.runChunked(n*S, func(w, it int) {
		th0, G := heads(it / S)
		item(w, it, part[th0*hs:(th0+G)*hs])
	})
	p.runChunked(pairs, func(_, th int) { merge(th, part[th*hs:(th+1)*hs]) })
}

// runChunked is pool.run for many small items: they are handed out in runs
// of consecutive items, about 16 runs per worker, so that the shared item
// counter (one cache line both cores fight over) is touched a few hundred
// times per op instead of once per (token, head, KV split) — 16K times per
// layer in a 128-token prefill.
func (p *program) runChunked(n int, fn func(w, i int)) {
	per := max(1, n/(16*p.pool.n))
	p.pool.run((n+per-1)/per, func(w, c int) {
		for i := c * per; i < min(n, (c+1)*per); i++ {
			fn(w, i)
		}
	})
}

// A q8_0 cache row is blocks of q8Block values: an f16 scale d, then the
// values as int8 q (value = q·d), q8BlockBytes bytes in all (ggml's
// block_q8_0).
const (
	q8Block      = kern.Q8Block
	q8BlockBytes = kern.Q8BlockBytes
)

// q8Bytes is the byte offset of element n (a whole number of blocks) of a
// q8_0 cache.
func q8Bytes(n int) int { return n / q8Block * q8BlockBytes }

// negInf is the running maximum before a part's first tile. While it
// stands, l and acc hold 0 (no row yet) or NaN (every score so far -inf or
// NaN), and the online softmax's rescale by exp(-inf - tm) = 0 would leave
// them as they are, so a part's first tile skips it: a math.Exp and a
// multiply of dv accumulators per head. With kv_splits 4 a decode step's
// part is one or two tiles, so those were most of the rescales: TinyLlama's
// attention at depth 512 took 7% less time (48.3 against 52.2 µs a layer,
// hot, medians of 8 alternating runs).
var negInf = float32(math.Inf(-1))

// raiseMax is one tile's step of an online softmax whose running maximum
// is m, sum of weights l and weighted sum of values acc: when the tile's
// maximum tm exceeds m, it returns tm and l, with l and acc scaled by
// exp(m−tm) to stay relative to it; otherwise m and l. A part's first tile
// (m still negInf) has nothing to rescale, so it skips the exp and the pass
// over acc. (Values, not pointers: an address taken of the callers' m and l
// kept them in memory through their per-weight sums, and the one-head
// items' prefill took 1.04–1.35× as long in BenchmarkAttentionDepth.)
func raiseMax(m, l float32, acc []float32, tm float32) (float32, float32) {
	if !(tm > m) { // as the callers' test was: no change on NaN
		return m, l
	}
	if m != negInf {
		r := float32(math.Exp(float64(m - tm)))
		l *= r
		for d := range acc {
			acc[d] *= r
		}
	}
	return tm, l
}

// tileOneHead is one tile's step of a one-head work item: query qv's
// scores against the nj K rows from cache element koff into sc, the online
// softmax's step on (m, l, acc) with their weights in wt, and acc += the
// weighted V rows from element voff. It returns the new m and l.
func (e *exec) tileOneHead(kst, vst *state, koff, voff, nj int, qv []float32, scale, m, l float32, acc, sc, wt []float32) (float32, float32) {
	ks := e.p.ks
	kw, vw := kst.hw, vst.hw
	sc, wt = sc[:nj], wt[:nj]
	switch {
	case kst.f32 != nil:
		ks.Scores(qv, kst.f32[koff:], kw, sc)
	case kst.f16 != nil:
		ks.ScoresF16(qv, kst.f16[koff:], kw, sc)
	default:
		ks.ScoresQ8(qv, kst.q8[q8Bytes(koff):], q8Bytes(kw), sc)
	}
	m, l = raiseMax(m, l, acc, ks.ScaleMax(sc, scale))
	ks.ExpSub(wt, sc, m)
	for _, wgt := range wt {
		l += wgt
	}
	// acc += Σ w_j·V_j with acc held in registers (rows vw apart).
	switch {
	case vst.f32 != nil:
		ks.AxpyRows(acc, wt, vst.f32[voff:], vw)
	case vst.f16 != nil:
		ks.AxpyRowsF16(acc, wt, vst.f16[voff:], vw)
	default:
		ks.AxpyRowsQ8(acc, wt, vst.q8[q8Bytes(voff):], q8Bytes(vw))
	}
	return m, l
}

// tileGrouped is tileOneHead for G ≤ kern.GroupLanes queries at once, each
// with the bits tileOneHead gives it: query g at qv[g·qs:], its m[g] and
// l[g], its acc at acc[g·hs:g·hs+dv]; sc and wt hold GroupLanes·nj floats.
// Lanes g ≥ G must hold m[g] = 0 (their scores are 0 and weights 1).
func (e *exec) tileGrouped(kst, vst *state, koff, voff, nj int, qv []float32, qs, hd, dv, G, hs int, scale float32, m, l *[kern.GroupLanes]float32, acc, sc, wt []float32) {
	const L = kern.GroupLanes
	ks := e.p.ks
	kw, vw := kst.hw, vst.hw
	sc, wt = sc[:L*nj], wt[:L*nj]
	switch {
	case kst.f32 != nil:
		ks.ScoresG(qv, qs, hd, G, kst.f32[koff:], kw, sc)
	case kst.f16 != nil:
		ks.ScoresF16G(qv, qs, hd, G, kst.f16[koff:], kw, sc)
	default:
		ks.ScoresQ8G(qv, qs, hd, G, kst.q8[q8Bytes(koff):], q8Bytes(kw), sc)
	}
	var tm [L]float32
	ks.ScaleMax8(sc, scale, &tm)
	for g := range G {
		m[g], l[g] = raiseMax(m[g], l[g], acc[g*hs:g*hs+dv], tm[g])
	}
	ks.ExpSubSum8(wt, sc, m, l)
	switch {
	case vst.f32 != nil:
		ks.AxpyRowsG(acc, hs, dv, G, wt, vst.f32[voff:], vw)
	case vst.f16 != nil:
		ks.AxpyRowsF16G(acc, hs, dv, G, wt, vst.f16[voff:], vw)
	default:
		ks.AxpyRowsQ8G(acc, hs, dv, G, wt, vst.q8[q8Bytes(voff):], q8Bytes(vw))
	}
}

// oneHeadAttention forces the one-head work items everywhere: the tests'
// and benchmarks' reference for the grouped ones.
var oneHeadAttention bool

// tokenRunsAttention: a prompt's attention takes attentionTokenRuns' items
// where they apply (off only in benchmarks, for the grouped items' time).
var tokenRunsAttention = true

// kvPart returns the cache rows [from, to) that KV part s of S covers for a
// query at position pp: the positions it attends to (the last window of
// them when window > 0, else all up to pp) in tiles of tile rows from the
// first, the tiles cut into S near-equal runs, so that only the last part's
// last tile is short. Cut by rows instead, a decode step of TinyLlama past
// depth 512 (kv_splits 4, tiles of 128) walked each part's 129–160 rows in
// two tiles, one of them 1–32 rows long: at depth 600, 8 tiles a KV head
// where 5 do, and its attention took 68.7 µs a layer against 63.9
// (minervac bench --kernel-times, medians of three alternating runs).
func kvPart(pp, window, s, S, tile int) (from, to int) {
	lo, n := kvSpan(pp, window)
	tiles := (n + tile - 1) / tile
	return lo + tiles*s/S*tile, lo + min(n, tiles*(s+1)/S*tile) // a part before the last ends before row n
}

// kvSpan returns the first cache row a query at position pp attends to and
// how many rows it attends to: all up to pp, or its last window of them
// when window > 0.
func kvSpan(pp, window int) (lo, n int) {
	if window > 0 && pp-window+1 > 0 {
		lo = pp - window + 1
	}
	return lo, pp + 1 - lo
}

// startLanes is the running maxima of a grouped item's lanes before its
// first tile: negInf for its G lanes, 0 for the unused ones (their scores
// are 0 and weights 1).
func startLanes(G int) (m [kern.GroupLanes]float32) {
	for g := range m {
		m[g] = negInf
		if g >= G {
			m[g] = 0
		}
	}
	return m
}

// attnShape is what the attention work items share: the head shape
// (n_head, n_kv_head, head_dim; dv, the value heads' width, from the V
// cache), the KV parts and tiles of a flash attention op, its window and
// scale.
type attnShape struct {
	nh, nkv, hd, dv, S, tileKV, window int
	scale                              float32
}

// attnShapeOf reads an attention or QKV op's attributes into an attnShape
// (dv left 0): one part of 64-row tiles unless a flash attention op says
// otherwise (kv_splits, tile_kv), tiles of at most 256 rows.
func attnShapeOf(v *ir.Value) attnShape {
	a := v.Attrs
	sh := attnShape{
		nh: int(a.Int("n_head", 0)), nkv: int(a.Int("n_kv_head", 0)), hd: int(a.Int("head_dim", 0)),
		S: 1, tileKV: 64, window: int(a.Int("window", 0)), scale: float32(a.Float("scale", 1)),
	}
	if v.Op == ir.OpFlashAttention {
		sh.S = max(1, int(a.Int("kv_splits", 1)))
		sh.tileKV = max(1, int(a.Int("tile_kv", 64)))
	}
	sh.tileKV = min(sh.tileKV, 256)
	return sh
}

// attentionGrouped is attention's first pass for grouped-query attention:
// one work item per (token, KV head, run of up to
// kern.GroupLanes of its query heads, KV part) scores each tile's K rows
// for all the run's heads in one kernel call and adds its V rows likewise,
// so a row is read once per run instead of once per head. Each head keeps
// its own tiles (tileKV rows from the part's start), lanes, FMA order and
// online-softmax steps, so its partial (m, l, acc) has the bits the
// one-head items give it. (q8_0 caches run the one-head kernels head by
// head: the softmax steps are still shared.)
// The passes and the merge are attentionPasses'.
func (e *exec) attentionGrouped(sh attnShape, q []float32, pos []int32, kst, vst *state, merge func(th int, pp []float32)) {
	p := e.p
	ks := p.ks
	const L = kern.GroupLanes
	nh, hd, dv, S, tileKV := sh.nh, sh.hd, sh.dv, sh.S, sh.tileKV
	group := nh / sh.nkv
	runs := (group + L - 1) / L
	stride := 2 + dv
	T := len(pos)
	// Item i is the run i%runs of KV head (i/runs)%nkv of token
	// i/(runs·nkv): its heads are (token, head) pairs th0.. in order.
	heads := func(i int) (th0, G int) {
		r := i % runs
		return (i/runs)*group + r*L, min(L, group-r*L)
	}
	item := func(w, it int, pp []float32) {
		s := it % S
		r := (it / S) % runs
		kh := (it / (S * runs)) % sh.nkv
		t := it / (S * runs * sh.nkv)
		h0 := kh*group + r*L
		G := min(L, group-r*L)
		kbase, vbase := e.base(kst, t), e.base(vst, t)
		from, to := kvPart(int(pos[t]), sh.window, s, S, tileKV)
		// Head g's partial is pp[(g·S + s)·stride:], hs floats after
		// head g-1's.
		hs := S * stride
		pr := pp[s*stride:]
		acc := pr[2:]
		for g := range G {
			clear(acc[g*hs : g*hs+dv])
		}
		m, l := startLanes(G), [L]float32{}
		qv := q[t*nh*hd+h0*hd : t*nh*hd+(h0+G)*hd]
		buf := growF32(p.scratch[w], 2*L*tileKV)
		p.scratch[w] = buf
		sc, wt := buf[:L*tileKV], buf[L*tileKV:]
		for j0 := from; j0 < to; j0 += tileKV {
			nj := min(j0+tileKV, to) - j0
			voff := vst.at(vbase, j0, kh)
			if vst.q8 != nil { // the grouped f16 and f32 kernels prefetch their own rows
				ks.Prefetch(vst.rowBytes(voff, nj)) // as in the one-head items
			}
			e.tileGrouped(kst, vst, kst.at(kbase, j0, kh), voff, nj, qv, hd, hd, dv, G, hs, sh.scale, &m, &l, acc, sc, wt)
		}
		for g := range G {
			pr[g*hs], pr[g*hs+1] = m[g], l[g]
		}
	}
	e.attentionPasses(sh, T, T*sh.nkv*runs, heads, item, merge)
}

// rowBytes is the memory of n rows of one head from element off (state.at):
// n·hw elements, one head's rows being consecutive.
func (s *state) rowBytes(off, n int) []byte {
	switch {
	case s.f32 != nil:
		return asBytes(s.f32[off : off+n*s.hw])
	case s.f16 != nil:
		return asBytes(s.f16[off : off+n*s.hw])
	}
	return s.q8[q8Bytes(off):q8Bytes(off+n*s.hw)]
}

// attentionTokenRuns is attention's first pass and merge for a prompt
// whose KV heads serve at most half of kern.GroupLanes query heads each
// (Llama-2 7B and Phi-3 one, Llama-3 8B and Mistral four): one work item
// per (KV head, run of up to GroupLanes/group consecutive tokens) walks
// the KV head's tiles for every query head of the group and token of the
// run at once with the grouped kernels (tileGrouped, lane g serving token
// g/group's head g%group), each K and V row read and widened once per run
// instead of once per token (or per group's heads: attentionGrouped, which
// leaves lanes idle). A run's tokens share their slot and their tiles:
// kvPart cuts the same parts and tiles for them (same first row, same tile
// count), all but the last tile, which ends at each token's own row and is
// walked lane by lane (tileOneHead). Each (token, head)'s partials, and so
// its output, have the bits the one-head items give it. It reports false,
// and does nothing, where no run holds two tokens (decode) or there are
// too few items to share out (see attentionPasses).
func (e *exec) attentionTokenRuns(sh attnShape, q []float32, pos []int32, kst, vst *state, merge func(th int, pp []float32)) bool {
	p := e.p
	const L = kern.GroupLanes
	nh, hd, dv, S, tileKV := sh.nh, sh.hd, sh.dv, sh.S, sh.tileKV
	group := nh / sh.nkv
	per := L / group // tokens per run
	T := len(pos)
	if per < 2 || T < 2 {
		return false
	}
	// geometry is what a run's tokens share: slot row, first row and tile
	// count of the rows they attend to (kvPart).
	geometry := func(t int) [3]int {
		lo, n := kvSpan(int(pos[t]), sh.window)
		return [3]int{e.slots[t], lo, (n + tileKV - 1) / tileKV}
	}
	runs := append(p.tokenRuns[:0], 0)
	for t := 1; t < T; t++ {
		if t-runs[len(runs)-1] == per || geometry(t) != geometry(t-1) {
			runs = append(runs, t)
		}
	}
	runs = append(runs, T)
	p.tokenRuns = runs
	nr := len(runs) - 1
	if nr == T || nr*sh.nkv < 4*p.pool.n {
		return false
	}
	stride := 2 + dv
	hs := S * stride // one lane's partials
	// Item i is run i%nr of KV head i/nr: a KV head's runs in turn, so
	// that its rows stay in the caches from one item to the next.
	p.runChunked(nr*sh.nkv, func(w, i int) {
		kh, r := i/nr, i%nr
		t0, nt := runs[r], runs[r+1]-runs[r]
		G := nt * group
		// Lane g is (token t0+g/group, head kh·group+g%group); th(g)
		// names it to merge.
		th := func(g int) int { return (t0+g/group)*nh + kh*group + g%group }
		pp := growF32(p.attnPart[w], G*hs)
		p.attnPart[w] = pp
		buf := growF32(p.scratch[w], 2*L*tileKV+L*hd)
		p.scratch[w] = buf
		sc, wt, qv := buf[:L*tileKV], buf[L*tileKV:2*L*tileKV], buf[2*L*tileKV:][:G*hd]
		for g := range G {
			copy(qv[g*hd:(g+1)*hd], q[th(g)*hd:])
		}
		kbase, vbase := e.base(kst, t0), e.base(vst, t0)
		for s := range S {
			pr := pp[s*stride:]
			acc := pr[2:]
			m, l := startLanes(G), [L]float32{}
			for g := range G {
				clear(acc[g*hs : g*hs+dv])
			}
			// The run's tokens differ only in where their last tile
			// ends: from first to last.
			var from int
			var ends [L]int
			for t := range nt {
				from, ends[t] = kvPart(int(pos[t0+t]), sh.window, s, S, tileKV)
			}
			first, last := slices.Min(ends[:nt]), slices.Max(ends[:nt])
			for j0 := from; j0 < last; j0 += tileKV {
				nj := min(j0+tileKV, last) - j0
				voff, koff := vst.at(vbase, j0, kh), kst.at(kbase, j0, kh)
				if vst.q8 != nil { // as in attentionGrouped
					p.ks.Prefetch(vst.rowBytes(voff, nj))
				}
				if j0+nj <= first {
					e.tileGrouped(kst, vst, koff, voff, nj, qv, hd, hd, dv, G, hs, sh.scale, &m, &l, acc, sc, wt)
					continue
				}
				// The last tile, token by token: its group's lanes in
				// lanes 0.. of a call of their own (one head a token:
				// the one-head kernels, whose bits are the same).
				for t, end := range ends[:nt] {
					g0 := t * group
					if group == 1 {
						m[t], l[t] = e.tileOneHead(kst, vst, koff, voff, end-j0, qv[t*hd:(t+1)*hd], sh.scale, m[t], l[t], acc[t*hs:t*hs+dv], sc, wt)
						continue
					}
					var tm, tl [L]float32 // unused lanes: m = 0
					copy(tm[:group], m[g0:])
					copy(tl[:group], l[g0:])
					e.tileGrouped(kst, vst, koff, voff, end-j0, qv[g0*hd:], hd, hd, dv, group, hs, sh.scale, &tm, &tl, acc[g0*hs:], sc, wt)
					copy(m[g0:g0+group], tm[:group])
					copy(l[g0:g0+group], tl[:group])
				}
			}
			for g := range G {
				pr[g*hs], pr[g*hs+1] = m[g], l[g]
			}
		}
		for g := range G {
			merge(th(g), pp[g*hs:(g+1)*hs])
		}
	})
	return true
}
