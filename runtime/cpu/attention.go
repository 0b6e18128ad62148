package cpu

import (
	"math"

	"github.com/minerva-llm/minerva/ir"
)

// attention computes (flash) attention over the slot's cache rows. Every
// (token, head) pair's visible KV range is cut into S parts (flash
// attention's kv_splits; 1 for plain attention); each (token, head, part) is
// one work item walking its rows in tiles with an online softmax and keeping
// a partial (m, l, acc). A second pass merges the parts of each (token,
// head) in order. Decode (T = 1) thus spreads the KV range over the
// workers; the split depends only on the op, never on the worker count.
func (e *exec) attention(nd *node) error {
	p := e.p
	v := nd.v
	a := v.Attrs
	nh, nkv, hd := int(a.Int("n_head", 0)), int(a.Int("n_kv_head", 0)), int(a.Int("head_dim", 0))
	window := int(a.Int("window", 0))
	scale := float32(a.Float("scale", 1))
	S := 1
	tileKV := 64
	if v.Op == ir.OpFlashAttention {
		S = max(1, int(a.Int("kv_splits", 1)))
		tileKV = max(1, int(a.Int("tile_kv", 64)))
	}
	tileKV = min(tileKV, 256)
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
	kw, vw := kst.info.Width, vst.info.Width
	dv := vw / nkv
	group := nh / nkv
	T := len(pos)
	out := e.out(nd)
	items := T * nh * S
	// partials: per item m, l, then acc[dv]
	stride := 2 + dv
	p.part = growF32(p.part, items*stride)
	part := p.part
	tab := f16Tab()
	p.runChunked(items, func(w, it int) {
		t, h, s := it/(nh*S), (it/S)%nh, it%S
		kh := h / group
		kbase, vbase := e.base(kst, t), e.base(vst, t)
		pp := int(pos[t])
		lo := 0
		if window > 0 && pp-window+1 > lo {
			lo = pp - window + 1
		}
		n := pp + 1 - lo
		from, to := lo+n*s/S, lo+n*(s+1)/S
		pr := part[it*stride : (it+1)*stride]
		acc := pr[2:]
		clear(acc)
		m, l := float32(math.Inf(-1)), float32(0)
		qv := q[t*nh*hd+h*hd : t*nh*hd+(h+1)*hd]
		buf := growF32(p.scratch[w], 2*tileKV)
		p.scratch[w] = buf
		sc, wt := buf[:tileKV], buf[tileKV:]
		for j0 := from; j0 < to; j0 += tileKV {
			j1 := min(j0+tileKV, to)
			tm := float32(math.Inf(-1))
			if kst.f32 != nil {
				// The tile's scores in one kernel call (rows kw apart).
				e.p.ks.Scores(qv, kst.f32[kbase+j0*kw+kh*hd:], kw, sc[:j1-j0])
				for j := range sc[:j1-j0] {
					sc[j] *= scale
					tm = max(tm, sc[j])
				}
			} else {
				for j := j0; j < j1; j++ {
					off := kbase + j*kw + kh*hd
					var d float32
					if kst.f16 != nil {
						d = dotF16(qv, kst.f16[off:off+hd], tab) * scale
					} else {
						d = dotQ8(qv, kst.q8[off/q8Block*q8BlockBytes:], tab) * scale
					}
					sc[j-j0] = d
					tm = max(tm, d)
				}
			}
			if tm > m {
				r := float32(math.Exp(float64(m - tm)))
				l *= r
				for d := range acc {
					acc[d] *= r
				}
				m = tm
			}
			e.p.ks.ExpSub(wt[:j1-j0], sc[:j1-j0], m)
			for _, wgt := range wt[:j1-j0] {
				l += wgt
			}
			if vst.f32 != nil {
				// acc += Σ w_j·V_j with acc held in registers (rows vw apart).
				e.p.ks.AxpyRows(acc, wt[:j1-j0], vst.f32[vbase+j0*vw+kh*dv:], vw)
			} else {
				for j := j0; j < j1; j++ {
					off := vbase + j*vw + kh*dv
					if vst.f16 != nil {
						axpyF16(acc, wt[j-j0], vst.f16[off:off+dv], tab)
					} else {
						axpyQ8(acc, wt[j-j0], vst.q8[off/q8Block*q8BlockBytes:], tab)
					}
				}
			}
		}
		pr[0], pr[1] = m, l
	})
	p.runChunked(T*nh, func(_, th int) {
		t, h := th/nh, th%nh
		m := math.Inf(-1)
		for s := 0; s < S; s++ {
			pr := part[(th*S+s)*stride:]
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
			pr := part[(th*S+s)*stride : (th*S+s+1)*stride]
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
	})
	return nil
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

func dotF16(a []float32, b []uint16, tab []float32) float32 {
	b = b[:len(a)]
	var s0, s1 float32
	i := 0
	for ; i+2 <= len(a); i += 2 {
		s0 += a[i] * tab[b[i]]
		s1 += a[i+1] * tab[b[i+1]]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * tab[b[i]]
	}
	return s0 + s1
}

func axpyF16(dst []float32, a float32, x []uint16, tab []float32) {
	x = x[:len(dst)]
	for i := range dst {
		dst[i] += a * tab[x[i]]
	}
}

// A q8_0 cache row is blocks of q8Block values: an f16 scale d, then the
// values as int8 q (value = q·d), q8BlockBytes bytes in all (ggml's
// block_q8_0).
const (
	q8Block      = 32
	q8BlockBytes = 34
)

// dotQ8 is the dot of a with the q8_0 blocks at b (len(a) values): per
// block d·Σ a_i·q_i, the sums in float32 in order.
func dotQ8(a []float32, b []byte, tab []float32) float32 {
	var s float32
	for i := 0; i < len(a); i += q8Block {
		blk := b[i/q8Block*q8BlockBytes:][:q8BlockBytes]
		d := tab[uint16(blk[0])|uint16(blk[1])<<8]
		x := a[i : i+q8Block]
		var bs0, bs1 float32
		for j := 0; j < q8Block; j += 2 {
			bs0 += x[j] * float32(int8(blk[2+j]))
			bs1 += x[j+1] * float32(int8(blk[3+j]))
		}
		s += d * (bs0 + bs1)
	}
	return s
}

// axpyQ8 adds a times the q8_0 blocks at x (len(dst) values) to dst.
func axpyQ8(dst []float32, a float32, x []byte, tab []float32) {
	for i := 0; i < len(dst); i += q8Block {
		blk := x[i/q8Block*q8BlockBytes:][:q8BlockBytes]
		ad := a * tab[uint16(blk[0])|uint16(blk[1])<<8]
		o := dst[i : i+q8Block]
		for j := range o {
			o[j] += ad * float32(int8(blk[2+j]))
		}
	}
}
