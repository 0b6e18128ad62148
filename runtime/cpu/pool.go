package cpu

import (
	"sync"
	"sync/atomic"
)

// pool is a persistent set of workers: started once per Program, each call
// of run hands out work items 0..n-1 through an atomic counter. The caller
// takes part as worker 0. Which worker computes an item never changes what
// the item computes, so results do not depend on the number of workers.
type pool struct {
	n     int
	start []chan struct{}
	done  sync.WaitGroup
	fn    func(w, i int)
	items int64
	next  atomic.Int64
	once  sync.Once
}

func newPool(n int) *pool {
	if n < 1 {
		n = 1
	}
	p := &pool{n: n}
	for w := 1; w < n; w++ {
		ch := make(chan struct{}, 1)
		p.start = append(p.start, ch)
		go p.worker(w, ch)
	}
	return p
}

func (p *pool) worker(w int, ch chan struct{}) {
	for range ch {
		p.loop(w)
		p.done.Done()
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
	p.fn, p.items = fn, int64(n)
	p.next.Store(0)
	helpers := min(p.n-1, n-1)
	p.done.Add(helpers)
	for _, ch := range p.start[:helpers] {
		ch <- struct{}{}
	}
	p.loop(0)
	p.done.Wait()
	p.fn = nil
}

// stop ends the workers.
func (p *pool) stop() {
	p.once.Do(func() {
		for _, ch := range p.start {
			close(ch)
		}
	})
}
