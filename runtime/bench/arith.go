package bench

// An ArithProbe measures how much arithmetic the machine gives threads
// goroutines at once, in samples taken among other work, as Probe does for
// the read bandwidth. On the Ice Lake VM of docs/PERFORMANCE.md (stop 53)
// the two came apart from decode: a Q6_K decode at depth 512 streamed
// 15.0 GB/s in a run whose bandwidth samples read 18.8, and 14.7 in one
// whose samples read 11.5. If the host took arithmetic from the VM's cores
// in such minutes, a probe that mostly waits on memory would lose less
// than decode's kernels; the arithmetic samples, taken right after the
// bandwidth ones (Result.DecodeArith), say whether it did.
type ArithProbe struct{ passes }

// arithIters is one sample's loop count per thread: four multiply-add
// chains, bound by the 64-bit multiplier's one multiply a cycle, so about
// 1.5 ms on a 2.8 GHz core (2–3 ms a pass measured on that VM, two
// threads).
const arithIters = 1 << 20

// arithOps is the multiply-adds one thread does in a sample.
const arithOps = 4 * arithIters

// NewArithProbe returns a probe run by threads goroutines (at least one).
func NewArithProbe(threads int) *ArithProbe { return &ArithProbe{newPasses(threads)} }

// Sample runs every thread's loop once, all at once, and returns that
// pass's rate in billions of multiply-adds a second; the pass is added to
// Mean's figure.
func (p *ArithProbe) Sample() float64 {
	d := p.run(func(t int) uint64 { return MulAdds(arithIters, uint64(t)+1) })
	return float64(arithOps*p.threads) / d.Seconds() / 1e9
}

// Mean is the multiply-adds of every sample over their total time, in
// billions a second (0 before the first), and the number of samples.
func (p *ArithProbe) Mean() (gops float64, samples int) { return p.mean(float64(arithOps * p.threads)) }

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
