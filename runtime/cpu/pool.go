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
// A decode step makes a few hundred short runs, so waking a parked goroutine
// for each (a futex round trip, slow on virtual machines) would cost a good
// part of the step. Helpers therefore spin for a while on the run counter
// after their work is done before they park, and run wakes only parked ones.
type pool struct {
	n     int
	start []chan struct{}
	sleep []paddedBool
	// gen is the run's sequence number << genShift | its helper count;
	// gen&stopBit marks the pool stopped.
	gen     atomic.Uint64
	pending atomic.Int64 // helpers of the current run not yet done
	fn      func(w, i int)
	items   int64
	next    atomic.Int64
	once    sync.Once
}

type paddedBool struct {
	atomic.Bool
	_ [63]byte
}

const (
	genShift = 17
	stopBit  = 1 << 16
	// spinFor is how long a helper polls for the next run before parking.
	spinFor = 200 * time.Microsecond
)

func newPool(n int) *pool {
	if n < 1 {
		n = 1
	}
	n = min(n, stopBit-1)
	p := &pool{n: n, sleep: make([]paddedBool, n)}
	for w := 1; w < n; w++ {
		ch := make(chan struct{}, 1)
		p.start = append(p.start, ch)
		go p.worker(w, ch)
	}
	return p
}

func (p *pool) worker(w int, ch chan struct{}) {
	var seen uint64 // the gen before the first run
	for {
		g := p.wait(w, seen, ch)
		if g&stopBit != 0 {
			return
		}
		seen = g
		if w <= int(g&(stopBit-1)) { // a helper of this run
			p.loop(w)
			p.pending.Add(-1)
		}
	}
}

// wait returns the first gen after seen: spinning, then parked on ch.
func (p *pool) wait(w int, seen uint64, ch chan struct{}) uint64 {
	var t0 time.Time
	for i := 0; ; i++ {
		if g := p.gen.Load(); g != seen {
			return g
		}
		if i&63 == 63 {
			if t0.IsZero() {
				t0 = time.Now()
			} else if time.Since(t0) > spinFor {
				break
			}
			runtime.Gosched()
		}
	}
	s := &p.sleep[w].Bool
	s.Store(true)
	if g := p.gen.Load(); g != seen && s.CompareAndSwap(true, false) {
		return g
	}
	// run (or stop) cleared s and sends on ch, or has closed it.
	<-ch
	return p.gen.Load()
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
	p.fn, p.items = fn, int64(n)
	p.next.Store(0)
	helpers := min(p.n-1, n-1)
	p.pending.Store(int64(helpers))
	seq := p.gen.Load()>>genShift + 1
	p.gen.Store(seq<<genShift | uint64(helpers))
	for w := 1; w <= helpers; w++ {
		if p.sleep[w].CompareAndSwap(true, false) {
			p.start[w-1] <- struct{}{}
		}
	}
	p.loop(0)
	for i := 0; p.pending.Load() != 0; i++ {
		if i&15 == 15 {
			runtime.Gosched()
		}
	}
	p.fn = nil
}

// stop ends the workers.
func (p *pool) stop() {
	p.once.Do(func() {
		p.gen.Store(p.gen.Load() | stopBit)
		for _, ch := range p.start {
			close(ch)
		}
	})
}
