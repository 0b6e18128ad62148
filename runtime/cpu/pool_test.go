package cpu

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPoolRunsEveryItemOnce: every item of every run is computed exactly
// once, by a valid worker — item i < workers, worker i's first item, by
// worker i or by the caller — and run returns only after all of them, over
// runs of 0 to 40 items, with pauses that let helpers park between runs
// (the parked path), back-to-back runs (the polling path), and runs after
// posts of bytes to read ahead (warmUp), which the helpers read meanwhile.
func TestPoolRunsEveryItemOnce(t *testing.T) {
	ahead := make([]byte, 1<<20)
	for _, workers := range []int{1, 2, 3, 8} {
		p := newPool(workers)
		r := rand.New(rand.NewPCG(uint64(workers), 1))
		spans := make([][][]byte, workers)
		for w := range spans {
			spans[w] = [][]byte{ahead[w*1000 : w*1000+r.IntN(200000)], ahead[r.IntN(1000) : r.IntN(1000)+5000]}
		}
		for run := 0; run < 1000; run++ {
			n := r.IntN(41)
			hits := make([]atomic.Int32, n)
			var bad atomic.Int32
			switch run % 3 {
			case 0:
				p.warmUp(&spans)
				time.Sleep(time.Duration(r.IntN(20)) * time.Microsecond) // the caller encoding
			case 1:
				p.tail = &spans // read once the items run out
			}
			p.run(n, func(w, i int) {
				if w < 0 || w >= workers || i < workers && w != i && w != 0 {
					bad.Add(1)
				}
				if r := i % 7; r == 0 {
					time.Sleep(time.Microsecond)
				}
				hits[i].Add(1)
			})
			for i := range hits {
				require.EqualValues(t, 1, hits[i].Load(), "workers %d run %d item %d", workers, run, i)
			}
			require.Zero(t, bad.Load())
			switch {
			case run%500 == 0:
				time.Sleep(2 * spinFor) // helpers park
			case run%100 == 0:
				p.quiesce() // helpers park at once
			}
		}
		p.stop()
	}
}

// TestPoolQuiesce: after quiesce every helper is parked (long before
// spinFor would have sent it there), and the next run still has every item
// computed once, helpers taking part again.
func TestPoolQuiesce(t *testing.T) {
	p := newPool(3)
	defer p.stop()
	for round := 0; round < 50; round++ {
		p.run(64, func(_, i int) {})
		p.quiesce()
		for w := 1; w < p.n; w++ {
			require.True(t, p.helpers[w].sleeping.Load(), "round %d: helper %d still polling", round, w)
		}
		var hits [64]atomic.Int32
		p.run(64, func(w, i int) { hits[i].Add(1) })
		for i := range hits {
			require.EqualValues(t, 1, hits[i].Load(), "round %d item %d", round, i)
		}
		// The helpers poll again: within a few runs one of them takes an
		// item (a parked helper that never woke would leave them all to
		// the caller, and this loop would not end).
		var byHelpers atomic.Int32
		for try := 0; byHelpers.Load() == 0; try++ {
			require.Less(t, try, 10000, "round %d: no helper took part after quiesce", round)
			p.run(8, func(w, i int) {
				time.Sleep(10 * time.Microsecond)
				if w > 0 {
					byHelpers.Add(1)
				}
			})
		}
	}
}

// TestPoolsConcurrent: several pools driven at once from their own
// goroutines (as parallel sessions do) all finish, and stopping a parked
// pool ends its helpers.
func TestPoolsConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := newPool(3)
			defer p.stop()
			var sum atomic.Int64
			for run := 0; run < 2000; run++ {
				p.run(5, func(_, i int) { sum.Add(int64(i)) })
			}
			if sum.Load() != 2000*10 {
				t.Errorf("sum %d, want %d", sum.Load(), 2000*10)
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(60 * time.Second):
		t.Fatal("pools did not finish in 60 s")
	}
}

// readAhead reads its spans in chunks of readAheadChunk, looking at stop
// before each: all of them while stop says false, and none after it says
// true.
func TestReadAheadStops(t *testing.T) {
	b := make([]byte, 5*readAheadChunk+100)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	spans := [][]byte{b[:2*readAheadChunk], b[2*readAheadChunk:]} // 2 + 4 chunks
	for _, tc := range []struct{ stopAt, looks int }{{100, 6}, {1, 1}, {3, 3}, {6, 6}} {
		looks := 0
		readAhead(spans, func() bool { looks++; return looks >= tc.stopAt })
		require.Equal(t, tc.looks, looks, "stop at look %d", tc.stopAt)
	}
	readAhead(nil, func() bool { t.Fatal("no chunk, no look"); return true })
}

// TestPoolTail: a run's tail set is posted as the run begins; the caller
// reads its entry while it waits for a slow helper, and a helper reads its
// own once its items are done (aheadSink moves only by what the reader of
// the one span of ones added). warmUp posts a set again only once a run
// has begun since it was posted: a helper still reading it goes on.
func TestPoolTail(t *testing.T) {
	p := newPool(2)
	defer p.stop()
	ones := make([]byte, 255*64) // readAhead sums a byte a line in a byte
	for i := range ones {
		ones[i] = 1
	}
	for _, reader := range []int{0, 1} {
		spans := make([][][]byte, 2)
		spans[reader] = [][]byte{ones}
		before := aheadSink.Load()
		p.tail = &spans
		helperStarted := make(chan struct{})
		p.run(2, func(w, i int) {
			switch {
			case reader == 0 && i == 1:
				// The helper's item lasts until the caller has read its
				// tail (or 5 s): the caller reads while it waits.
				close(helperStarted)
				waitUntil(func() bool { return aheadSink.Load() != before }, 5*time.Second)
			case reader == 0 && i == 0:
				// Until the helper holds item 1: otherwise a helper
				// scheduled late (a loaded CI machine) leaves item 1 to
				// the caller, which then has no one to wait for.
				select {
				case <-helperStarted:
				case <-time.After(5 * time.Second):
				}
			case i != reader:
				time.Sleep(5 * time.Millisecond) // the caller's item is slow
			}
		})
		require.Same(t, &spans, p.warm.Load(), "reader %d: the tail is posted", reader)
		require.Nil(t, p.tail, "a run takes its tail")
		waitUntil(func() bool { return aheadSink.Load() != before }, 5*time.Second)
		require.Equal(t, uint64(len(ones)/64), aheadSink.Load()-before, "worker %d read its tail, a byte a line", reader)
	}
	spans := make([][][]byte, 2)
	seq := p.warmSeq.Load()
	p.warmUp(&spans)
	p.warmUp(&spans)
	require.Equal(t, seq+1, p.warmSeq.Load(), "posted once between runs")
	p.run(2, func(_, _ int) {})
	p.warmUp(&spans)
	require.Equal(t, seq+2, p.warmSeq.Load(), "posted again after a run")
}

// waitUntil polls cond every 100 µs until it holds or d has passed.
func waitUntil(cond func() bool, d time.Duration) {
	deadline := time.Now().Add(d)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
}
