package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"text/tabwriter"
	"time"

	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/bench"
	"github.com/minerva-llm/minerva/runtime/cpu"
	"github.com/minerva-llm/minerva/runtime/cpu/kern"
)

type benchCmd struct {
	Model       string `arg:"" help:"Plan file (from minervac compile -o) or model file (.gguf)." type:"path"`
	P           int    `short:"p" help:"Prompt tokens (prefill); decode is then measured at this depth." default:"512"`
	UBatch      int    `name:"ubatch" help:"Most prompt tokens per step (0: the whole prompt in one step; 512 is llama.cpp's, as in llama-batched-bench -npp P)." default:"0"`
	N           int    `short:"n" help:"Single-token decode steps after the prefill." default:"128"`
	Depth       int    `help:"Long-context run: decode measured with D tokens already in the KV cache after a prefill of a D-token prompt (as -p D, with --ubatch 512 unless given; llama-batched-bench -npp D -ntg N -npl 1)." placeholder:"D"`
	JSON        bool   `help:"Print one JSON object instead of a table."`
	Target      string `short:"t" help:"Backend for a .gguf model: goasm (the CPU), reference (the interpreter) or cuda (an NVIDIA GPU)." default:"goasm"`
	cacheFlags  `embed:""`
	Seed        uint64 `help:"Seed of the random prompt and decode token ids." default:"1"`
	BWMiB       int    `name:"bw-mib" help:"Buffer size of the bandwidth measurement in MiB (at least 256; 0 skips it, so that an outside measure of the process's peak RSS, /usr/bin/time -v, is the model's alone)." default:"512"`
	Verbose     bool   `short:"v" help:"Print load and compile times on stderr."`
	KernelTimes bool   `name:"kernel-times" help:"Also time each kernel family in a decode step at depth -p and in a prefill step of -p tokens (GPU: device events around every launch; CPU: the clock around every op, matmuls by weight type)."`
	CPUProfile  string `name:"cpuprofile" help:"Write a pprof CPU profile of the prefill and decode steps to this file." type:"path"`
	MemProfile  string `name:"memprofile" help:"Write a pprof heap profile (what is live, and every allocation since the start) to this file after the run." type:"path"`
}

// benchReport is the --json output.
type benchReport struct {
	Model               string  `json:"model"`
	Target              string  `json:"target"`
	Threads             int     `json:"threads"`
	Kernels             string  `json:"kernels,omitempty"`
	PromptTokens        int     `json:"prompt_tokens"`
	DecodeTokens        int     `json:"decode_tokens"`
	PrefillTokensS      float64 `json:"prefill_tokens_s"`
	DecodeTokensS       float64 `json:"decode_tokens_s"`
	TTFTMs              float64 `json:"ttft_ms"`
	DecodeP50Ms         float64 `json:"decode_p50_ms"`
	DecodeP99Ms         float64 `json:"decode_p99_ms"`
	PeakRSSBytes        int64   `json:"peak_rss_bytes"`
	WeightBytesPerToken int64   `json:"weight_bytes_per_token"`
	// KVBytesPerToken is the mean KV cache bytes a decode step read
	// (bench.KVBytesPerToken); both efficiencies count it beside the
	// weights, since decode streams both.
	KVBytesPerToken  int64        `json:"kv_bytes_per_token"`
	BandwidthGBs     float64      `json:"bandwidth_gb_s"`
	DecodeEfficiency float64      `json:"decode_efficiency"`
	Machine          benchMachine `json:"machine"`
	// DecodeBandwidthGBs is the mean read bandwidth of the samples taken
	// among the decode steps (bench.Probe; CPU targets), and
	// DecodeEfficiencyPaired decode's read rate over it: on a shared
	// machine, whose bandwidth moves between runs, the efficiency of the
	// code; DecodeEfficiency (over the best of five passes after the run,
	// BandwidthGBs) is bounded by how far the mean falls below the best.
	DecodeBandwidthGBs     float64 `json:"decode_bandwidth_gb_s,omitempty"`
	DecodeBandwidthSamples int     `json:"decode_bandwidth_samples,omitempty"`
	DecodeEfficiencyPaired float64 `json:"decode_efficiency_paired,omitempty"`
	// ProbeSamples is each of those samples (bench.ProbeSample) and
	// DecodeStepMs each timed decode step, in order: what the means
	// above are made of, for a look at how they moved within the run.
	ProbeSamples []probeSample `json:"probe_samples,omitempty"`
	DecodeStepMs []float64     `json:"decode_step_ms,omitempty"`
	// DecodeArithGOPs is the mean of the arithmetic samples taken right
	// after the bandwidth ones (bench.ArithProbe, billions of 64-bit
	// multiply-adds a second over all threads): compared between runs, it
	// says whether the cores' arithmetic moved while the bandwidth did.
	DecodeArithGOPs float64 `json:"decode_arith_gops,omitempty"`
	// DecodeSettleSteps is the number of decode steps run untimed after a
	// sample, each then rewound and run again timed (bench.Result's
	// SettleSteps): a sample empties the caches, which a decode step
	// following a decode step does not meet.
	DecodeSettleSteps int `json:"decode_settle_steps,omitempty"`
	// DecodeStealMs is the time the hypervisor gave the machine's CPUs
	// to something else over the decode run (from before its first
	// sample to its last), all CPUs together (the samples' steal_ms
	// summed; absent where /proc/stat has no steal column): on the Ice Lake VM of docs/PERFORMANCE.md a
	// 7B decode run that fell to 1.7 tokens/s from its usual 4.0 lost
	// 21.8 s of CPU time in 18.7 s of steps.
	DecodeStealMs *float64 `json:"decode_steal_ms,omitempty"`
	// KernelTimes (--kernel-times): per kernel family, the time of a
	// decode step at depth -p and of the prefill step of -p tokens.
	KernelTimes map[string][]runtime.KernelTime `json:"kernel_times,omitempty"`
	// LoadMs is from the command's start to a session ready to run: the
	// model opened, compiled (or its cached plan read), its weights loaded
	// or repacked. FirstTokenMs adds the first, cold prompt step: what a
	// user waits from launch to the first token.
	LoadMs       float64 `json:"load_ms"`
	FirstTokenMs float64 `json:"first_token_ms"`
}

// probeSample is bench.ProbeSample in the JSON report: a sample's GB/s,
// the arithmetic sample's rate after it, the timed decode steps before it,
// and the hypervisor's steal time since the sample before (-1: unknown).
type probeSample struct {
	GBs     float64 `json:"gb_s"`
	Arith   float64 `json:"arith_gops"`
	After   int     `json:"after_steps"`
	StealMs float64 `json:"steal_ms"`
}

type benchMachine struct {
	GOOS         string  `json:"goos"`
	GOARCH       string  `json:"goarch"`
	CPUs         int     `json:"cpus"`
	Device       string  `json:"device,omitempty"` // the accelerator the plan ran on, whose copy bandwidth is measured
	BandwidthGBs float64 `json:"bandwidth_gb_s"`
}

func (c *benchCmd) Run(opts *runtime.Options) error {
	if c.Depth < 0 {
		return usageError{fmt.Sprintf("--depth %d must be ≥ 1", c.Depth)}
	}
	if c.Depth > 0 {
		c.P = c.Depth
		if c.UBatch == 0 {
			c.UBatch = runtime.DefaultUBatch
		}
	}
	if c.P < 1 {
		return usageError{fmt.Sprintf("-p %d: the prompt length must be ≥ 1", c.P)}
	}
	if c.N < 1 {
		return usageError{fmt.Sprintf("-n %d: the number of decode steps must be ≥ 1", c.N)}
	}
	if c.BWMiB != 0 && c.BWMiB < 256 {
		return usageError{fmt.Sprintf("--bw-mib %d: the bandwidth buffer must be at least 256 MiB (0: no bandwidth measurement)", c.BWMiB)}
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = cpu.DefaultThreads()
	}
	tm := &timer{on: c.Verbose}
	tm.reset()
	start := time.Now()
	m, err := openRunnable(c.Model, c.Target, c.cacheFlags, opts, tm)
	if err != nil {
		return err
	}
	defer m.Close()
	if c.P+c.N > m.ctx && c.Depth == 0 {
		return usageError{fmt.Sprintf("-p %d + -n %d = %d positions exceed the model's context of %d", c.P, c.N, c.P+c.N, m.ctx)}
	}
	wbytes, err := bench.WeightBytesPerToken(m.graph)
	if err != nil {
		return err
	}
	kvbytes, err := bench.KVBytesPerToken(m.graph, c.P, c.N)
	if err != nil {
		return err
	}
	sess, err := m.session(c.P + c.N)
	if err != nil {
		return err
	}
	defer sess.Close()
	load := time.Since(start)
	vocab := min(m.tok.VocabSize(), sess.VocabSize())
	stopProfile, err := startCPUProfile(c.CPUProfile)
	if err != nil {
		return err
	}
	if c.UBatch < 0 {
		return usageError{fmt.Sprintf("--ubatch %d must be ≥ 0", c.UBatch)}
	}
	_, onDevice := sess.Program().(runtime.DeviceProgram)
	bo := bench.Options{Prompt: c.P, UBatch: c.UBatch, Decode: c.N, Vocab: vocab, Seed: c.Seed, Warmup: true}
	if c.BWMiB > 0 && !onDevice {
		// The bandwidth also sampled among the decode steps: on a shared
		// machine only a figure from the same stretch of time says how
		// close decode comes to what the memory gave it (bench.Probe).
		bo.ProbeBytes, bo.ProbeThreads = int64(c.BWMiB)<<20, goruntime.NumCPU()
	}
	res, err := bench.Run(sess, bo)
	if err != nil {
		return err
	}
	stopProfile()
	// Peak RSS without the bandwidth buffers (Run keeps its probe out).
	rss := res.PeakRSS
	if err := writeHeapProfile(c.MemProfile); err != nil {
		return err
	}
	cpus := goruntime.NumCPU()
	var bw float64
	device := ""
	dp, _ := sess.Program().(runtime.DeviceProgram)
	if onDevice {
		device = dp.Device()
	}
	switch {
	case c.BWMiB == 0: // not measured: efficiency is left out
	case onDevice:
		// An accelerator's decode streams its own memory: efficiency is
		// measured against that memory's copy bandwidth.
		if bw, err = dp.DeviceBandwidth(int64(c.BWMiB)<<20, 5); err != nil {
			return fmt.Errorf("measuring the bandwidth of %s: %w", device, err)
		}
	default:
		runtime.Quiesce(sess.Program()) // its polling workers take no core from the read
		bw = bench.Bandwidth(int64(c.BWMiB)<<20, cpus, 5)
	}
	var ktimes map[string][]runtime.KernelTime
	if c.KernelTimes {
		kt, ok := sess.Program().(runtime.KernelTimer)
		if !ok {
			return usageError{fmt.Sprintf("--kernel-times: target %s does not time its kernels (goasm and the GPU targets do)", m.target)}
		}
		ktimes = map[string][]runtime.KernelTime{}
		// The decode step at the depth the run decoded from (its
		// attention reads the prompt's cache rows), the prefill step at 0.
		for _, s := range []struct {
			name    string
			pos0, T int
		}{{"decode", c.P, 1}, {"prefill", 0, c.P}} {
			if ktimes[s.name], err = kt.KernelTimes(0, s.pos0, s.T, 5); err != nil {
				return fmt.Errorf("--kernel-times: %w", err)
			}
		}
	}
	// efficiency is decode's read rate, weights and KV cache, over a
	// bandwidth (0 when that was not measured).
	efficiency := func(gbs float64) float64 {
		if gbs <= 0 {
			return 0
		}
		return float64(wbytes+kvbytes) * res.DecodeTokensS / (gbs * 1e9)
	}
	eff, effPaired := efficiency(bw), efficiency(res.DecodeBandwidth)
	r := benchReport{
		Model: displayName(c.Model), Target: m.target, Threads: threads,
		Kernels:      kernelsOf(m.target, opts.CPUKernels),
		PromptTokens: c.P, DecodeTokens: c.N,
		PrefillTokensS: round(res.PrefillTokensS, 2), DecodeTokensS: round(res.DecodeTokensS, 2),
		TTFTMs: msOf(res.Prefill), DecodeP50Ms: msOf(res.DecodeP50), DecodeP99Ms: msOf(res.DecodeP99),
		PeakRSSBytes: rss, WeightBytesPerToken: wbytes, KVBytesPerToken: kvbytes, BandwidthGBs: round(bw, 2),
		DecodeEfficiency: round(eff, 6), KernelTimes: ktimes,
		DecodeBandwidthGBs: round(res.DecodeBandwidth, 2), DecodeBandwidthSamples: len(res.ProbeSamples),
		DecodeEfficiencyPaired: round(effPaired, 6), DecodeArithGOPs: round(res.DecodeArith, 3), DecodeSettleSteps: res.SettleSteps,
		LoadMs: msOf(load), FirstTokenMs: msOf(load + res.ColdPrefill),
		Machine: benchMachine{GOOS: goruntime.GOOS, GOARCH: goruntime.GOARCH, CPUs: cpus, Device: device, BandwidthGBs: round(bw, 2)},
	}
	for _, ps := range res.ProbeSamples {
		steal := -1.0
		if ps.Steal >= 0 {
			steal = msOf(ps.Steal)
		}
		r.ProbeSamples = append(r.ProbeSamples, probeSample{GBs: round(ps.GBs, 3), Arith: round(ps.Arith, 3), After: ps.After, StealMs: steal})
	}
	for _, d := range res.DecodeSteps {
		r.DecodeStepMs = append(r.DecodeStepMs, msOf(d))
	}
	if steal, ok := res.DecodeSteal(); ok {
		ms := msOf(steal)
		r.DecodeStealMs = &ms
	}
	if c.JSON {
		return json.NewEncoder(os.Stdout).Encode(r)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "model\t%s (%s, %d threads)\n", r.Model, r.Target, r.Threads)
	if r.Kernels != "" {
		fmt.Fprintf(w, "kernels\t%s\n", r.Kernels)
	}
	bwText := fmt.Sprintf("%.1f GB/s", r.BandwidthGBs)
	if bw == 0 {
		bwText = "bandwidth not measured"
	}
	if device != "" {
		fmt.Fprintf(w, "device\t%s, %s copy\n", device, bwText)
	} else {
		if bw > 0 {
			bwText += " read"
		}
		fmt.Fprintf(w, "machine\t%s/%s, %d CPUs, %s\n", r.Machine.GOOS, r.Machine.GOARCH, cpus, bwText)
	}
	fmt.Fprintf(w, "load\t%.1f ms\t(to a ready session; first token %.1f ms after start, cold)\n", r.LoadMs, r.FirstTokenMs)
	fmt.Fprintf(w, "prefill\t%.1f tok/s\t(%d tokens, time to first token %.1f ms)\n", r.PrefillTokensS, c.P, r.TTFTMs)
	fmt.Fprintf(w, "decode\t%.1f tok/s\t(%d tokens at depth %d, p50 %.2f ms, p99 %.2f ms)\n", r.DecodeTokensS, c.N, c.P, r.DecodeP50Ms, r.DecodeP99Ms)
	fmt.Fprintf(w, "weights/token\t%.1f MiB\n", float64(wbytes)/(1<<20))
	fmt.Fprintf(w, "KV cache/token\t%.1f MiB\t(read by a decode step, the mean over the steps)\n", float64(kvbytes)/(1<<20))
	if bw > 0 {
		fmt.Fprintf(w, "decode efficiency\t%.1f%%\t(of the measured bandwidth, the best of five passes)\n", 100*eff)
	}
	if effPaired > 0 {
		lo, hi := math.Inf(1), 0.0
		for _, ps := range r.ProbeSamples {
			lo, hi = min(lo, ps.GBs), max(hi, ps.GBs)
		}
		fmt.Fprintf(w, "\t%.1f%%\t(of the %.1f GB/s read in %d passes among the decode steps, %.1f–%.1f; the step after each run untimed, then rewound and timed)\n", 100*effPaired, r.DecodeBandwidthGBs, r.DecodeBandwidthSamples, lo, hi)
	}
	if r.DecodeArithGOPs > 0 {
		fmt.Fprintf(w, "arithmetic\t%.2f G/s\t(64-bit multiply-adds, %d threads, one pass after each bandwidth pass)\n", r.DecodeArithGOPs, bo.ProbeThreads)
	}
	if r.DecodeStealMs != nil {
		fmt.Fprintf(w, "steal\t%.0f ms\t(CPU time the hypervisor gave to something else during the decode run, all CPUs together; the steps took %.0f ms)\n", *r.DecodeStealMs, msOf(res.DecodeTime()))
	}
	fmt.Fprintf(w, "peak RSS\t%.1f MiB\n", float64(rss)/(1<<20))
	for _, step := range []string{"decode", "prefill"} {
		for _, kt := range ktimes[step] {
			fmt.Fprintf(w, "%s kernels\t%s\t%d launches, %.1f µs\n", step, kt.Family, kt.Launches, kt.Micros)
		}
	}
	return w.Flush()
}

// kernelsOf names the CPU kernel variant the goasm target runs
// (--cpu-kernels or the best this CPU has); other targets have none.
func kernelsOf(target, variant string) string {
	if target != "goasm" {
		return ""
	}
	if variant != "" {
		return variant
	}
	return kern.Variant()
}

func msOf(d time.Duration) float64 { return round(d.Seconds()*1e3, 3) }

func round(x float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(x*p+0.5)) / p
}

// writeHeapProfile writes the heap profile to path (nothing when path is
// empty).
func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("--memprofile: %w", err)
	}
	return f.Close()
}

// startCPUProfile starts a pprof CPU profile into path (none when path is
// empty) and returns what stops it and closes the file.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
