package eval

import (
	"math"

	"github.com/minerva-llm/minerva/ir"
)

// rope rotates pairs of each head's first n_rot dims by position-dependent
// angles θ_i = pos · freq_scale · base^(−2i/n_rot). In "normal" mode (GGUF's
// llama layout) the pairs are adjacent (2i, 2i+1); in "neox" mode they are
// (i, i+n_rot/2). YaRN (ext_factor ≠ 0) blends interpolated and extrapolated
// angles per dimension and scales magnitudes, following ggml's rope_yarn.
func rope(v *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
	x, pos := args[0], args[1]
	a := v.Attrs
	hd := int(a.Int("head_dim", 0))
	nrot := int(a.Int("n_rot", 0))
	base := a.Float("base", 10000)
	freqScale := a.Float("freq_scale", 1)
	extFactor := a.Float("ext_factor", 0)
	attnFactor := a.Float("attn_factor", 1)
	neox := a.Str("mode", "normal") == "neox"
	var corr [2]float64
	if extFactor != 0 {
		corr = yarnCorrDims(nrot, a.Int("orig_ctx", 0), base, a.Float("beta_fast", 32), a.Float("beta_slow", 1))
	}
	out := newF32(shape)
	copy(out.F32, x.F32)
	width := int(x.Shape[1])
	for t, p := range pos.I32 {
		for h := 0; h < width/hd; h++ {
			row := out.F32[t*width+h*hd : t*width+(h+1)*hd]
			for i := 0; i < nrot/2; i++ {
				thetaExtrap := float64(p) * math.Pow(base, -2*float64(i)/float64(nrot))
				theta := freqScale * thetaExtrap
				mscale := attnFactor
				if extFactor != 0 {
					mix := yarnRamp(corr[0], corr[1], 2*i) * extFactor
					theta = theta*(1-mix) + thetaExtrap*mix
					mscale *= 1 + 0.1*math.Log(1/freqScale)
				}
				c, s := math.Cos(theta)*mscale, math.Sin(theta)*mscale
				j0, j1 := 2*i, 2*i+1
				if neox {
					j0, j1 = i, i+nrot/2
				}
				x0, x1 := float64(row[j0]), float64(row[j1])
				row[j0] = float32(x0*c - x1*s)
				row[j1] = float32(x0*s + x1*c)
			}
		}
	}
	return out, nil
}

// yarnCorrDims returns the range of rotary dims that YaRN ramps between
// interpolation and extrapolation (ggml_rope_yarn_corr_dims).
func yarnCorrDims(nDims int, origCtx int64, base, betaFast, betaSlow float64) [2]float64 {
	corrDim := func(nRot float64) float64 {
		return float64(nDims) * math.Log(float64(origCtx)/(nRot*2*math.Pi)) / (2 * math.Log(base))
	}
	start := math.Floor(corrDim(betaFast))
	end := math.Ceil(corrDim(betaSlow))
	return [2]float64{math.Max(0, start), math.Min(float64(nDims-1), end)}
}

// yarnRamp is 1 below low, 0 above high, linear between (ggml rope_yarn_ramp).
func yarnRamp(low, high float64, i0 int) float64 {
	y := (float64(i0)/2 - low) / math.Max(0.001, high-low)
	return 1 - math.Min(1, math.Max(0, y))
}
