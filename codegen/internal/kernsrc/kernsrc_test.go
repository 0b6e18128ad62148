package kernsrc

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
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
