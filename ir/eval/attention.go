package eval

import (
	"fmt"
	"math"

	"github.com/minerva-llm/minerva/ir"
)

// attention computes softmax(scale·q·kᵀ)·v per head over the visible cache
// rows, with GQA head sharing, an optional sliding window and optional sinks.
func attention(v *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
	q, k, val, pos := args[0], args[1], args[2], args[3]
	nh := int(v.Attrs.Int("n_head", 0))
	nkv := int(v.Attrs.Int("n_kv_head", 0))
	hd := int(v.Attrs.Int("head_dim", 0))
	window := int(v.Attrs.Int("window", 0))
	scale := v.Attrs.Float("scale", 1)
	dv := int(val.Shape[1]) / nkv
	kw, vw := int(k.Shape[1]), int(val.Shape[1])
	group := nh / nkv
	out := newF32(shape)
	T := len(pos.I32)
	if err := checkPositions(pos, int(k.Shape[0])); err != nil {
		return Tensor{}, err
	}
	var scores []float64
	for t := 0; t < T; t++ {
		p := int(pos.I32[t])
		lo := 0
		if window > 0 && p-window+1 > lo {
			lo = p - window + 1
		}
		for h := 0; h < nh; h++ {
			kh := h / group
			qv := q.F32[t*nh*hd+h*hd : t*nh*hd+(h+1)*hd]
			scores = scores[:0]
			m := math.Inf(-1)
			for j := lo; j <= p; j++ {
				kr := k.F32[j*kw+kh*hd : j*kw+(kh+1)*hd]
				var dot float64
				for i, e := range qv {
					dot += float64(e) * float64(kr[i])
				}
				s := dot * scale
				scores = append(scores, s)
				m = math.Max(m, s)
			}
			var sink float64
			if len(args) == 5 {
				sink = float64(args[4].F32[h])
				m = math.Max(m, sink)
			}
			var sum float64
			for i, s := range scores {
				scores[i] = math.Exp(s - m)
				sum += scores[i]
			}
			if len(args) == 5 {
				sum += math.Exp(sink - m)
			}
			o := out.F32[t*nh*dv+h*dv : t*nh*dv+(h+1)*dv]
			acc := make([]float64, dv)
			for i, w := range scores {
				vr := val.F32[(lo+i)*vw+kh*dv : (lo+i)*vw+(kh+1)*dv]
				for d := range acc {
					acc[d] += w * float64(vr[d])
				}
			}
			for d := range acc {
				o[d] = float32(acc[d] / sum)
			}
		}
	}
	return out, nil
}

// checkPositions rejects query positions outside a c-row cache: a query sees
// rows ≤ its position, so any other position has no meaning.
func checkPositions(pos Tensor, c int) error {
	for t, p := range pos.I32 {
		if p < 0 || int(p) >= c {
			return fmt.Errorf("query position %d at row %d is outside the KV cache (context %d)", p, t, c)
		}
	}
	return nil
}
