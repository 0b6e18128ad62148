package rope

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

// Theta (the interpreter's steps) and pos·Freq (the kernels' constant) are
// the same angle to float64 rounding, plain and under YaRN, where the blend
// moves the angle between the extrapolated and the interpolated one.
func TestThetaAndFreqAgree(t *testing.T) {
	for _, a := range []ir.Attrs{
		{"n_rot": int64(64), "base": 10000.0, "freq_scale": 0.25},
		{"n_rot": int64(64), "base": 150000.0, "freq_scale": 1.0 / 32, "ext_factor": 1.0,
			"orig_ctx": int64(4096), "beta_fast": 32.0, "beta_slow": 1.0, "mode": "neox"},
	} {
		p, err := FromAttrs(a)
		require.NoError(t, err)
		for i := 0; i < p.NRot/2; i++ {
			extrap := math.Pow(p.Base, -2*float64(i)/float64(p.NRot))
			for _, pos := range []int32{1, 7, 1187, 131071} {
				th := p.Theta(pos, i)
				require.InEpsilon(t, float64(pos)*p.Freq(i), th, 1e-14, "pair %d pos %d", i, pos)
				lo, hi := math.Min(extrap, p.FreqScale*extrap), math.Max(extrap, p.FreqScale*extrap)
				require.True(t, th >= float64(pos)*lo*(1-1e-14) && th <= float64(pos)*hi*(1+1e-14), "pair %d: θ outside the blend", i)
			}
		}
	}
}

func TestAttrs(t *testing.T) {
	p, err := FromAttrs(ir.Attrs{"n_rot": int64(8), "attn_factor": 0.5, "mode": "neox"})
	require.NoError(t, err)
	require.Equal(t, 0.5, p.MScale())
	a, b := p.Pair(1)
	require.Equal(t, [2]int{1, 5}, [2]int{a, b})
	p.Neox = false
	a, b = p.Pair(1)
	require.Equal(t, [2]int{2, 3}, [2]int{a, b})

	y, err := FromAttrs(ir.Attrs{"n_rot": int64(8), "freq_scale": 0.5, "ext_factor": 1.0, "orig_ctx": int64(64)})
	require.NoError(t, err)
	require.InDelta(t, 1+0.1*math.Log(2), y.MScale(), 1e-15)
	_, err = FromAttrs(ir.Attrs{"n_rot": int64(8), "freq_scale": 0.0, "ext_factor": 1.0})
	require.ErrorContains(t, err, "freq_scale")
}

// Llama 3.1's rope_freqs divide each pair's frequency (the fixture
// llama31-p-mix's factors, README-archs.md): θ_i = pos·base^(−2i/n_rot) /
// factor_i, checked against that formula written out, and a factor list of
// the wrong length or with a non-positive value is refused.
func TestFreqFactors(t *testing.T) {
	factors := []float64{1, 1, 2.44226, 8, 8, 8, 8, 8}
	p, err := FromAttrs(ir.Attrs{"n_rot": int64(16), "base": 500000.0, "freq_factors": factors})
	require.NoError(t, err)
	for i, f := range factors {
		for _, pos := range []int32{1, 13, 49} {
			want := float64(pos) * math.Pow(500000, -2*float64(i)/16) / f
			require.InEpsilon(t, want, p.Theta(pos, i), 1e-14, "pair %d pos %d", i, pos)
			require.InEpsilon(t, want, float64(pos)*p.Freq(i), 1e-14, "pair %d pos %d", i, pos)
		}
	}
	_, err = FromAttrs(ir.Attrs{"n_rot": int64(16), "freq_factors": factors[:7]})
	require.ErrorContains(t, err, "7 values for 8 rotated pairs")
	_, err = FromAttrs(ir.Attrs{"n_rot": int64(4), "freq_factors": []float64{1, 0}})
	require.ErrorContains(t, err, "freq_factors[1] = 0")
	_, err = FromAttrs(ir.Attrs{"n_rot": int64(4), "freq_factors": []float64{math.NaN(), 1}})
	require.ErrorContains(t, err, "freq_factors[0] = NaN")
}

// Equal tells rotations apart by every parameter, the frequency factors
// included, and takes two readings of the same attributes for equal.
func TestParamsEqual(t *testing.T) {
	base := ir.Attrs{"n_rot": int64(6), "base": 500000.0, "freq_factors": []float64{1, 2, 4}}
	p, err := FromAttrs(base)
	require.NoError(t, err)
	q, err := FromAttrs(base)
	require.NoError(t, err)
	require.True(t, p.Equal(q))
	for name, a := range map[string]ir.Attrs{
		"base":    {"n_rot": int64(6), "base": 10000.0, "freq_factors": []float64{1, 2, 4}},
		"n_rot":   {"n_rot": int64(4), "base": 500000.0, "freq_factors": []float64{1, 2}},
		"factors": {"n_rot": int64(6), "base": 500000.0, "freq_factors": []float64{1, 2, 8}},
		"none":    {"n_rot": int64(6), "base": 500000.0},
		"neox":    {"n_rot": int64(6), "base": 500000.0, "freq_factors": []float64{1, 2, 4}, "mode": "neox"},
	} {
		r, err := FromAttrs(a)
		require.NoError(t, err, name)
		require.False(t, p.Equal(r), name)
	}
}
