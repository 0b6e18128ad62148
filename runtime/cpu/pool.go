package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// pool is a persistent set of workers: started once per Program, each call
// of run hands out work items 0..n-1 through an atomic counter. The caller
// takes part as worker 0. Which worker computes an item never changes what
// the item computes, so results do not depend on the number of workers.
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
	// quiet, set by quiesce and cleared by run, sends polling helpers to
	// park at once.
	quiet atomic.Bool
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
	h := &p.helpers[w]
	var seen uint64
	for {
		changed := func() bool { return p.gen.Load() != seen || p.stopped.Load() }
		if !p.poll(changed) {
			h.sleeping.Store(true)
			park(h.wake, changed)
			h.sleeping.Store(false)
		}
		if p.stopped.Load() {
			return
		}
		seen = p.gen.Load()
		p.loop(w)
		if p.pending.Add(-1) == 0 && p.waiting.Load() {
			select {
			case p.done <- struct{}{}:
			default: // a stale token is already there; the caller re-checks
			}
		}
	}
}

func (p *pool) loop(w int) {
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
	p.next.Store(0)
	p.pending.Store(int64(p.n - 1))
	p.gen.Add(1)
	for w := 1; w < p.n; w++ {
		p.wakeHelper(w)
	}
	p.loop(0)
	finished := func() bool { return p.pending.Load() == 0 }
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

// stop ends the workers. Calls of run must not follow or overlap it.
func (p *pool) stop() {
	p.stopOnce.Do(func() {
		p.stopped.Store(true)
		for w := 1; w < p.n; w++ {
			p.wakeHelper(w)
		}
	})
}
