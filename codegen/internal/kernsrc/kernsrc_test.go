package kernsrc

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/rope"
)

func TestFloatLiteralRoundTrips(t *testing.T) {
	for _, x := range []float64{0, 1, -2, 1.5, 1e-5, 0.1, 10000, 3.4e38, -1e-40, 1.0 / 3} {
		s, err := FloatLiteral(x)
		require.NoError(t, err)
		require.True(t, strings.HasSuffix(s, "f"), s)
		back, err := strconv.ParseFloat(strings.TrimSuffix(s, "f"), 32)
		require.NoError(t, err)
		require.Equal(t, float32(x), float32(back), "%v → %s", x, s)
	}
	for _, x := range []float64{math.NaN(), math.Inf(1), 1e39} {
		_, err := FloatLiteral(x)
		require.Error(t, err, "%v", x)
	}
}

func TestRowsAndLastConst(t *testing.T) {
	ty := ir.Type{DType: ir.F32, Shape: ir.Shape{ir.Sym("T"), ir.D(4), ir.D(64)}}
	n, per, err := Rows(ty)
	require.NoError(t, err)
	require.Equal(t, int64(4), n)
	require.True(t, per)
	w, err := LastConst(ty)
	require.NoError(t, err)
	require.Equal(t, int64(64), w)
	_, _, err = Rows(ir.Type{DType: ir.F32, Shape: ir.Shape{ir.Sym("C"), ir.D(8)}})
	require.Error(t, err)
	_, err = LastConst(ir.Type{DType: ir.F32, Shape: ir.Shape{ir.Sym("T")}})
	require.Error(t, err)
	require.Equal(t, int64(3), CeilDiv(7, 3))
	require.Equal(t, "a-2", Render("a-{{.}}", 2))
}

// TestRopeFreqs: plain RoPE gives freq_scale·base^(−2i/n_rot) as hi + lo;
// YaRN gives the extrapolated frequency below the correction range, the
// interpolated one above it, a blend inside, and scales the magnitude.
func TestRopeFreqs(t *testing.T) {
	val := func(p [2]string) float64 {
		hi, err := strconv.ParseFloat(strings.TrimSuffix(p[0], "f"), 32)
		require.NoError(t, err)
		lo, err := strconv.ParseFloat(strings.TrimSuffix(p[1], "f"), 32)
		require.NoError(t, err)
		return hi + lo
	}
	plain := ir.Attrs{"n_rot": int64(16), "base": 10000.0, "freq_scale": 0.5, "attn_factor": 0.8}
	fr, ms, err := RopeFreqs(plain)
	require.NoError(t, err)
	require.Len(t, fr, 8)
	require.Equal(t, 0.8, ms)
	for i, p := range fr {
		want := 0.5 * math.Pow(10000, -2*float64(i)/16)
		require.InDelta(t, want, val(p), want*1e-12, "pair %d", i)
	}

	yarn := ir.Attrs{"n_rot": int64(64), "base": 150000.0, "freq_scale": 1.0 / 32, "ext_factor": 1.0,
		"orig_ctx": int64(4096), "beta_fast": 32.0, "beta_slow": 1.0}
	fr, ms, err = RopeFreqs(yarn)
	require.NoError(t, err)
	require.InDelta(t, 1+0.1*math.Log(32), ms, 1e-15)
	corr := rope.YarnCorrDims(64, 4096, 150000, 32, 1)
	require.Less(t, 0.0, corr[0])
	require.Less(t, corr[0], corr[1])
	require.Less(t, corr[1], 31.0)
	var blended int
	for i, p := range fr {
		extrap := math.Pow(150000, -2*float64(i)/64)
		got := val(p)
		switch {
		case float64(i) <= corr[0]:
			require.InDelta(t, extrap, got, extrap*1e-12, "pair %d below the ramp", i)
		case float64(i) >= corr[1]:
			require.InDelta(t, extrap/32, got, extrap*1e-12, "pair %d above the ramp", i)
		default:
			require.True(t, got < extrap && got > extrap/32, "pair %d: %v not between %v and %v", i, got, extrap/32, extrap)
			blended++
		}
	}
	require.Positive(t, blended)

	yarn["freq_scale"] = 0.0
	_, _, err = RopeFreqs(yarn)
	require.Error(t, err)
}
