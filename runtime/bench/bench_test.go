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
	require.Equal(t, int64(1234*1024), parseHWM("Name:\tx\nVmPeak:\t  9 kB\nVmHWM:\t    1234 kB\nVmRSS: 1 kB\n"))
	require.Equal(t, int64(0), parseHWM("Name: x\n"))
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
