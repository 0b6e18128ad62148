package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

func TestBandwidthSmallBuffer(t *testing.T) {
	gbs := Bandwidth(1<<20, 2, 3)
	require.Greater(t, gbs, 0.0)
	require.Less(t, gbs, 1e5) // no machine reads 100 TB/s
	// Sizes that do not split evenly still work.
	require.Greater(t, Bandwidth(1000, 3, 1), 0.0)
}

func TestSumWords(t *testing.T) {
	s := make([]uint64, 64)
	var want uint64
	for i := range s {
		s[i] = uint64(i * i)
		want += s[i]
	}
	require.Equal(t, want, sumWords(s))
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i))
	}
	require.Equal(t, time.Duration(50), Percentile(ds, 50))
	require.Equal(t, time.Duration(99), Percentile(ds, 99))
	require.Equal(t, time.Duration(100), Percentile(ds, 100))
	require.Equal(t, time.Duration(7), Percentile([]time.Duration{7}, 99))
	require.Equal(t, time.Duration(0), Percentile(nil, 50))
}

func TestParseHWM(t *testing.T) {
	status := "Name:\tx\nVmPeak:\t  9 kB\nVmHWM:\t    1234 kB\nVmRSS: 1 kB\n"
	require.Equal(t, int64(1234*1024), parseStatus(status, "VmHWM:"))
	require.Equal(t, int64(1024), parseStatus(status, "VmRSS:"))
	require.Equal(t, int64(0), parseStatus("Name: x\n", "VmHWM:"))
}

func TestPeakRSS(t *testing.T) {
	if rss := PeakRSS(); rss < 0 {
		t.Fatalf("peak RSS %d", rss)
	}
}

func TestWeightBytesPerToken(t *testing.T) {
	b := ir.NewBuilder("t")
	tok := b.Input("tokens", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	emb := b.Weight("emb", ir.Type{DType: ir.F32, Shape: ir.S(100, 64)})
	wq := b.Weight("wq", ir.Type{DType: ir.Q8_0, Shape: ir.S(64, 64)})
	x := b.Embed(emb, tok)
	y := b.MatMul(x, wq, nil)
	z := b.MatMul(x, wq, nil) // the same weight read twice counts twice
	logits := b.MatMul(b.AddV(y, z), emb, nil)
	b.Output("logits", logits)
	g, err := b.Finish()
	require.NoError(t, err)
	got, err := WeightBytesPerToken(g)
	require.NoError(t, err)
	q8 := int64(64 * 2 * 34) // 64 rows of two Q8_0 blocks
	require.Equal(t, 64*4+2*q8+100*64*4, got)
}

// A moe op counts only the experts a token uses (k of E when routed by
// topk_softmax), each at its matrices' full size; with another route all E.
func TestWeightBytesPerTokenMoE(t *testing.T) {
	const D, F, E, V = 64, 96, 8, 50
	cases := []struct {
		name   string
		topk   bool
		k      int
		expert ir.DType
		want   int64 // expert bytes alone
	}{
		{"mxfp4 top-2 of 8", true, 2, ir.MXFP4, 2 * 3 * (F * D / 32 * 17)},
		{"q8_0 top-4 of 8", true, 4, ir.Q8_0, 4 * 3 * (F * D / 32 * 34)},
		{"f32 dense route", false, 0, ir.F32, E * 3 * (F * D * 4)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := ir.NewBuilder("t")
			tok := b.Input("tokens", ir.Type{DType: ir.I32, Shape: ir.S("T")})
			emb := b.Weight("emb", ir.Type{DType: ir.F32, Shape: ir.S(V, D)})
			router := b.Weight("router", ir.Type{DType: ir.F32, Shape: ir.S(E, D)})
			x := b.Embed(emb, tok)
			route := b.MatMul(x, router, nil)
			if c.topk {
				route = b.TopKSoftmax(route, c.k)
			}
			ew := ir.MoEWeights{
				Gate: b.Weight("gate", ir.Type{DType: c.expert, Shape: ir.S(E, F, D)}),
				Up:   b.Weight("up", ir.Type{DType: c.expert, Shape: ir.S(E, F, D)}),
				Down: b.Weight("down", ir.Type{DType: c.expert, Shape: ir.S(E, D, F)}),
			}
			y := b.MoE(x, route, ew, ir.Attrs{"act": ir.MoEActSiLU})
			b.Output("logits", b.MatMul(y, emb, nil))
			g, err := b.Finish()
			require.NoError(t, err)
			got, err := WeightBytesPerToken(g)
			require.NoError(t, err)
			dense := int64(D*4 + E*D*4 + V*D*4) // embedding row, router, output
			require.Equal(t, dense+c.want, got)
		})
	}
}

func TestProbeMean(t *testing.T) {
	p := NewProbe(4<<20, 2)
	require.Equal(t, int64(4<<20), p.Bytes())
	gbs, n := p.Mean()
	require.Zero(t, gbs)
	require.Zero(t, n)
	lo, hi := 1e18, 0.0
	for range 3 {
		g := p.Sample()
		lo, hi = min(lo, g), max(hi, g)
	}
	gbs, n = p.Mean()
	require.Equal(t, 3, n)
	// The mean rate of three passes of equal size lies between the
	// slowest and the fastest.
	require.GreaterOrEqual(t, gbs, lo*0.999)
	require.LessOrEqual(t, gbs, hi*1.001)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
}
