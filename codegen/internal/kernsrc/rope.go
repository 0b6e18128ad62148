package kernsrc

import (
	"fmt"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/rope"
)

// RopeFreqs returns the per-pair rotation frequencies of a qkv_rope's
// attributes (n_rot, base, freq_scale and, for YaRN, ext_factor, orig_ctx,
// beta_fast, beta_slow) as (hi, lo) float literal pairs, hi + lo being the
// float64 frequency to about 2^-48, so that a kernel's pos·θ keeps float64
// accuracy; and the magnitude scale the rotation multiplies by
// (attn_factor, times 1 + 0.1·ln(1/freq_scale) under YaRN).
//
// YaRN (ext_factor ≠ 0, ggml's rope_yarn; ir/rope holds the numerics) blends, per
// dimension pair, the interpolated angle freq_scale·θ and the extrapolated
// θ by a ramp over the correction dims; both are pos times a constant, so
// the blend is one more per-pair frequency.
func RopeFreqs(a ir.Attrs) (freqs [][2]string, mscale float64, err error) {
	rp, err := rope.FromAttrs(a)
	if err != nil {
		return nil, 0, err
	}
	for i := 0; i < rp.NRot/2; i++ {
		f := rp.Freq(i)
		hi := float32(f)
		lo := float32(f - float64(hi))
		h, err1 := FloatLiteral(float64(hi))
		l, err2 := FloatLiteral(float64(lo))
		if err1 != nil || err2 != nil {
			return nil, 0, fmt.Errorf("rope frequency %d is not finite (base %v, freq_scale %v)", i, rp.Base, rp.FreqScale)
		}
		freqs = append(freqs, [2]string{h, l})
	}
	return freqs, rp.MScale(), nil
}
