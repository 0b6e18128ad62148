package eval

import (
	"fmt"
	"math"
	"sort"

	"github.com/minerva-llm/minerva/ir"
)

// registerMoE adds the mixture-of-experts kernels to the table (called from
// the table's own init, so the map exists).
func registerMoE() {
	kernels[ir.OpTopKSoftmax] = topkSoftmax
	kernels[ir.OpMoE] = moe
}

// topkSoftmax keeps, per row, the k largest logits (lower index first on
// equal logits) and replaces them by their softmax; the rest become 0.
func topkSoftmax(v *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
	x := args[0]
	k := int(v.Attrs.Int("k", 0))
	out := newF32(shape)
	r, w := rows(x)
	if k <= 0 || k > w {
		return Tensor{}, fmt.Errorf("k = %d is outside 1..%d", k, w)
	}
	idx := make([]int, w)
	for i := 0; i < r; i++ {
		row := x.F32[i*w : (i+1)*w]
		for j := range idx {
			idx[j] = j
		}
		sort.SliceStable(idx, func(a, b int) bool { return row[idx[a]] > row[idx[b]] })
		top := idx[:k]
		m := float64(row[top[0]])
		var sum float64
		for _, j := range top {
			sum += math.Exp(float64(row[j]) - m)
		}
		o := out.F32[i*w : (i+1)*w]
		for _, j := range top {
			o[j] = float32(math.Exp(float64(row[j])-m) / sum)
		}
	}
	return out, nil
}

// moe runs, for every token, the experts its route row selects (non-zero
// weights) and sums their outputs scaled by the weights. Every matmul result
// is rounded to float32, as the unfused ops would store it; the weighted sum
// is accumulated in float64.
func moe(v *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
	x, route, gate, up, down := args[0], args[1], args[2], args[3], args[4]
	var bg, bu, bd []float32
	if len(args) == 8 {
		bg, bu, bd = args[5].F32, args[6].F32, args[7].F32
	}
	act, err := moeAct(v.Attrs)
	if err != nil {
		return Tensor{}, err
	}
	T, D := int(x.Shape[0]), int(x.Shape[1])
	E, F := int(gate.Shape[0]), int(gate.Shape[1])
	out := newF32(shape)
	g, u, a := make([]float32, F), make([]float32, F), make([]float32, F)
	acc, y := make([]float64, D), make([]float32, D)
	for t := 0; t < T; t++ {
		xr := x.F32[t*D : (t+1)*D]
		clear(acc)
		for e := 0; e < E; e++ {
			wt := route.F32[t*E+e]
			if wt == 0 {
				continue
			}
			matvec(g, gate.F32[e*F*D:(e+1)*F*D], xr, sub(bg, e, F))
			matvec(u, up.F32[e*F*D:(e+1)*F*D], xr, sub(bu, e, F))
			for i := range a {
				a[i] = float32(act(float64(g[i]), float64(u[i])))
			}
			matvec(y, down.F32[e*D*F:(e+1)*D*F], a, sub(bd, e, D))
			for i, yi := range y {
				acc[i] += float64(wt) * float64(yi)
			}
		}
		for i, s := range acc {
			out.F32[t*D+i] = float32(s)
		}
	}
	return out, nil
}

// sub returns expert e's n-element slice of a bias, or nil without biases.
func sub(b []float32, e, n int) []float32 {
	if b == nil {
		return nil
	}
	return b[e*n : (e+1)*n]
}

// matvec sets out = w·x (+ bias) for a row-major w[len(out), len(x)],
// accumulating in float64.
func matvec(out, w, x, bias []float32) {
	k := len(x)
	for j := range out {
		wr := w[j*k : (j+1)*k]
		var s float64
		for i, e := range x {
			s += float64(e) * float64(wr[i])
		}
		if bias != nil {
			s += float64(bias[j])
		}
		out[j] = float32(s)
	}
}

// moeAct returns the gated activation act(gate, up) the attributes name.
func moeAct(a ir.Attrs) (func(g, u float64) float64, error) {
	switch act := a.Str("act", ""); act {
	case ir.MoEActSiLU:
		return func(g, u float64) float64 { return silu(g) * u }, nil
	case ir.MoEActSwiGLUOAI:
		alpha, limit := a.Float("alpha", 0), a.Float("limit", 0)
		return func(g, u float64) float64 {
			g = math.Min(g, limit)
			u = math.Max(-limit, math.Min(u, limit))
			return g / (1 + math.Exp(-alpha*g)) * (u + 1)
		}, nil
	default:
		return nil, fmt.Errorf("unknown moe activation %q", act)
	}
}
