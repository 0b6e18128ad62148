// Package rope is the rotary position embedding's numerics, written once
// for every place that computes or emits it: ir/eval and runtime/cpu rotate
// by Params.Theta (float64, the interpreter's exact steps), and the GPU
// kernel generators (codegen/internal/kernsrc) bake Params.Freq into their
// sources. The attributes are the rope and qkv_rope ops': n_rot, base,
// freq_scale, mode, freq_factors (Llama 3's rope_freqs: one divisor per
// pair), and for YaRN (ext_factor ≠ 0, ggml's rope_yarn)
// orig_ctx, beta_fast, beta_slow and attn_factor.
package rope

import (
	"fmt"
	"math"
	"slices"

	"github.com/minerva-llm/minerva/ir"
)

// Params are a rope's attributes, with YaRN's correction dims resolved.
type Params struct {
	NRot       int
	Base       float64
	FreqScale  float64
	ExtFactor  float64 // YaRN when non-zero
	AttnFactor float64
	Neox       bool // pairs (i, i+n_rot/2) rather than (2i, 2i+1)
	// Factors divide each pair's base frequency (ggml's freq_factors, the
	// rope_freqs tensor of Llama 3.1 files); nil means all ones.
	Factors []float64
	corr    [2]float64
}

// Equal reports whether p and q rotate alike.
func (p Params) Equal(q Params) bool {
	return p.NRot == q.NRot && p.Base == q.Base && p.FreqScale == q.FreqScale && p.ExtFactor == q.ExtFactor &&
		p.AttnFactor == q.AttnFactor && p.Neox == q.Neox && slices.Equal(p.Factors, q.Factors) && p.corr == q.corr
}

// FromAttrs reads an op's rope attributes. YaRN needs a positive
// freq_scale (its magnitude scale takes ln(1/freq_scale)).
func FromAttrs(a ir.Attrs) (Params, error) {
	p := Params{
		NRot:       int(a.Int("n_rot", 0)),
		Base:       a.Float("base", 10000),
		FreqScale:  a.Float("freq_scale", 1),
		ExtFactor:  a.Float("ext_factor", 0),
		AttnFactor: a.Float("attn_factor", 1),
		Neox:       a.Str("mode", "normal") == "neox",
		Factors:    a.Floats("freq_factors"),
	}
	if p.Factors != nil {
		if len(p.Factors) != p.NRot/2 {
			return Params{}, fmt.Errorf("freq_factors has %d values for %d rotated pairs", len(p.Factors), p.NRot/2)
		}
		for i, f := range p.Factors {
			if !(f > 0) || math.IsInf(f, 0) {
				return Params{}, fmt.Errorf("freq_factors[%d] = %v is not a positive number", i, f)
			}
		}
	}
	if p.ExtFactor != 0 {
		if p.FreqScale <= 0 {
			return Params{}, fmt.Errorf("YaRN needs a positive freq_scale, got %v", p.FreqScale)
		}
		p.corr = YarnCorrDims(int64(p.NRot), a.Int("orig_ctx", 0), p.Base, a.Float("beta_fast", 32), a.Float("beta_slow", 1))
	}
	return p, nil
}

// Theta is the angle pair i turns by at position pos: the extrapolated
// angle pos·base^(−2i/n_rot) (divided by the pair's frequency factor)
// times freq_scale, blended back towards the extrapolated one by YaRN's
// ramp.
func (p Params) Theta(pos int32, i int) float64 {
	thetaExtrap := float64(pos) * p.base(i)
	theta := p.FreqScale * thetaExtrap
	if p.ExtFactor != 0 {
		mix := YarnRamp(p.corr[0], p.corr[1], int64(2*i)) * p.ExtFactor
		theta = theta*(1-mix) + thetaExtrap*mix
	}
	return theta
}

// Freq is Theta(pos, i)/pos as one per-pair constant, for kernels that
// compute pos·Freq(i) themselves (equal to Theta's steps up to float64
// rounding).
func (p Params) Freq(i int) float64 {
	pow := p.base(i)
	f := p.FreqScale * pow
	if p.ExtFactor != 0 {
		mix := YarnRamp(p.corr[0], p.corr[1], int64(2*i)) * p.ExtFactor
		f = f*(1-mix) + pow*mix
	}
	return f
}

// base is pair i's unscaled frequency, base^(−2i/n_rot) over its factor.
func (p Params) base(i int) float64 {
	f := math.Pow(p.Base, -2*float64(i)/float64(p.NRot))
	if p.Factors != nil {
		f /= p.Factors[i]
	}
	return f
}

// MScale is the factor the rotation multiplies magnitudes by: attn_factor,
// times 1 + 0.1·ln(1/freq_scale) under YaRN.
func (p Params) MScale() float64 {
	m := p.AttnFactor
	if p.ExtFactor != 0 {
		m *= 1 + 0.1*math.Log(1/p.FreqScale)
	}
	return m
}

// Pair is the two dims of a head that pair i rotates.
func (p Params) Pair(i int) (int, int) {
	if p.Neox {
		return i, i + p.NRot/2
	}
	return 2 * i, 2*i + 1
}

// YarnCorrDims is ggml_rope_yarn_corr_dims: the range of rotary dims over
// which YaRN ramps from extrapolation to interpolation.
func YarnCorrDims(nDims, origCtx int64, base, betaFast, betaSlow float64) [2]float64 {
	corrDim := func(nRot float64) float64 {
		return float64(nDims) * math.Log(float64(origCtx)/(nRot*2*math.Pi)) / (2 * math.Log(base))
	}
	start := math.Floor(corrDim(betaFast))
	end := math.Ceil(corrDim(betaSlow))
	return [2]float64{math.Max(0, start), math.Min(float64(nDims-1), end)}
}

// YarnRamp is 1 below low, 0 above high, linear between (ggml's
// rope_yarn_ramp), at dim i0.
func YarnRamp(low, high float64, i0 int64) float64 {
	y := (float64(i0)/2 - low) / math.Max(0.001, high-low)
	return 1 - math.Min(1, math.Max(0, y))
}

// Llama3Factors computes Llama 3.1's per-frequency divisors as
// convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors does: for
// each rotated pair i with wavelength λ = 2π·θ^(2i/d), 1 below
// orig/high, factor above orig/low, and the smooth blend between. The
// frequencies are computed in float32 there; here in float64 and rounded
// once, which can differ from it in the last bit of a factor.
func Llama3Factors(theta float64, hd int, factor, low, high, orig float64) []float32 {
	out := make([]float32, hd/2)
	lowWave, highWave := orig/low, orig/high
	for i := range out {
		freq := 1 / math.Pow(theta, float64(2*i)/float64(hd))
		wave := 2 * math.Pi / freq
		switch {
		case wave < highWave:
			out[i] = 1
		case wave > lowWave:
			out[i] = float32(factor)
		default:
			smooth := (orig/wave - low) / (high - low)
			out[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	return out
}
