package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/runtime/bench"
)

func TestBenchJSON(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	stdout, stderr, code := minervac(t, "bench", model, "-p", "16", "-n", "8", "--threads", "2", "--json")
	require.Equal(t, 0, code, stderr)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &raw), stdout)
	for _, k := range []string{"prefill_tokens_s", "decode_tokens_s", "ttft_ms", "decode_p50_ms", "decode_p99_ms",
		"peak_rss_bytes", "weight_bytes_per_token", "bandwidth_gb_s", "decode_efficiency", "load_ms", "first_token_ms",
		"decode_bandwidth_gb_s", "decode_bandwidth_samples", "decode_efficiency_paired", "kv_bytes_per_token", "decode_settle_steps",
		"decode_arith_gops"} {
		v, ok := raw[k].(float64)
		require.True(t, ok, "field %s missing or not a number in %s", k, stdout)
		require.Greater(t, v, 0.0, k)
	}
	var r benchReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &r))
	require.Equal(t, 16, r.PromptTokens)
	require.Equal(t, 8, r.DecodeTokens)
	require.Equal(t, 2, r.Threads)
	require.Equal(t, "goasm", r.Target)
	require.LessOrEqual(t, r.DecodeEfficiency, 1.5)
	require.LessOrEqual(t, r.DecodeP50Ms, r.DecodeP99Ms)
	require.Greater(t, r.FirstTokenMs, r.LoadMs, "the first token comes after the load")
	require.NotEmpty(t, r.Machine.GOOS)
	require.NotEmpty(t, r.Machine.GOARCH)
	require.Positive(t, r.Machine.CPUs)
	require.Equal(t, r.BandwidthGBs, r.Machine.BandwidthGBs)
	// Eight decode steps: samples before the first and after the last;
	// the first step settles once after its sample.
	require.Equal(t, 2, r.DecodeBandwidthSamples)
	require.Equal(t, 1, r.DecodeSettleSteps)
	// The report lists both samples (where they fell) and every step.
	require.Len(t, r.ProbeSamples, 2)
	require.Equal(t, []int{0, 8}, []int{r.ProbeSamples[0].After, r.ProbeSamples[1].After})
	require.Len(t, r.DecodeStepMs, 8)
	// Their mean over the passes' total time is the reported bandwidth:
	// the harmonic mean of the GB/s of equal passes (each rounded to 1e-3,
	// the mean to 0.01).
	var inv, steal float64
	for _, ps := range r.ProbeSamples {
		steal += ps.StealMs
		require.Positive(t, ps.GBs)
		require.Positive(t, ps.Arith)
		require.GreaterOrEqual(t, ps.StealMs, -1.0)
		inv += 1 / ps.GBs
	}
	require.InDelta(t, r.DecodeBandwidthGBs, float64(len(r.ProbeSamples))/inv, 0.006+1e-3*r.DecodeBandwidthGBs)
	// The run's steal time is theirs summed, where the machine has one.
	if bench.StealTime() >= 0 {
		require.NotNil(t, r.DecodeStealMs)
		require.InDelta(t, steal, *r.DecodeStealMs, 1e-6)
	}
	for _, ms := range r.DecodeStepMs {
		require.Positive(t, ms)
	}
	// The same decode speed over two bandwidths: the efficiencies are
	// in their inverse ratio.
	require.InDelta(t, r.DecodeEfficiency*r.BandwidthGBs, r.DecodeEfficiencyPaired*r.DecodeBandwidthGBs, 0.01*r.DecodeEfficiency*r.BandwidthGBs+0.01)
	// stories260K is all f32: 260K parameters read per token, about 1 MB.
	require.InDelta(t, 1.0e6, float64(r.WeightBytesPerToken), 0.2e6)
	// Its 5 layers keep 4 KV heads of 8 in f16 caches: 2·32·2 bytes a
	// layer and position; the steps at positions 16…23 read 17…24 rows.
	require.Equal(t, int64(5*2*32*2)*(17+24)/2, r.KVBytesPerToken)
	// Both efficiencies count the weights and the KV cache. The JSON
	// rounds the rate and the bandwidth to 0.01 (and the efficiency to
	// 1e-6), so the recomputed efficiency may differ by their relative
	// rounding: a bandwidth measured at a few GB/s, as on a loaded CI
	// machine, moves it by 1e-3 and more.
	read := float64(r.WeightBytesPerToken+r.KVBytesPerToken) * r.DecodeTokensS
	rounding := 0.005/r.BandwidthGBs + 0.005/r.DecodeTokensS
	require.InDelta(t, read/(r.BandwidthGBs*1e9), r.DecodeEfficiency, rounding*r.DecodeEfficiency+2e-6)
}

func TestBenchTable(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	stdout, stderr, code := minervac(t, "bench", model, "-p", "4", "-n", "2")
	require.Equal(t, 0, code, stderr)
	for _, s := range []string{"load", "prefill", "decode", "tok/s", "peak RSS", "decode efficiency", "GB/s", "among the decode steps", "KV cache/token"} {
		require.Contains(t, stdout, s)
	}
}

// TestBenchNoBandwidth: --bw-mib 0 leaves out the bandwidth measurement
// (and its 512 MiB buffer from the process's peak RSS) and the efficiency
// computed from it; the rest is measured as usual.
func TestBenchNoBandwidth(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	stdout, stderr, code := minervac(t, "bench", model, "-p", "8", "-n", "4", "--bw-mib", "0", "--json")
	require.Equal(t, 0, code, stderr)
	var r benchReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &r), stdout)
	require.Zero(t, r.BandwidthGBs)
	require.Zero(t, r.DecodeEfficiency)
	require.Zero(t, r.DecodeBandwidthGBs)
	require.Zero(t, r.DecodeEfficiencyPaired)
	require.Positive(t, r.DecodeTokensS)
	require.Positive(t, r.PeakRSSBytes)
	stdout, stderr, code = minervac(t, "bench", model, "-p", "4", "-n", "2", "--bw-mib", "0")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "bandwidth not measured")
	require.NotContains(t, stdout, "decode efficiency")
}

// TestBenchFormats: bench runs the same model as a GGUF file, a Hugging
// Face directory and an MLX one (stories260K and its twins), reporting
// load and first-token times for each.
func TestBenchFormats(t *testing.T) {
	for _, model := range []string{"models/gguf/stories260K.gguf", "models/hf/stories260K-bf16", "models/hf/stories260K-mlx-q4"} {
		stdout, stderr, code := minervac(t, "bench", shared.Path(t, model), "-p", "8", "-n", "4", "--json")
		require.Equal(t, 0, code, stderr)
		var r benchReport
		require.NoError(t, json.Unmarshal([]byte(stdout), &r), stdout)
		require.Positive(t, r.LoadMs, model)
		require.Greater(t, r.FirstTokenMs, r.LoadMs, model)
		require.Positive(t, r.DecodeTokensS, model)
	}
}

func TestBenchBadFlags(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-p", "0"}, "-p 0: the prompt length must be ≥ 1"},
		{[]string{"--n=-1"}, "-n -1: the number of decode steps must be ≥ 1"},
		{[]string{"-n", "-1"}, "-n -1: the number of decode steps must be ≥ 1"}, // the value, not a short flag (goStyleFlags)
		{[]string{"-n", "0"}, "-n 0: the number of decode steps must be ≥ 1"},
		{[]string{"--threads=-2"}, "--threads -2 must be ≥ 0"},
		{[]string{"-p", "2000", "-n", "100"}, "-p 2000 + -n 100 = 2100 positions exceed the model's context of 2048"},
		{[]string{"--bw-mib", "100"}, "--bw-mib 100: the bandwidth buffer must be at least 256 MiB (0: no bandwidth measurement)"},
	} {
		_, stderr, code := minervac(t, append([]string{"bench", model}, tc.args...)...)
		require.Equal(t, 2, code, stderr)
		require.Contains(t, stderr, tc.want)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one-line error: %q", stderr)
	}
}

// --depth D prefills a D-token prompt in steps of --ubatch (512 unless
// given) and measures decode with D tokens in the cache.
func TestBenchDepth(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	stdout, stderr, code := minervac(t, "bench", model, "--depth", "600", "-n", "4", "--json")
	require.Equal(t, 0, code, stderr)
	var r benchReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &r), stdout)
	require.Equal(t, 600, r.PromptTokens)
	require.Equal(t, 4, r.DecodeTokens)
	require.Positive(t, r.PeakRSSBytes)
	stdout, stderr, code = minervac(t, "bench", model, "--depth", "40", "--ubatch", "16", "-n", "2")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "(2 tokens at depth 40,")
	_, stderr, code = minervac(t, "bench", model, "--depth=-1")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--depth -1 must be ≥ 1")
}

// TestBenchKernelTimesCPU: --kernel-times on the goasm target reports the
// CPU program's op families for a decode and a prefill step, each op of
// the step in one family: stories260K's 5 layers give 5 SwiGLU and 5 QKV
// ops (f32 weights) a step. The reference target does not time its ops.
func TestBenchKernelTimesCPU(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	stdout, stderr, code := minervac(t, "bench", model, "-p", "16", "-n", "4", "--threads", "2", "--bw-mib", "0", "--kernel-times", "--json")
	require.Equal(t, 0, code, stderr)
	var r benchReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &r), stdout)
	for _, step := range []string{"decode", "prefill"} {
		families := map[string]int{}
		for _, k := range r.KernelTimes[step] {
			families[k.Family] = k.Launches
			require.Positive(t, k.Micros, "%s %s", step, k.Family)
		}
		require.Equal(t, 5, families["swiglu/f32"], "%s: %v", step, families)
		require.Equal(t, 5, families["qkv_rope/f32"], "%s: %v", step, families)
	}
	_, stderr, code = minervac(t, "bench", model, "-t", "reference", "-p", "4", "-n", "2", "--bw-mib", "0", "--kernel-times")
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, "--kernel-times: target reference does not time its kernels")
}
