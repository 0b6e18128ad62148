package eval_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
)

// ropeCase is one rope configuration; yarn switches on ext_factor and the
// YaRN attributes.
type ropeCase struct {
	name       string
	T, H, hd   int
	nrot       int
	mode       string
	base       float64
	freqScale  float64
	yarn       bool
	attnFactor float64
	maxPos     int32
	fixedPos   []int32
}

// Naive float64 transcription of ggml's YaRN helpers (ggml-cpu ops.cpp and
// ggml.c: rope_yarn_ramp, rope_yarn, ggml_rope_yarn_corr_dim(s)).
func refYarnCorrDim(nDims, nCtxOrig int, nRot, base float64) float64 {
	return float64(nDims) * math.Log(float64(nCtxOrig)/(nRot*2*math.Pi)) / (2 * math.Log(base))
}

func refYarnCorrDims(nDims, nCtxOrig int, base, betaFast, betaSlow float64) [2]float64 {
	start := math.Floor(refYarnCorrDim(nDims, nCtxOrig, betaFast, base))
	end := math.Ceil(refYarnCorrDim(nDims, nCtxOrig, betaSlow, base))
	return [2]float64{math.Max(0, start), math.Min(float64(nDims-1), end)}
}

func refYarnRamp(low, high float64, i0 int) float64 {
	y := (float64(i0/2) - low) / math.Max(0.001, high-low) // i0/2: C integer division
	return 1 - math.Min(1, math.Max(0, y))
}

func refRopeYarn(thetaExtrap, freqScale float64, corr [2]float64, i0 int, extFactor, mscale float64) (cos, sin float64) {
	thetaInterp := freqScale * thetaExtrap
	theta := thetaInterp
	if extFactor != 0 {
		rampMix := refYarnRamp(corr[0], corr[1], i0) * extFactor
		theta = thetaInterp*(1-rampMix) + thetaExtrap*rampMix
		mscale *= 1 + 0.1*math.Log(1/freqScale)
	}
	return math.Cos(theta) * mscale, math.Sin(theta) * mscale
}

// refRoPE follows ggml's rope loop: theta starts at pos and is multiplied by
// base^(−2/n_rot) for every pair i0 = 0, 2, …; normal mode rotates (i0,
// i0+1), neox mode (i0/2, i0/2 + n_rot/2); dims from n_rot on are copied.
func refRoPE(x []float32, pos []int32, c ropeCase) []float64 {
	const (
		extYarn  = 1.0
		betaFast = 32.0
		betaSlow = 1.0
		origCtx  = 4096
	)
	out := f64(x)
	ext, attn := 0.0, 1.0
	var corr [2]float64
	if c.yarn {
		ext, attn = extYarn, c.attnFactor
		corr = refYarnCorrDims(c.nrot, origCtx, c.base, betaFast, betaSlow)
	}
	thetaScale := math.Pow(c.base, -2/float64(c.nrot))
	W := c.H * c.hd
	for t, p := range pos {
		for h := 0; h < c.H; h++ {
			off := t*W + h*c.hd
			theta := float64(p)
			for i0 := 0; i0 < c.nrot; i0 += 2 {
				cos, sin := refRopeYarn(theta, c.freqScale, corr, i0, ext, attn)
				a, b := off+i0, off+i0+1
				if c.mode == "neox" {
					a, b = off+i0/2, off+i0/2+c.nrot/2
				}
				x0, x1 := float64(x[a]), float64(x[b])
				out[a] = x0*cos - x1*sin
				out[b] = x0*sin + x1*cos
				theta *= thetaScale
			}
		}
	}
	return out
}

// TestRoPE: normal and neox layouts, n_rot < head_dim (the tail of every
// head passes through bit for bit), freq_scale ≠ 1, other bases, and YaRN
// (ext_factor 1, attn_factor, beta_fast 32, beta_slow 1, orig_ctx 4096)
// against a transcription of ggml's rope_yarn. Tolerance relTol.
func TestRoPE(t *testing.T) {
	cases := []ropeCase{
		{name: "normal T=1", T: 1, H: 2, hd: 8, nrot: 8, mode: "normal", base: 10000, freqScale: 1, maxPos: 50},
		{name: "normal pos 0 is identity", T: 1, H: 3, hd: 4, nrot: 4, mode: "normal", base: 10000, freqScale: 1, fixedPos: []int32{0}},
		{name: "normal T=7 n_rot<hd", T: 7, H: 3, hd: 16, nrot: 8, mode: "normal", base: 10000, freqScale: 1, maxPos: 1000},
		{name: "neox T=7 n_rot<hd", T: 7, H: 2, hd: 16, nrot: 6, mode: "neox", base: 10000, freqScale: 1, maxPos: 1000},
		{name: "neox hd 6 one head", T: 3, H: 1, hd: 6, nrot: 6, mode: "neox", base: 500000, freqScale: 1, maxPos: 100},
		{name: "normal freq_scale 0.25", T: 7, H: 2, hd: 8, nrot: 8, mode: "normal", base: 10000, freqScale: 0.25, maxPos: 4000},
		{name: "neox freq_scale 0.5 base 1e6", T: 4, H: 4, hd: 10, nrot: 10, mode: "neox", base: 1e6, freqScale: 0.5, maxPos: 20000},
		{name: "yarn normal", T: 7, H: 2, hd: 64, nrot: 64, mode: "normal", base: 10000, freqScale: 0.25, yarn: true, attnFactor: 1, maxPos: 16000},
		{name: "yarn neox attn_factor", T: 5, H: 2, hd: 64, nrot: 64, mode: "neox", base: 10000, freqScale: 0.125, yarn: true, attnFactor: 0.8, maxPos: 30000},
		{name: "yarn neox n_rot<hd", T: 3, H: 3, hd: 48, nrot: 32, mode: "neox", base: 150000, freqScale: 1.0 / 32, yarn: true, attnFactor: 1.3, maxPos: 100000},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := newRNG(uint64(600 + i))
			W := c.H * c.hd
			attrs := ir.Attrs{"head_dim": c.hd, "n_rot": c.nrot, "base": c.base, "freq_scale": c.freqScale, "mode": c.mode}
			if c.yarn {
				attrs["ext_factor"] = 1.0
				attrs["attn_factor"] = c.attnFactor
				attrs["beta_fast"] = 32.0
				attrs["beta_slow"] = 1.0
				attrs["orig_ctx"] = 4096
			}
			b := ir.NewBuilder("rope")
			x := b.Input("x", f32Type("T", W))
			pos := b.Input("pos", i32Type("T"))
			b.Output("y", b.RoPE(x, pos, attrs))
			xs := randVals(rng, c.T*W, 1)
			ps := c.fixedPos
			if ps == nil {
				ps = make([]int32, c.T)
				for j := range ps {
					ps[j] = rng.Int32N(c.maxPos)
				}
				ps[0] = c.maxPos - 1 // the largest angle is always exercised
			}
			out := runOnce(t, b, nil, 1, map[string]eval.Tensor{"x": f32T(xs, int64(c.T), int64(W)), "pos": i32T(ps...)})["y"]
			require.Equal(t, []int64{int64(c.T), int64(W)}, out.Shape)
			requireClose(t, out.F32, refRoPE(xs, ps, c), relTol, "rope")
			for r := 0; r < c.T*c.H; r++ {
				for d := c.nrot; d < c.hd; d++ {
					require.Equal(t, math.Float32bits(xs[r*c.hd+d]), math.Float32bits(out.F32[r*c.hd+d]), "tail dim %d of head row %d must pass through", d, r)
				}
			}
		})
	}
}

// TestRoPEYarnRampIsUsed guards the YaRN reference itself: with these
// settings the ramp must lie strictly inside the rotary dims, so that both
// interpolated and extrapolated pairs (and the blend between) are tested.
func TestRoPEYarnRampIsUsed(t *testing.T) {
	corr := refYarnCorrDims(64, 4096, 10000, 32, 1)
	require.Equal(t, [2]float64{10, 23}, corr)
	require.Equal(t, 1.0, refYarnRamp(corr[0], corr[1], 0))
	require.Equal(t, 0.0, refYarnRamp(corr[0], corr[1], 62))
	require.InDelta(t, 0.5, refYarnRamp(corr[0], corr[1], 33), 0.05)
}
