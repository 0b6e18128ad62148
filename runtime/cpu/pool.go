package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// pool is a persistent set of workers: started once per Program, each call
// of run hands out work items 0..n-1: item w to worker w first (the caller
// is worker 0 and takes a late helper's first item after its own), the
// rest through an atomic counter. Which worker computes an item never
// changes what the item computes, so results do not depend on the number
// of workers.
//
// A decode matmul's caller normalizes and encodes the activations alone
// before its run (5–13 µs a TinyLlama op on a 2-core VM, 0.8 ms of a
// 22 ms step in all); meanwhile it posts each helper's first item's
// weights (warmUp), and a polling helper reads them (readAhead) until the
// run starts, so that the item begins on lines in its core's caches. In
// TinyLlama decode at depth 512 a helper read about 5.4 MB of a step's
// 582 MB ahead, and steps took 0.5–0.7% less time (Q4_0, Q4_K, Q6_K,
// alternate steps of one process with and without the posts).
//
// A run ends when its last item does: one worker waits for the other, in
// TinyLlama decode about 2 µs a run on each side, 0.4 ms of core time a
// step over its 111 runs. So a decode run also carries the next matmul's
// first items (tail, set before run and published in runTail before the
// run begins): a helper done with its items reads its own until the next
// run starts, on through the caller's serial part, and the caller waiting
// for a helper reads its own item 0.
// Steps took 0.9–2.3% less time (alternate steps of one process, depth
// 512: TinyLlama Q4_0, Q4_K, Q5_K, Q6_K, Q8_0, Q4_K_M; Llama-7B Q4_K_M
// 0.13%).
//
// A decode step makes a few hundred runs of some tens of microseconds each.
// Waking a parked goroutine for every one (a futex round trip, slow on
// virtual machines) left a helper idle for a good part of each run, so both
// sides poll for a while before they park:
//
//   - a helper, after its work, polls gen for the next run for up to spinFor
//     (or until quiesce asks it to stop), then announces itself asleep
//     (sleeping) and parks on its wake channel;
//     run increments gen before it reads sleeping, the helper sets sleeping
//     before it reads gen again, so one of them sees the other (Go's atomics
//     are sequentially consistent) and no wake-up is lost;
//   - the caller, after its own share, polls pending (the helpers not yet
//     done) and parks on done by the same protocol with waiting.
//
// A wake-up token that arrives when its receiver already saw the change is
// left in the channel (capacity 1); receivers therefore re-check their
// condition after every wake-up, so a stale token costs one extra loop.
// Every helper takes part in every run (finding no items left is cheap), so
// gen never advances by more than one while a helper is behind.
type pool struct {
	n        int
	gen      atomic.Uint64 // run sequence number
	stopped  atomic.Bool
	pending  atomic.Int64 // helpers not done with the current run
	waiting  atomic.Bool  // the caller is parked (or about to park) on done
	done     chan struct{}
	helpers  []helper
	fn       func(w, i int)
	items    int64
	next     atomic.Int64
	stopOnce sync.Once
	// exited counts the helpers still running: stop waits for them, so
	// that none is reading weights ahead (readAhead) when Close unmaps
	// them.
	exited sync.WaitGroup
	// quiet, set by quiesce and cleared by run, sends polling helpers to
	// park at once.
	quiet atomic.Bool
	// firsts has bit w set once item w, worker w's first item of the run
	// (w < maxFirsts), is taken: by worker w, or by the caller when worker
	// w is late (loop). The counter next hands out the rest.
	firsts atomic.Uint64
	// warm is what polling helpers read while the caller prepares the next
	// run (warmUp): each worker's first item's weights, posted by warmUp
	// and told apart by warmSeq.
	warm    atomic.Pointer[[][][]byte]
	warmSeq atomic.Uint64
	// tail, when set before a run, is what the workers read ahead once
	// they find no items left in it: the next matmul's first items. run
	// publishes it in runTail before the run begins, so that a helper
	// that sees the run sees its tail.
	tail    *[][][]byte
	runTail atomic.Pointer[[][][]byte]
	// warmGen is gen when warm was posted (the caller's alone).
	warmGen uint64
}

type helper struct {
	sleeping atomic.Bool
	wake     chan struct{}
	_        [48]byte // keep helpers' flags on separate cache lines
}

// spinFor is how long a side polls before it parks. It spans the gap
// between two decode steps (the logits copied out, a token sampled, the
// next step's first norm: 50–250 µs on a 2-core VM), so that a helper does
// not park there. A parked helper is a futex wake-up away (50–100 µs on
// that VM), and Linux tends to wake a thread on its waker's CPU: the two
// then shared one core for a while, and a TinyLlama Q4_0 decode step on
// that VM, which parked its helper 1–10 times a step with spinFor at
// 100 µs, had steps of 1.5× the median among them. At 2 ms the helper
// parked about once every 60 steps, and decode ran 2.5% faster (7
// alternating runs of 128–256 steps: 43.3 against 42.2 tokens/s, p99
// 26.8 against 28.6 ms). Idle, a helper spins 2 ms before it sleeps;
// quiesce sends it to sleep at once.
const spinFor = 2 * time.Millisecond

// quiesceWait bounds quiesce's wait for a helper the system does not run.
const quiesceWait = 5 * time.Second

func newPool(n int) *pool {
	n = max(n, 1)
	p := &pool{n: n, done: make(chan struct{}, 1), helpers: make([]helper, n)}
	for w := 1; w < n; w++ {
		p.helpers[w].wake = make(chan struct{}, 1)
		p.exited.Add(1)
		go p.worker(w)
	}
	return p
}

// poll calls cond until it returns true, spinFor has passed or quiet is
// set, and reports whether cond did.
func (p *pool) poll(cond func() bool) bool {
	var t0 time.Time
	for i := 1; ; i++ {
		if cond() {
			return true
		}
		if i&255 == 0 {
			if p.quiet.Load() {
				return cond()
			}
			if t0.IsZero() {
				t0 = time.Now()
			} else if time.Since(t0) > spinFor {
				return false
			}
			runtime.Gosched()
		}
	}
}

func (p *pool) worker(w int) {
	defer p.exited.Done()
	h := &p.helpers[w]
	var seen, warmed uint64
	for {
		changed := func() bool { return p.gen.Load() != seen || p.stopped.Load() }
		posted := func() bool { return changed() || p.warmSeq.Load() != warmed }
		if !p.poll(posted) {
			h.sleeping.Store(true)
			park(h.wake, changed) // a parked helper reads nothing ahead
			h.sleeping.Store(false)
		}
		if !changed() { // weights to read ahead: then back to polling
			warmed = p.warmSeq.Load()
			if spans := p.warm.Load(); spans != nil && w < len(*spans) {
				readAhead((*spans)[w], changed)
			}
			continue
		}
		if p.stopped.Load() {
			return
		}
		seen = p.gen.Load()
		p.loop(w)
		tail := p.runTail.Load()
		if p.pending.Add(-1) == 0 && p.waiting.Load() {
			select {
			case p.done <- struct{}{}:
			default: // a stale token is already there; the caller re-checks
			}
		}
		if tail != nil && w < len(*tail) {
			readAhead((*tail)[w], changed)
		}
	}
}

func (p *pool) loop(w int) {
	if w < maxFirsts && int64(w) < p.items && p.claimFirst(w) {
		p.fn(w, w)
	}
	if w == 0 {
		// A helper not running yet (parked, or not scheduled) would
		// start its first item late, one of the run's largest: the
		// caller takes it after its own.
		for v := 1; v < min(p.n, maxFirsts) && int64(v) < p.items; v++ {
			if p.claimFirst(v) {
				p.fn(0, v)
			}
		}
	}
	for {
		i := p.next.Add(1) - 1
		if i >= p.items {
			return
		}
		p.fn(w, int(i))
	}
}

// run calls fn(worker, item) for every item in [0, n), spread over the
// workers, and returns when all are done. Calls of run must not overlap.
func (p *pool) run(n int, fn func(w, i int)) {
	if n <= 0 {
		return
	}
	if p.n == 1 || n == 1 {
		for i := 0; i < n; i++ {
			fn(0, i)
		}
		return
	}
	p.quiet.Store(false)
	p.fn, p.items = fn, int64(n)
	// Worker w's first item is item w (loop), so that what warmUp gave
	// it to read ahead is what it computes first; the counter starts
	// after them.
	p.firsts.Store(0)
	p.next.Store(int64(min(p.n, maxFirsts)))
	p.pending.Store(int64(p.n - 1))
	tail := p.tail
	p.tail = nil
	p.runTail.Store(tail)
	p.gen.Add(1)
	if tail != nil {
		// What the helpers read now: a warmUp of it before the next
		// run would have them start it over.
		p.warm.Store(tail)
		p.warmGen = p.gen.Load()
	}
	for w := 1; w < p.n; w++ {
		p.wakeHelper(w)
	}
	p.loop(0)
	finished := func() bool { return p.pending.Load() == 0 }
	if tail != nil && len(*tail) > 0 && !finished() {
		readAhead((*tail)[0], finished)
	}
	if !p.poll(finished) {
		p.waiting.Store(true)
		park(p.done, finished)
		p.waiting.Store(false)
	}
	p.fn = nil
}

// park blocks until cond holds, woken by tokens on ch. It also re-checks
// cond on a timer (1 ms, doubling to 50 ms): the protocol above loses no
// wake-up, but a lost one — under qemu-user the CPU tests once hung with the
// caller and its helper both parked — must cost milliseconds, not the
// program.
func park(ch chan struct{}, cond func() bool) {
	for d := time.Millisecond; !cond(); d = min(2*d, 50*time.Millisecond) {
		t := time.NewTimer(d)
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

func (p *pool) wakeHelper(w int) {
	if p.helpers[w].sleeping.Load() {
		select {
		case p.helpers[w].wake <- struct{}{}:
		default: // a token is already there
		}
	}
}

// quiesce sends the helpers to park now instead of at the end of their
// spinFor, and waits until they have (a helper sees quiet within 256 polls,
// microseconds; the wait gives up after quiesceWait should the system not
// run it): for a caller about to measure something their polling would
// take a core from (minervac bench's bandwidth probe). It must not overlap
// run.
func (p *pool) quiesce() {
	p.quiet.Store(true)
	deadline := time.Now().Add(quiesceWait)
	for w := 1; w < p.n; w++ {
		for !p.helpers[w].sleeping.Load() && time.Now().Before(deadline) {
			runtime.Gosched()
		}
	}
}

// stop ends the workers and returns once they have: then nothing reads the
// weights. Calls of run must not follow or overlap it.
func (p *pool) stop() {
	p.stopOnce.Do(func() {
		p.stopped.Store(true)
		for w := 1; w < p.n; w++ {
			p.wakeHelper(w)
		}
	})
	// A helper reading ahead looks at stopped every readAheadChunk bytes.
	// CI once faulted in readAhead on weights a Close had just unmapped.
	p.exited.Wait()
}

// maxFirsts bounds the workers that have a first item (the bits of firsts);
// the counter feeds any beyond.
const maxFirsts = 64

// claimFirst takes item w, worker w's first item, for the worker that
// calls it: false when another took it already.
func (p *pool) claimFirst(w int) bool {
	bit := uint64(1) << w
	return p.firsts.Or(bit)&bit == 0
}

// warmUp posts, for each helper w ≥ 1, the bytes (*spans)[w] it reads
// ahead (readAhead) while the caller prepares the next run: in decode, the
// weights of the helper's first item of that run, read while the caller
// normalizes and encodes the activations, so that the item starts on lines
// already in the helper core's caches. *spans must not change after the
// post (a decode plan's set never does: oneRow.warm).
func (p *pool) warmUp(spans *[][][]byte) {
	if p.n == 1 || spans == nil {
		return
	}
	if p.warm.Load() == spans && p.warmGen == p.gen.Load() {
		return // posted since the last run began: helpers read it already
	}
	p.warm.Store(spans)
	p.warmGen = p.gen.Load()
	p.warmSeq.Add(1)
}

// readAheadChunk is how many bytes readAhead reads between two looks at
// stop: a few hundred nanoseconds of one core's stream.
const readAheadChunk = 4096

// readAhead loads a word of every line of the spans, in order, until stop
// reports true.
func readAhead(spans [][]byte, stop func() bool) {
	var s byte
read:
	for _, b := range spans {
		for at := 0; at < len(b); at += readAheadChunk {
			if stop() {
				break read
			}
			c := b[at:min(at+readAheadChunk, len(b))]
			for i := 0; i < len(c); i += 64 {
				s += c[i]
			}
		}
	}
	aheadSink.Add(uint64(s))
}

// aheadSink keeps readAhead's loads.
var aheadSink atomic.Uint64
