package amx

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// enabled skips t where the CPU or the system has no AMX.
func enabled(t testing.TB) {
	t.Helper()
	if err := Enable(); err != nil {
		t.Skip(err)
	}
}

// randTiles fills a with unsigned bytes over their whole range (a byte
// read as signed would give other sums for half of them) and b with
// signed ones.
func randTiles(seed uint64) (a, b *[Rows * Bytes]byte) {
	r := rand.New(rand.NewPCG(seed, 1))
	a, b = new([Rows * Bytes]byte), new([Rows * Bytes]byte)
	for i := range a {
		a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
	}
	return a, b
}

// wantTile is DotTile's definition in Go, times k.
func wantTile(a, b *[Rows * Bytes]byte, k int32) (c [Sums]int32) {
	for m := range Rows {
		for n := range Rows {
			var s int32
			for i := range Bytes {
				s += int32(a[m*Bytes+i]) * int32(int8(b[(i/4)*Bytes+4*n+i%4]))
			}
			c[m*Rows+n] = k * s
		}
	}
	return c
}

// DotTile gives its definition's sums exactly, for bytes over their whole
// range, and summed three times the same product thrice.
func TestDotTile(t *testing.T) {
	enabled(t)
	for seed := range uint64(8) {
		a, b := randTiles(seed)
		var c [Sums]int32
		DotTile(&c, a, b)
		require.Equal(t, wantTile(a, b, 1), c, "seed %d", seed)
		dotTile(&config, a, b, &c, 3)
		require.Equal(t, wantTile(a, b, 3), c, "seed %d, three times", seed)
		dotTile6(&config, a, b, &c, 2)
		require.Equal(t, wantTile(a, b, 2), c, "seed %d, six accumulators twice", seed)
	}
}

// Four goroutines on two threads multiply tiles while another allocates:
// goroutines move between threads between calls, the runtime preempts
// with signals and collects garbage, and every product stays exact (the
// tile state is per thread, loaded and released within each call).
func TestDotTileUnderPreemption(t *testing.T) {
	enabled(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	stop := time.Now().Add(time.Second)
	go func() {
		var keep [][]byte
		for time.Now().Before(stop) {
			keep = append(keep, make([]byte, 1<<16))
			if len(keep) > 100 {
				keep = nil
			}
			runtime.Gosched()
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, b := randTiles(uint64(100 + g))
			want := wantTile(a, b, 1000)
			var c [Sums]int32
			for time.Now().Before(stop) {
				dotTile(&config, a, b, &c, 1000)
				if c != want {
					errs <- "a product changed under preemption"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// BenchmarkTDPBUSD: one core's rate of TDPBUSD (16×16×64 multiply-adds
// each), one accumulator (each waits for the last) and six:
//
//	go test ./runtime/cpu/amx -run '^$' -bench TDPBUSD
func BenchmarkTDPBUSD(b *testing.B) {
	enabled(b)
	x, y := randTiles(1)
	var c [Sums]int32
	const per = 10000
	for _, tc := range []struct {
		name string
		f    func(*[64]byte, *[Rows * Bytes]byte, *[Rows * Bytes]byte, *[Sums]int32, int)
		n    int
	}{{"chain", dotTile, 1}, {"six", dotTile6, 6}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				tc.f(&config, x, y, &c, per)
			}
			ops := float64(b.N) * per * float64(tc.n)
			b.ReportMetric(ops*Sums*Bytes/b.Elapsed().Seconds()/1e9, "GMAC/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/ops, "ns/TDPBUSD")
		})
	}
}
