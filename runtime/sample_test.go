package runtime

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestArgmaxTiesGoToLowestID(t *testing.T) {
	require.Equal(t, int32(1), Argmax([]float32{0, 3, 1, 3}))
	require.Equal(t, int32(0), Argmax([]float32{-1, -1}))
	nan := float32(math.NaN())
	require.Equal(t, int32(2), Argmax([]float32{nan, -5, 4, nan, 4}), "NaN is skipped, also at index 0")
	require.Equal(t, int32(0), Argmax([]float32{nan, nan}))
	require.Equal(t, int32(1), Argmax([]float32{float32(math.Inf(-1)), -1e38}))
	s, err := NewSampler(DefaultSampler())
	require.NoError(t, err)
	require.Equal(t, int32(2), s.Sample([]float32{1, 0, 5, 5, 2}, nil))
}

// draw samples n tokens and returns how often each id came up.
func draw(t *testing.T, cfg SamplerConfig, logits []float32, n int) map[int32]int {
	t.Helper()
	s, err := NewSampler(cfg)
	require.NoError(t, err)
	counts := map[int32]int{}
	for i := 0; i < n; i++ {
		counts[s.Sample(logits, nil)]++
	}
	return counts
}

func TestSamplerFilters(t *testing.T) {
	// Probabilities at temperature 1: softmax of these logits.
	logits := []float32{2, 1.5, 1, 0.5, 0, -0.5, -1, -3}
	base := SamplerConfig{Temperature: 1, TopP: 1, RepeatPenalty: 1, Seed: 3}

	t.Run("top-k keeps the k best", func(t *testing.T) {
		cfg := base
		cfg.TopK = 3
		for id := range draw(t, cfg, logits, 2000) {
			require.Less(t, id, int32(3))
		}
	})
	t.Run("top-p keeps the smallest set reaching p", func(t *testing.T) {
		// p(0)=0.405, p(1)=0.245, p(2)=0.149: 0.6 is reached by ids 0..1,
		// 0.7 by ids 0..2.
		for _, c := range []struct {
			p    float64
			keep int
		}{{0.6, 2}, {0.7, 3}, {0.3, 1}} {
			cfg := base
			cfg.TopP = c.p
			counts := draw(t, cfg, logits, 4000)
			for id := range counts {
				require.Less(t, id, int32(c.keep))
			}
			require.Len(t, counts, c.keep, "top-p %v", c.p)
		}
	})
	t.Run("min-p drops tokens far below the best", func(t *testing.T) {
		// p(i)/p(0) = exp(logit_i − 2): ≥ 0.3 holds for logits ≥ 2 + ln 0.3 ≈ 0.796, ids 0..2.
		cfg := base
		cfg.MinP = 0.3
		counts := draw(t, cfg, logits, 4000)
		require.Len(t, counts, 3)
	})
	t.Run("temperature sharpens", func(t *testing.T) {
		cold, hot := base, base
		cold.Temperature, hot.Temperature = 0.2, 5
		c, h := draw(t, cold, logits, 4000), draw(t, hot, logits, 4000)
		require.Greater(t, c[0], 3550, "at T=0.2 the top token dominates (p≈0.918: 3672 ± 17 expected)")
		require.Less(t, h[0], 1000, "at T=5 the distribution is nearly flat (p≈0.177: 707 ± 24 expected)")
	})
	t.Run("frequencies follow softmax", func(t *testing.T) {
		const n = 20000
		counts := draw(t, base, logits, n)
		var z float64
		for _, l := range logits {
			z += math.Exp(float64(l))
		}
		for id, l := range logits[:4] {
			p := math.Exp(float64(l)) / z
			got := float64(counts[int32(id)]) / n
			// 5 standard deviations of a binomial proportion.
			require.InDelta(t, p, got, 5*math.Sqrt(p*(1-p)/n), "token %d", id)
		}
	})
	t.Run("repetition penalty demotes seen tokens", func(t *testing.T) {
		s, err := NewSampler(SamplerConfig{TopP: 1, RepeatPenalty: 2})
		require.NoError(t, err)
		// Token 0 (logit 2 → 1 after the penalty) loses to token 1 (1.5).
		require.Equal(t, int32(1), s.Sample(logits, []int32{0}))
		// A negative logit is multiplied: token 6 (−1 → −2) never wins anyway,
		// and unseen tokens keep their order.
		require.Equal(t, int32(0), s.Sample(logits, []int32{6}))
	})
	t.Run("seeded", func(t *testing.T) {
		a, b := draw(t, base, logits, 500), draw(t, base, logits, 500)
		require.Equal(t, a, b)
	})
}

func TestSamplerRejectsNonsense(t *testing.T) {
	for _, cfg := range []SamplerConfig{
		{Temperature: -1, TopP: 1, RepeatPenalty: 1},
		{Temperature: math.NaN(), TopP: 1, RepeatPenalty: 1},
		{TopK: -2, TopP: 1, RepeatPenalty: 1},
		{TopP: 0, RepeatPenalty: 1},
		{TopP: 1.5, RepeatPenalty: 1},
		{TopP: 1, MinP: 1, RepeatPenalty: 1},
		{TopP: 1, RepeatPenalty: 0},
		{TopP: 1, RepeatPenalty: 1, RepeatLastN: -1},
	} {
		_, err := NewSampler(cfg)
		require.Error(t, err, "%+v", cfg)
	}
}

func TestSampleNeverReturnsOutOfRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s, err := NewSampler(SamplerConfig{Temperature: 0.8, TopK: 5, TopP: 0.9, MinP: 0.01, RepeatPenalty: 1.3, Seed: 9})
	require.NoError(t, err)
	for i := 0; i < 200; i++ {
		logits := make([]float32, 1+rng.IntN(50))
		for j := range logits {
			logits[j] = float32(rng.NormFloat64() * 3)
		}
		id := s.Sample(logits, []int32{0, 3, 99})
		require.GreaterOrEqual(t, id, int32(0))
		require.Less(t, int(id), len(logits))
	}
}
