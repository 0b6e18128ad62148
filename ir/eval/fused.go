package eval

import (
	"math"

	"github.com/minerva-llm/minerva/ir"
)

// The fused ops are evaluated by composing the unfused kernels, so their
// meaning is exactly the unfused graph's; flash attention is the exception:
// it runs the tiled online-softmax algorithm itself, so that tests check
// the algorithm the backends implement and not merely its definition.

// registerFused adds the fused kernels to the table (called from the
// table's own init, so the map exists).
func registerFused() {
	for op, k := range products {
		kernels[op] = k(false)
		roundedProducts[op] = k(true)
	}
	kernels[ir.OpFlashAttention] = flashAttention
	kernels[ir.OpConcat] = concat
}

// tensorOf returns the operand tensor that belongs to operand value pv.
func tensorOf(v *ir.Value, args []Tensor, pv *ir.Value) Tensor {
	for i, a := range v.Args {
		if a == pv {
			return args[i]
		}
	}
	return Tensor{}
}

// products are the matrix-product kernels, each made with or without
// rounding its activation rows to Q8_0 (roundQ8) before the product.
var products = map[ir.Op]func(round bool) kernel{
	ir.OpMatMul:      matmulOp,
	ir.OpFusedMatMul: fusedMatMul,
	ir.OpSwiGLU:      swiglu,
	ir.OpQKVRoPE:     qkvRoPE,
}

// roundedProducts are products' kernels that round (Machine.RoundActivations).
var roundedProducts = map[ir.Op]kernel{}

// body runs the shared prologue and matmul: norm?(x)·wᵀ (+ bias), with the
// normalised rows rounded to Q8_0 first when round is set.
func body(v *ir.Value, args []Tensor, p ir.Parts, round bool) (Tensor, error) {
	x := tensorOf(v, args, p.X)
	if p.Norm {
		nargs := []Tensor{x}
		if p.Gain != nil {
			nargs = append(nargs, tensorOf(v, args, p.Gain))
		}
		var err error
		if x, err = rmsnorm(v, nargs, x.Shape); err != nil {
			return Tensor{}, err
		}
	}
	if round {
		var err error
		if x, err = roundQ8(x); err != nil {
			return Tensor{}, err
		}
	}
	w := tensorOf(v, args, p.W)
	margs := []Tensor{x, w}
	if p.Bias != nil {
		margs = append(margs, tensorOf(v, args, p.Bias))
	}
	shape := append(append([]int64{}, x.Shape[:len(x.Shape)-1]...), w.Shape[0])
	return matmul(v, margs, shape)
}

func fusedMatMul(round bool) kernel {
	return func(v *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
		p, err := ir.MatMulParts(v)
		if err != nil {
			return Tensor{}, err
		}
		h, err := body(v, args, p, round)
		if err != nil || p.Residual == nil {
			return h, err
		}
		r := tensorOf(v, args, p.Residual)
		for i := range h.F32 {
			h.F32[i] += r.F32[i]
		}
		return h, nil
	}
}

func swiglu(round bool) kernel {
	return func(v *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
		p, err := ir.MatMulParts(v)
		if err != nil {
			return Tensor{}, err
		}
		h, err := body(v, args, p, round)
		if err != nil {
			return Tensor{}, err
		}
		out := newF32(shape)
		r, f := rows(out)
		for i := 0; i < r; i++ {
			gate, up := h.F32[i*2*f:i*2*f+f], h.F32[i*2*f+f:(i+1)*2*f]
			for j := range gate {
				// The same two roundings as silu then mul in the unfused graph.
				out.F32[i*f+j] = float32(silu(float64(gate[j]))) * up[j]
			}
		}
		return out, nil
	}
}

// columns copies columns [lo, hi) of a [T, W] tensor.
func columns(t Tensor, lo, hi int) Tensor {
	r, w := rows(t)
	out := newF32([]int64{int64(r), int64(hi - lo)})
	for i := 0; i < r; i++ {
		copy(out.F32[i*(hi-lo):(i+1)*(hi-lo)], t.F32[i*w+lo:i*w+hi])
	}
	return out
}

func qkvRoPE(round bool) kernel {
	return func(v *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
		p, err := ir.MatMulParts(v)
		if err != nil {
			return Tensor{}, err
		}
		h, err := body(v, args, p, round)
		if err != nil {
			return Tensor{}, err
		}
		qd := int(v.Attrs.Int("n_head", 0) * v.Attrs.Int("head_dim", 0))
		kvd := int(v.Attrs.Int("n_kv_head", 0) * v.Attrs.Int("head_dim", 0))
		pos := tensorOf(v, args, p.Pos)
		qc, kc := columns(h, 0, qd), columns(h, qd, qd+kvd)
		if p.QNorm != nil {
			hd := v.Attrs.Int("head_dim", 0)
			if qc, err = headNorm(qc, hd, tensorOf(v, args, p.QNorm), p.QKEps); err != nil {
				return Tensor{}, err
			}
			if kc, err = headNorm(kc, hd, tensorOf(v, args, p.KNorm), p.QKEps); err != nil {
				return Tensor{}, err
			}
		}
		q, err := ropeOp(v, []Tensor{qc, pos}, shape)
		if err != nil {
			return Tensor{}, err
		}
		k, err := ropeOp(v, []Tensor{kc, pos}, kc.Shape)
		if err != nil {
			return Tensor{}, err
		}
		// kvwrite rounds into an f16 or q8_0 cache by the cache value's dtype.
		write := func(cache *ir.Value, rows Tensor) error {
			kw := &ir.Value{Op: ir.OpKVWrite, Args: []*ir.Value{cache}}
			_, err := kvwrite(kw, []Tensor{tensorOf(v, args, cache), rows, pos}, nil)
			return err
		}
		if err := write(p.KCache, k); err != nil {
			return Tensor{}, err
		}
		if err := write(p.VCache, columns(h, qd+kvd, qd+2*kvd)); err != nil {
			return Tensor{}, err
		}
		return q, nil
	}
}

// headNorm is rmsnorm over each head of the [T, heads·hd] rows x, times
// gain [hd]: the unfused graph's reshape → rmsnorm → reshape, with the same
// steps.
func headNorm(x Tensor, hd int64, gain Tensor, eps float64) (Tensor, error) {
	n := &ir.Value{Op: ir.OpRMSNorm, Attrs: ir.Attrs{"eps": eps}}
	shape := []int64{int64(len(x.F32)) / hd, hd}
	out, err := rmsnorm(n, []Tensor{{Shape: shape, F32: x.F32}, gain}, shape)
	if err != nil {
		return Tensor{}, err
	}
	out.Shape = x.Shape
	return out, nil
}

func concat(_ *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
	out := Tensor{Shape: shape}
	for _, a := range args {
		out.F32 = append(out.F32, a.F32...)
	}
	return out, nil
}

// flashAttention computes attention the way tiled kernels do. The visible
// KV range of each query is cut into kv_splits contiguous parts (decode
// spreads them over workers); each part is walked in tiles of tile_kv rows
// keeping a running maximum m, a running denominator l and an unnormalised
// accumulator, rescaled whenever m grows (online softmax). The partial
// results are then merged with the same rescaling. Queries are processed in
// blocks of tile_q, which only changes the order of work.
func flashAttention(v *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
	q, k, val, pos := args[0], args[1], args[2], args[3]
	a := v.Attrs
	nh, nkv, hd := int(a.Int("n_head", 0)), int(a.Int("n_kv_head", 0)), int(a.Int("head_dim", 0))
	window := int(a.Int("window", 0))
	scale := a.Float("scale", 1)
	tileQ, tileKV, splits := int(a.Int("tile_q", 1)), int(a.Int("tile_kv", 1)), int(a.Int("kv_splits", 1))
	dv := int(val.Shape[1]) / nkv
	kw, vw := int(k.Shape[1]), int(val.Shape[1])
	group := nh / nkv
	out := newF32(shape)
	T := len(pos.I32)
	if err := checkPositions(pos, int(k.Shape[0])); err != nil {
		return Tensor{}, err
	}
	type partial struct {
		m, l float64
		acc  []float64
	}
	for t0 := 0; t0 < T; t0 += tileQ {
		for t := t0; t < min(t0+tileQ, T); t++ {
			p := int(pos.I32[t])
			lo := 0
			if window > 0 && p-window+1 > lo {
				lo = p - window + 1
			}
			n := p + 1 - lo
			for h := 0; h < nh; h++ {
				kh := h / group
				qv := q.F32[t*nh*hd+h*hd : t*nh*hd+(h+1)*hd]
				parts := make([]partial, 0, splits)
				for s := 0; s < splits; s++ {
					from, to := lo+n*s/splits, lo+n*(s+1)/splits
					pt := partial{m: math.Inf(-1), acc: make([]float64, dv)}
					for j0 := from; j0 < to; j0 += tileKV {
						for j := j0; j < min(j0+tileKV, to); j++ {
							kr := k.F32[j*kw+kh*hd : j*kw+(kh+1)*hd]
							var dot float64
							for i, e := range qv {
								dot += float64(e) * float64(kr[i])
							}
							sc := dot * scale
							if sc > pt.m {
								r := math.Exp(pt.m - sc)
								pt.l *= r
								for d := range pt.acc {
									pt.acc[d] *= r
								}
								pt.m = sc
							}
							w := math.Exp(sc - pt.m)
							pt.l += w
							vr := val.F32[j*vw+kh*dv : j*vw+(kh+1)*dv]
							for d := range pt.acc {
								pt.acc[d] += w * float64(vr[d])
							}
						}
					}
					parts = append(parts, pt)
				}
				// Merge the partial results; a sink joins as one more part
				// with no value row.
				m := math.Inf(-1)
				for _, pt := range parts {
					m = math.Max(m, pt.m)
				}
				var sink float64
				if len(args) == 5 {
					sink = float64(args[4].F32[h])
					m = math.Max(m, sink)
				}
				var l float64
				acc := make([]float64, dv)
				for _, pt := range parts {
					if pt.l == 0 {
						continue
					}
					r := math.Exp(pt.m - m)
					l += pt.l * r
					for d := range acc {
						acc[d] += pt.acc[d] * r
					}
				}
				if len(args) == 5 {
					l += math.Exp(sink - m)
				}
				o := out.F32[t*nh*dv+h*dv : t*nh*dv+(h+1)*dv]
				for d := range acc {
					o[d] = float32(acc[d] / l)
				}
			}
		}
	}
	return out, nil
}
