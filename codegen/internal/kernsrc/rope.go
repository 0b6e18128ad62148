package kernsrc

import (
	"fmt"
	"math"

	"github.com/minerva-llm/minerva/ir"
)

// RopeFreqs returns the per-pair rotation frequencies of a qkv_rope's
// attributes (n_rot, base, freq_scale and, for YaRN, ext_factor, orig_ctx,
// beta_fast, beta_slow) as (hi, lo) float literal pairs, hi + lo being the
// float64 frequency to about 2^-48, so that a kernel's pos·θ keeps float64
// accuracy; and the magnitude scale the rotation multiplies by
// (attn_factor, times 1 + 0.1·ln(1/freq_scale) under YaRN).
//
// YaRN (ext_factor ≠ 0, ggml's rope_yarn as in ir/eval) blends, per
// dimension pair, the interpolated angle freq_scale·θ and the extrapolated
// θ by a ramp over the correction dims; both are pos times a constant, so
// the blend is one more per-pair frequency.
func RopeFreqs(a ir.Attrs) (freqs [][2]string, mscale float64, err error) {
	nrot := a.Int("n_rot", 0)
	base, fs := a.Float("base", 10000), a.Float("freq_scale", 1)
	ext := a.Float("ext_factor", 0)
	mscale = a.Float("attn_factor", 1)
	var corr [2]float64
	if ext != 0 {
		if fs <= 0 {
			return nil, 0, fmt.Errorf("YaRN needs a positive freq_scale, got %v", fs)
		}
		corr = YarnCorrDims(nrot, a.Int("orig_ctx", 0), base, a.Float("beta_fast", 32), a.Float("beta_slow", 1))
		mscale *= 1 + 0.1*math.Log(1/fs)
	}
	for i := int64(0); i < nrot/2; i++ {
		f := fs * math.Pow(base, -2*float64(i)/float64(nrot))
		if ext != 0 {
			mix := YarnRamp(corr[0], corr[1], 2*i) * ext
			f = f*(1-mix) + math.Pow(base, -2*float64(i)/float64(nrot))*mix
		}
		hi := float32(f)
		lo := float32(f - float64(hi))
		h, err1 := FloatLiteral(float64(hi))
		l, err2 := FloatLiteral(float64(lo))
		if err1 != nil || err2 != nil {
			return nil, 0, fmt.Errorf("rope frequency %d is not finite (base %v, freq_scale %v)", i, base, fs)
		}
		freqs = append(freqs, [2]string{h, l})
	}
	return freqs, mscale, nil
}

// YarnCorrDims is ggml_rope_yarn_corr_dims (ir/eval's yarnCorrDims): the
// range of rotary dims over which YaRN ramps from extrapolation to
// interpolation.
func YarnCorrDims(nDims, origCtx int64, base, betaFast, betaSlow float64) [2]float64 {
	corrDim := func(nRot float64) float64 {
		return float64(nDims) * math.Log(float64(origCtx)/(nRot*2*math.Pi)) / (2 * math.Log(base))
	}
	start := math.Floor(corrDim(betaFast))
	end := math.Ceil(corrDim(betaSlow))
	return [2]float64{math.Max(0, start), math.Min(float64(nDims-1), end)}
}

// YarnRamp is 1 below low, 0 above high, linear between (rope_yarn_ramp).
func YarnRamp(low, high float64, i0 int64) float64 {
	y := (float64(i0)/2 - low) / math.Max(0.001, high-low)
	return 1 - math.Min(1, math.Max(0, y))
}
