// Package bench measures a model's speed on this machine: prefill and decode
// throughput, time to first token, per-token decode latency, peak memory,
// and how close decode comes to the machine's streaming-read bandwidth.
package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/minerva-llm/minerva/internal/mmap"
	"github.com/minerva-llm/minerva/ir"
	mrt "github.com/minerva-llm/minerva/runtime"
)

// Options say what to measure.
type Options struct {
	Prompt int    // prompt tokens (prefill), in steps of at most UBatch
	UBatch int    // most prompt tokens per step; 0: the whole prompt in one step
	Decode int    // single-token steps after the prefill
	Vocab  int    // random token ids are drawn from [0, Vocab)
	Seed   uint64 // seed of the token ids
	// Warmup runs one step of the prompt's length and one single-token
	// step, then resets the session, so that mmapped weights are paged in
	// and the backend's buffers for both step sizes exist before timing
	// (llama-bench warms up the same way).
	Warmup bool
	// ProbeBytes > 0 samples the streaming-read bandwidth among the
	// decode steps with a Probe of that size read by ProbeThreads: before
	// the first step, after the last, and between, outside the steps'
	// timing, once ProbeEvery steps (default 8) have run since the last
	// sample or sooner, once they have taken ProbeEvery times as long as
	// that sample's pass. The second rule samples long steps as densely in
	// time as short ones: a 7B's 280 ms steps were sampled every 8 steps,
	// 2.2 s apart, five 40 ms passes in a 9 s run against seventeen in
	// TinyLlama's 5 s, and one such run's mean read 18.0 GB/s where the
	// runs beside it read 11–13. The probe's buffer is allocated
	// after the prefill and kept out of Result.PeakRSS. A sample reads
	// more than the caches hold, so the step after it would meet them
	// emptied of the weights the step before left there (1–5 ms slower
	// than its neighbours on a 22 ms TinyLlama step, measured): that step
	// is run once untimed and rewound (Session.Truncate) before it is
	// timed, so that every timed step follows a decode step, as in
	// generation (Result.SettleSteps counts these). Each sample is
	// followed by one of an ArithProbe run by ProbeThreads goroutines
	// (Result.DecodeArith).
	ProbeBytes   int64
	ProbeThreads int
	ProbeEvery   int
}

// Result is what Run measured.
type Result struct {
	PromptTokens int
	DecodeTokens int
	Prefill      time.Duration // the one prefill step: time to first token
	// ColdPrefill is the warm-up's first step (of the prompt's length, or
	// UBatch): the first step after the model is loaded, with its page
	// faults and first allocations, as a user's first prompt meets it.
	// Zero without Warmup.
	ColdPrefill    time.Duration
	DecodeSteps    []time.Duration // each decode step
	PrefillTokensS float64
	DecodeTokensS  float64
	DecodeP50      time.Duration
	DecodeP99      time.Duration
	// DecodeBandwidth is the mean of the probe's samples among the
	// decode steps in GB/s (Probe.Mean), 0 without Options.ProbeBytes.
	DecodeBandwidth float64
	// ProbeSamples is each of those samples in order (ProbeSample), for
	// pairing stretches of the run with the samples around them.
	ProbeSamples []ProbeSample
	// DecodeArith is the mean of an ArithProbe's samples taken right
	// after each bandwidth sample, in billions of multiply-adds a second
	// (0 without Options.ProbeBytes): whether the machine's arithmetic
	// moved during the run, where DecodeBandwidth says whether its
	// memory did.
	DecodeArith float64
	// SettleSteps is the number of untimed decode steps run after the
	// probe's samples (Options.ProbeBytes), each rewound before the same
	// step was run again and timed.
	SettleSteps int
	// PeakRSS is the process's peak resident set (PeakRSS) at the end of
	// the run, less the probe's buffer: the larger of the peak before the
	// buffer was allocated and the resident set at the end without it
	// (the process's: an earlier run's probe counts in a later run's).
	PeakRSS int64
}

// A ProbeSample is one of the probe's passes among the decode steps.
type ProbeSample struct {
	GBs   float64 // its read bandwidth
	Arith float64 // the ArithProbe sample after it, G multiply-adds/s
	After int     // timed decode steps before it
	// Steal is the time the hypervisor ran something else on the
	// machine's CPUs (all of them together) since the sample before
	// (StealTime), -1 where it cannot be read: a vCPU taken away in
	// mid-step holds up the other at the step's next hand-over.
	Steal time.Duration
}

// DecodeTime is the decode steps' time together.
func (r *Result) DecodeTime() time.Duration {
	var t time.Duration
	for _, d := range r.DecodeSteps {
		t += d
	}
	return t
}

// DecodeSteal is the hypervisor's steal over the decode run, from before
// its first sample to its last (the samples' Steal summed); false where
// there were no samples or one could not read it.
func (r *Result) DecodeSteal() (time.Duration, bool) {
	var t time.Duration
	for _, ps := range r.ProbeSamples {
		if ps.Steal < 0 {
			return 0, false
		}
		t += ps.Steal
	}
	return t, len(r.ProbeSamples) > 0
}

// Run evaluates o.Prompt random tokens in steps of at most o.UBatch, then
// o.Decode single tokens, timing each step. Every step asks for the logits
// of its last token alone (Session.EvalLast), as generation does. The
// session must have room for both.
func Run(sess *mrt.Session, o Options) (*Result, error) {
	if o.Prompt < 1 {
		return nil, fmt.Errorf("prompt length %d must be ≥ 1", o.Prompt)
	}
	if o.Decode < 1 {
		return nil, fmt.Errorf("decode length %d must be ≥ 1", o.Decode)
	}
	if o.Vocab < 1 {
		return nil, fmt.Errorf("vocabulary size %d must be ≥ 1", o.Vocab)
	}
	if free := sess.Context() - sess.Pos(); o.Prompt+o.Decode > free {
		return nil, fmt.Errorf("%d prompt + %d decode tokens do not fit the context (%d positions free)", o.Prompt, o.Decode, free)
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x6d696e65727661))
	ids := func(n int) []int32 {
		t := make([]int32, n)
		for i := range t {
			t[i] = int32(rng.IntN(o.Vocab))
		}
		return t
	}
	ub := o.UBatch
	if ub <= 0 || ub > o.Prompt {
		ub = o.Prompt
	}
	r := &Result{PromptTokens: o.Prompt, DecodeTokens: o.Decode}
	if o.Warmup {
		for i, n := range []int{ub, 1} {
			t := time.Now()
			if _, err := sess.EvalLast(ids(n)); err != nil {
				return nil, err
			}
			if i == 0 {
				r.ColdPrefill = time.Since(t)
			}
		}
		sess.Reset()
	}
	prompt := ids(o.Prompt)
	steps := make([][]int32, o.Decode)
	for i := range steps {
		steps[i] = ids(1)
	}
	t0 := time.Now()
	for at := 0; at < len(prompt); at += ub {
		if _, err := sess.EvalLast(prompt[at:min(at+ub, len(prompt))]); err != nil {
			return nil, err
		}
	}
	r.Prefill = time.Since(t0)
	var probe *Probe
	var arith *ArithProbe
	peakBefore := int64(0)
	if o.ProbeBytes > 0 {
		peakBefore = PeakRSS()
		probe = NewProbe(o.ProbeBytes, o.ProbeThreads)
		arith = NewArithProbe(o.ProbeThreads)
		defer probe.Close() // on an error below; a second Close does nothing
	}
	every := o.ProbeEvery
	if every <= 0 {
		every = 8
	}
	// The probe reads with every core: the program's polling workers
	// (runtime.Quiescer) are sent to sleep first, so that they take no
	// core from it.
	steal := StealTime()
	sample := func() {
		mrt.Quiesce(sess.Program())
		ps := ProbeSample{GBs: probe.Sample(), Arith: arith.Sample(), After: len(r.DecodeSteps), Steal: -1}
		if now := StealTime(); now >= 0 && steal >= 0 {
			ps.Steal, steal = now-steal, now
		}
		r.ProbeSamples = append(r.ProbeSamples, ps)
	}
	// Steps and their time since the last sample: every steps "since"
	// none, so that the first step has a sample before it.
	since, sinceT := every, time.Duration(0)
	for _, tok := range steps {
		if probe != nil && (since >= every || sinceT >= time.Duration(every)*probe.last) {
			sample()
			since, sinceT = 0, 0
			if _, err := sess.EvalLast(tok); err != nil {
				return nil, err
			}
			if err := sess.Truncate(sess.Pos() - 1); err != nil {
				return nil, err
			}
			r.SettleSteps++
		}
		t := time.Now()
		if _, err := sess.EvalLast(tok); err != nil {
			return nil, err
		}
		d := time.Since(t)
		r.DecodeSteps = append(r.DecodeSteps, d)
		since, sinceT = since+1, sinceT+d
	}
	if probe != nil {
		sample()
		r.DecodeBandwidth, _ = probe.Mean()
		r.DecodeArith, _ = arith.Mean()
		r.PeakRSS = max(peakBefore, ResidentSet()-probe.Bytes())
		if err := probe.Close(); err != nil {
			return nil, fmt.Errorf("releasing the bandwidth probe: %w", err)
		}
	} else {
		r.PeakRSS = PeakRSS()
	}
	r.PrefillTokensS = rate(o.Prompt, r.Prefill)
	r.DecodeTokensS = rate(o.Decode, r.DecodeTime())
	r.DecodeP50 = Percentile(r.DecodeSteps, 50)
	r.DecodeP99 = Percentile(r.DecodeSteps, 99)
	return r, nil
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Percentile returns the nearest-rank q-th percentile (0 < q ≤ 100) of ds.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	k := int(math.Ceil(q/100*float64(len(s)))) - 1
	return s[max(0, min(k, len(s)-1))]
}

// WeightBytesPerToken is the number of weight bytes one decode step reads:
// the byte size of the weight operand of every matmul-family op (counted
// once per op that reads it; merged constants at their merged size), plus
// one row of every embedding table, plus for every moe op the gate, up and
// down matrices of the experts one token uses: k of E when the route
// weights come from topk_softmax (a backend reads only those), all E
// otherwise.
func WeightBytesPerToken(g *ir.Graph) (int64, error) {
	var total int64
	for _, v := range g.Values {
		var w *ir.Value
		rowOnly := false
		switch v.Op {
		case ir.OpMoE:
			b, err := moeBytesPerToken(v)
			if err != nil {
				return 0, fmt.Errorf("%v: %w", v, err)
			}
			total += b
			continue
		case ir.OpMatMul:
			if len(v.Args) < 2 {
				return 0, fmt.Errorf("%v: matmul with %d operands", v, len(v.Args))
			}
			w = v.Args[1]
		case ir.OpFusedMatMul, ir.OpSwiGLU, ir.OpQKVRoPE:
			p, err := ir.MatMulParts(v)
			if err != nil {
				return 0, fmt.Errorf("%v: %w", v, err)
			}
			w = p.W
		case ir.OpEmbed:
			w, rowOnly = v.Args[0], true
		default:
			continue
		}
		shape, err := w.Type.Shape.Bind(nil)
		if err != nil {
			return 0, fmt.Errorf("%v: weight %v has a symbolic shape", v, w)
		}
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		if rowOnly && len(shape) > 0 {
			n = shape[len(shape)-1]
		}
		b, err := w.Type.DType.RowBytes(n)
		if err != nil {
			return 0, fmt.Errorf("%v: %w", w, err)
		}
		total += b
	}
	return total, nil
}

// KVBytesPerToken is the mean number of KV cache bytes a decode step reads
// over the steps at positions from, from+1, …, from+steps-1: every
// attention op reads its key and value caches' rows 0…p (the last window
// of them when the op has a sliding window), each row at its state's
// element type (f32, f16, or q8_0 blocks). The weights a step reads are
// WeightBytesPerToken; at depth, on a model without grouped heads, the
// caches add as much again as a tenth of them (llama-7b, f16, 576
// positions: 302 MB against 4.0 GB of Q4_K_M weights).
func KVBytesPerToken(g *ir.Graph, from, steps int) (int64, error) {
	if from < 0 || steps <= 0 {
		return 0, fmt.Errorf("decode steps %d from position %d", steps, from)
	}
	var total int64
	for _, v := range g.Values {
		if v.Op != ir.OpAttention && v.Op != ir.OpFlashAttention {
			continue
		}
		if len(v.Args) < 3 {
			return 0, fmt.Errorf("%v: attention with %d operands", v, len(v.Args))
		}
		window := v.Attrs.Int("window", 0)
		var rows int64 // rows read over the steps, one cache
		for p := int64(from); p < int64(from+steps); p++ {
			n := p + 1
			if window > 0 {
				n = min(n, window)
			}
			rows += n
		}
		for _, a := range v.Args[1:3] {
			st, err := cacheState(a)
			if err != nil {
				return 0, fmt.Errorf("%v: %w", v, err)
			}
			// [C, W]: the context may be symbolic, the row is not.
			shape := st.Type.Shape
			if len(shape) != 2 || !shape[1].IsConst() {
				return 0, fmt.Errorf("%v: cache %v is not [C, W] with a constant W", v, st)
			}
			b, err := st.Type.DType.RowBytes(shape[1].N)
			if err != nil {
				return 0, fmt.Errorf("%v: %w", st, err)
			}
			total += rows * b
		}
	}
	return total / int64(steps), nil
}

// cacheState is the state an attention operand reads: the operand itself,
// or the cache a write into it (kvwrite, qkv_rope) wrote.
func cacheState(a *ir.Value) (*ir.Value, error) {
	for a.Op != ir.OpState {
		w := ir.WrittenOperands(a)
		if len(w) != 1 {
			return nil, fmt.Errorf("keys or values %v are not a KV cache state", a)
		}
		a = w[0] // an operand comes earlier in the graph: this ends
	}
	return a, nil
}

var sink uint64

// Bandwidth measures the streaming-read bandwidth in GB/s (1e9 bytes per
// second): threads goroutines each sum a disjoint part of a buffer of about
// size bytes; the best of runs passes counts.
func Bandwidth(size int64, threads, runs int) float64 {
	p := NewProbe(size, threads)
	defer p.Close()
	best := 0.0
	for range max(1, runs) {
		best = max(best, p.Sample())
	}
	return best
}

// passes times passes of work that threads goroutines start at once, and
// keeps their count and total time: what Probe and ArithProbe share.
type passes struct {
	threads int
	sums    []uint64 // each thread's result, one cache line apart
	elapsed time.Duration
	last    time.Duration // the latest pass's
	n       int
}

func newPasses(threads int) passes {
	threads = max(1, threads)
	return passes{threads: threads, sums: make([]uint64, 8*threads)}
}

// run starts work(t) on every thread t at once, waits for all, adds the
// pass to the total and returns its time. work's results are kept (sink),
// so that the compiler keeps the work.
func (ps *passes) run(work func(t int) uint64) time.Duration {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for t := range ps.threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ps.sums[8*t] = work(t)
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	d := time.Since(t0)
	for t := range ps.threads {
		sink += ps.sums[8*t]
	}
	ps.elapsed += d
	ps.last = d
	ps.n++
	return d
}

// mean is perPass units (all threads together) a pass over the passes'
// total time, in billions a second (0 before the first), and the number of
// passes.
func (ps *passes) mean(perPass float64) (float64, int) {
	if ps.elapsed <= 0 {
		return 0, ps.n
	}
	return perPass * float64(ps.n) / ps.elapsed.Seconds() / 1e9, ps.n
}

// A Probe measures the streaming-read bandwidth in samples taken between
// other work, for a figure from the same stretch of time as that work: on
// a shared machine the bandwidth moves by a quarter between runs (a 2-core
// VM read 14–22 GB/s in thirty passes over 512 MiB in a row, median 0.84
// of the best), so decode's mean speed is comparable with the mean of
// samples taken among its steps, not with a best pass taken before or
// after. Run takes them (Options.ProbeBytes); minervac bench reports
// decode's efficiency against both.
type Probe struct {
	passes
	buf     []uint64
	per     int          // words per thread
	release func() error // unmaps buf (nil: heap memory)
}

// NewProbe allocates and writes the probe's buffer of about size bytes (at
// least 8 words per thread), read by threads goroutines at once. The
// buffer is the memory the CPU backend keeps its weights in (mmap.Anon:
// off the Go heap, in huge pages where the system has them), so that
// both reads meet the same page sizes; Close releases it.
func NewProbe(size int64, threads int) *Probe {
	threads = max(1, threads)
	n := int(size / 8)
	n -= n % (8 * threads) // whole 8-word groups per thread
	if n <= 0 {
		n = 8 * threads
	}
	p := &Probe{passes: newPasses(threads), per: n / threads}
	if b, release, err := mmap.Anon(n * 8); err == nil {
		p.buf, p.release = unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), n), release
	} else {
		p.buf = make([]uint64, n) // no anonymous mapping here: the heap's pages
	}
	for i := range p.buf {
		p.buf[i] = uint64(i)
	}
	return p
}

// Close releases the probe's buffer; the probe must not be used after.
func (p *Probe) Close() error {
	p.buf = nil
	if p.release == nil {
		return nil
	}
	err := p.release()
	p.release = nil
	return err
}

// Bytes is the size of the probe's buffer.
func (p *Probe) Bytes() int64 { return int64(len(p.buf)) * 8 }

// Sample reads the whole buffer once, threads parts at once, and returns
// that pass's GB/s; the pass is added to Mean's figure.
func (p *Probe) Sample() float64 {
	d := p.run(func(t int) uint64 { return SumWords(p.buf[t*p.per : (t+1)*p.per]) })
	return float64(p.Bytes()) / d.Seconds() / 1e9
}

// Mean is the bytes of every sample over their total time, in GB/s (0
// before the first), and the number of samples.
func (p *Probe) Mean() (gbs float64, samples int) { return p.mean(float64(p.Bytes())) }

// SumWords adds the words of s (len a multiple of 8) with independent
// accumulators so that the loop is bound by memory, not by the adder chain:
// the probe's read, which kern's stream benchmarks use for theirs.
func SumWords(s []uint64) uint64 {
	var a0, a1, a2, a3 uint64
	for i := 0; i+8 <= len(s); i += 8 {
		c := s[i : i+8 : i+8]
		a0 += c[0] + c[4]
		a1 += c[1] + c[5]
		a2 += c[2] + c[6]
		a3 += c[3] + c[7]
	}
	return a0 + a1 + a2 + a3
}

// StealTime returns the time the hypervisor has given this machine's CPUs
// to something else since boot, all CPUs together (the steal column of
// /proc/stat's cpu line), or -1 off Linux or where it cannot be read. The
// column counts USER_HZ ticks, 100 a second on every Linux build Go runs
// on (sysconf(_SC_CLK_TCK) needs cgo): 10 ms steps.
func StealTime() time.Duration {
	if runtime.GOOS != "linux" {
		return -1
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	return parseSteal(string(b))
}

// parseSteal reads the steal column (the eighth number) of the "cpu " line
// of a /proc/stat text, -1 when there is none or it does not fit a
// Duration.
func parseSteal(stat string) time.Duration {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return -1
	}
	const tick = 10 * time.Millisecond
	ticks, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil || ticks < 0 || ticks > math.MaxInt64/int64(tick) { // past 292 years of steal a Duration overflows
		return -1
	}
	return time.Duration(ticks) * tick
}

// PeakRSS returns the process's peak resident set size in bytes (VmHWM of
// /proc/self/status) on Linux, and 0 elsewhere or when it cannot be read.
func PeakRSS() int64 { return statusBytes("VmHWM:") }

// ResidentSet returns the process's resident set size in bytes now (VmRSS),
// as PeakRSS.
func ResidentSet() int64 { return statusBytes("VmRSS:") }

func statusBytes(key string) int64 {
	if runtime.GOOS != "linux" {
		return 0
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	return parseStatus(string(b), key)
}

// parseStatus returns the size in bytes on the line of /proc/self/status
// that starts with key ("VmHWM:    1234 kB"), 0 when there is none.
func parseStatus(status, key string) int64 {
	for _, line := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(line, key)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0
		}
		return kb * 1024
	}
	return 0
}

// moeBytesPerToken is the expert weight bytes a moe op reads for one token.
func moeBytesPerToken(v *ir.Value) (int64, error) {
	if len(v.Args) < 5 {
		return 0, fmt.Errorf("moe with %d operands", len(v.Args))
	}
	var total int64
	for _, w := range v.Args[2:5] {
		shape, err := w.Type.Shape.Bind(nil)
		if err != nil || len(shape) != 3 || shape[0] <= 0 {
			return 0, fmt.Errorf("expert weight %v is not a constant-shaped [E, N, K]", w)
		}
		used := shape[0]
		if r := v.Args[1]; r.Op == ir.OpTopKSoftmax {
			used = min(used, r.Attrs.Int("k", used))
		}
		b, err := w.Type.DType.RowBytes(shape[1] * shape[2])
		if err != nil {
			return 0, fmt.Errorf("%v: %w", w, err)
		}
		total += used * b
	}
	return total, nil
}
