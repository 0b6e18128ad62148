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
	require.Equal(t, want, SumWords(s))
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

// parseSteal reads the eighth number of /proc/stat's first line, the
// all-CPU one, in 10 ms ticks.
func TestParseSteal(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want time.Duration
	}{
		{"cpu  2111957 0 110299 342467 6762 0 798 51805 0 0\ncpu0 1 0 0 0 0 0 0 9 0 0\n", 518050 * time.Millisecond},
		{"cpu  1 2 3 4 5 6 7 0\n", 0}, // a kernel without guest columns
		{"cpu  1 2 3 4 5 6 7\n", -1},  // no steal column
		{"cpu0 1 2 3 4 5 6 7 8 9 10\n", -1},
		{"cpu  1 2 3 4 5 6 7 x 0 0\n", -1},
		{"cpu  1 2 3 4 5 6 7 -3 0 0\n", -1},
		{"cpu 0 0 0 0 0 0 0 922700000000", -1}, // overflows a Duration (found by FuzzParseSteal)
		{"", -1},
	} {
		require.Equal(t, tc.want, parseSteal(tc.stat), "%q", tc.stat)
	}
}

// FuzzParseSteal: any text gives -1 or a whole number of 10 ms ticks, and
// never a panic.
func FuzzParseSteal(f *testing.F) {
	f.Add("cpu  2111957 0 110299 342467 6762 0 798 51805 0 0\n")
	f.Add("cpu  1 2 3 4 5 6 7 99999999999999999999 0 0\n")
	f.Add("cpu\n")
	f.Fuzz(func(t *testing.T, stat string) {
		d := parseSteal(stat)
		if d != -1 && (d < 0 || d%(10*time.Millisecond) != 0) {
			t.Fatalf("parseSteal(%q) = %v", stat, d)
		}
	})
}

// TestResultTotals: DecodeTime sums the steps; DecodeSteal sums the
// samples' steal, and is unknown without samples or with one unread.
func TestResultTotals(t *testing.T) {
	ms := time.Millisecond
	r := &Result{DecodeSteps: []time.Duration{3 * ms, 5 * ms, 7 * ms}}
	require.Equal(t, 15*ms, r.DecodeTime())
	require.Zero(t, (&Result{}).DecodeTime())
	for _, tc := range []struct {
		steals []time.Duration
		want   time.Duration
		known  bool
	}{
		{nil, 0, false},
		{[]time.Duration{0}, 0, true},
		{[]time.Duration{10 * ms, 0, 30 * ms}, 40 * ms, true},
		{[]time.Duration{10 * ms, -1, 30 * ms}, 0, false},
		{[]time.Duration{-1}, 0, false},
	} {
		r := &Result{}
		for _, s := range tc.steals {
			r.ProbeSamples = append(r.ProbeSamples, ProbeSample{GBs: 1, Steal: s})
		}
		got, known := r.DecodeSteal()
		require.Equal(t, tc.known, known, "%v", tc.steals)
		require.Equal(t, tc.want, got, "%v", tc.steals)
	}
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

// A probe's Mean is the work of all its samples over their time: zero
// before the first, between the slowest and the fastest sample after (the
// samples do equal work), each sample positive and below what no machine
// does (reads 100 TB/s, or multiply-adds 10 T a second on two threads).
func TestProbeMean(t *testing.T) {
	type probe interface {
		Sample() float64
		Mean() (float64, int)
	}
	read := NewProbe(4<<20, 2)
	require.Equal(t, int64(4<<20), read.Bytes())
	for _, c := range []struct {
		name  string
		p     probe
		bound float64
	}{
		{"read", read, 1e5},
		{"arith", NewArithProbe(2), 1e4},
	} {
		t.Run(c.name, func(t *testing.T) {
			rate, n := c.p.Mean()
			require.Zero(t, rate)
			require.Zero(t, n)
			lo, hi := 1e18, 0.0
			for range 3 {
				g := c.p.Sample()
				require.Greater(t, g, 0.0)
				require.Less(t, g, c.bound)
				lo, hi = min(lo, g), max(hi, g)
			}
			rate, n = c.p.Mean()
			require.Equal(t, 3, n)
			require.GreaterOrEqual(t, rate, lo*(1-1e-9))
			require.LessOrEqual(t, rate, hi*(1+1e-9))
		})
	}
	require.NoError(t, read.Close())
	require.NoError(t, read.Close())
}

// Each attention op reads its caches' rows 0…p at step p (its last window
// of them with a sliding window), each row at the state's element type,
// through a kvwrite or straight from the state; the figure is the mean
// over the steps.
func TestKVBytesPerToken(t *testing.T) {
	const W = 32 // row width (2 KV heads of 16); the context is symbolic
	b := ir.NewBuilder("t")
	tok := b.Input("tokens", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	pos := b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	emb := b.Weight("emb", ir.Type{DType: ir.F32, Shape: ir.S(10, 64)})
	x := b.Embed(emb, tok)
	wq := b.Weight("wq", ir.Type{DType: ir.F32, Shape: ir.S(64, 64)})
	wkv := b.Weight("wkv", ir.Type{DType: ir.F32, Shape: ir.S(W, 64)})
	attrs := ir.Attrs{"n_head": 4, "n_kv_head": 2, "head_dim": 16, "scale": 0.25}
	kv := b.MatMul(x, wkv, nil)
	// Layer 0: f16 keys written through kvwrite, q8_0 values read from
	// the state itself; layer 1: f32 caches and a window of 3.
	k0 := b.KVWrite(b.State("k0", ir.Type{DType: ir.F16, Shape: ir.S("C", W)}), kv, pos)
	v0 := b.State("v0", ir.Type{DType: ir.Q8_0, Shape: ir.S("C", W)})
	a0 := b.Attention(b.MatMul(x, wq, nil), k0, v0, pos, nil, attrs)
	k1 := b.KVWrite(b.State("k1", ir.Type{DType: ir.F32, Shape: ir.S("C", W)}), kv, pos)
	v1 := b.KVWrite(b.State("v1", ir.Type{DType: ir.F32, Shape: ir.S("C", W)}), kv, pos)
	wattrs := ir.Attrs{"window": 3}
	for k, v := range attrs {
		wattrs[k] = v
	}
	a1 := b.Attention(a0, k1, v1, pos, nil, wattrs)
	b.Output("logits", b.MatMul(a1, emb, nil))
	g, err := b.Finish()
	require.NoError(t, err)

	f16, q8, f32 := int64(W*2), int64(W/32*34), int64(W*4)
	// Steps at positions 4, 5, 6: layer 0 reads 5+6+7 rows, layer 1 three
	// rows each step.
	got, err := KVBytesPerToken(g, 4, 3)
	require.NoError(t, err)
	require.Equal(t, ((5+6+7)*(f16+q8)+3*3*2*f32)/3, got)
	// At position 0 one row, in both layers.
	got, err = KVBytesPerToken(g, 0, 1)
	require.NoError(t, err)
	require.Equal(t, f16+q8+2*f32, got)
	_, err = KVBytesPerToken(g, 0, 0)
	require.ErrorContains(t, err, "decode steps 0")

	// Keys that are no cache are an error naming them.
	b = ir.NewBuilder("t")
	tok = b.Input("tokens", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	pos = b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	emb = b.Weight("emb", ir.Type{DType: ir.F32, Shape: ir.S(10, 32)})
	x = b.Embed(emb, tok)
	a := b.Attention(x, x, x, pos, nil, ir.Attrs{"n_head": 2, "n_kv_head": 2, "head_dim": 16, "scale": 0.25})
	b.Output("logits", b.MatMul(a, emb, nil))
	g, err = b.Finish()
	require.NoError(t, err)
	_, err = KVBytesPerToken(g, 0, 1)
	require.ErrorContains(t, err, "not a KV cache state")
}
