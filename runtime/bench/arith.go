package bench

import (
	"sync"
	"time"
)

// An ArithProbe measures how much arithmetic the machine gives threads
// goroutines at once, in samples taken among other work, as Probe does for
// the read bandwidth. On a shared VM the two move apart: in one minute the
// bandwidth probe read 18.8 GB/s while a Q6_K decode streamed 15.7, in
// another 11.5 while the same decode streamed 15.4 (docs/PERFORMANCE.md,
// stop 53). A probe that mostly waits on memory loses little when the host
// takes arithmetic from the VM's cores; decode's kernels lose more. The
// arithmetic samples taken beside the bandwidth ones say which of the two
// moved in a run (Result.DecodeArith).
type ArithProbe struct {
	threads int
	sums    []uint64 // one cache line apart
	elapsed time.Duration
	samples int
}

// arithIters is one sample's loop count per thread: about a millisecond
// of four independent multiply-add chains on a 3 GHz core (a 64-bit
// multiply's latency, 3 cycles, sets the rate of each chain).
const arithIters = 1 << 20

// arithOps is the multiply-adds one thread does in a sample.
const arithOps = 4 * arithIters

// NewArithProbe returns a probe run by threads goroutines (at least one).
func NewArithProbe(threads int) *ArithProbe {
	threads = max(1, threads)
	return &ArithProbe{threads: threads, sums: make([]uint64, 8*threads)}
}

// Sample runs every thread's loop once, all at once, and returns that
// pass's rate in billions of multiply-adds a second; the pass is added to
// Mean's figure.
func (p *ArithProbe) Sample() float64 {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for t := range p.threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			p.sums[8*t] = MulAdds(arithIters, uint64(t)+1)
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	d := time.Since(t0)
	for t := range p.threads {
		sink += p.sums[8*t]
	}
	p.elapsed += d
	p.samples++
	return float64(arithOps*p.threads) / d.Seconds() / 1e9
}

// Mean is the multiply-adds of every sample over their total time, in
// billions a second (0 before the first), and the number of samples.
func (p *ArithProbe) Mean() (gops float64, samples int) {
	if p.elapsed <= 0 {
		return 0, p.samples
	}
	return float64(arithOps*p.threads*p.samples) / p.elapsed.Seconds() / 1e9, p.samples
}

// MulAdds runs n rounds of four independent 64-bit multiply-add chains
// seeded from seed (4n multiply-adds, no memory traffic) and returns a sum
// of their states, so that the compiler keeps the loop.
func MulAdds(n int, seed uint64) uint64 {
	a, b, c, d := seed, seed^0x9e3779b97f4a7c15, seed+1, seed*3
	for range n {
		a = a*6364136223846793005 + 1442695040888963407
		b = b*6364136223846793005 + 1
		c = c*2862933555777941757 + 3037000493
		d = d*2862933555777941757 + 7
	}
	return a ^ b ^ c ^ d
}
