package eval

import (
	"math"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/rope"
)

// ropeOp rotates pairs of each head's first n_rot dims by position-dependent
// angles θ_i = pos · freq_scale · base^(−2i/n_rot). In "normal" mode (GGUF's
// llama layout) the pairs are adjacent (2i, 2i+1); in "neox" mode they are
// (i, i+n_rot/2). YaRN (ext_factor ≠ 0) blends interpolated and extrapolated
// angles per dimension and scales magnitudes, following ggml's rope_yarn
// (ir/rope holds the numerics).
func ropeOp(v *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
	x, pos := args[0], args[1]
	hd := int(v.Attrs.Int("head_dim", 0))
	rp, err := rope.FromAttrs(v.Attrs)
	if err != nil {
		return Tensor{}, err
	}
	mscale := rp.MScale()
	out := newF32(shape)
	copy(out.F32, x.F32)
	width := int(x.Shape[1])
	for t, p := range pos.I32 {
		for h := 0; h < width/hd; h++ {
			row := out.F32[t*width+h*hd : t*width+(h+1)*hd]
			for i := 0; i < rp.NRot/2; i++ {
				theta := rp.Theta(p, i)
				c, s := math.Cos(theta)*mscale, math.Sin(theta)*mscale
				j0, j1 := rp.Pair(i)
				x0, x1 := float64(row[j0]), float64(row[j1])
				row[j0] = float32(x0*c - x1*s)
				row[j1] = float32(x0*s + x1*c)
			}
		}
	}
	return out, nil
}
