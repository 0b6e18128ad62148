//go:build linux

package cuda

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOutParamsSurviveStackGrowth calls the driver with an out parameter
// (cuDriverGetVersion's) from goroutines whose stacks are filled to every
// depth over a range that crosses several stack growths, so that in some of
// them the stack grows between the out parameter's address being taken and
// the C call. The local must not be on the goroutine stack then (call is
// go:uintptrescapes): when it was, the driver wrote into the stack the
// runtime had just moved away from, the local kept its zero, and on an
// H100 cuModuleLoadData's module handle came back unset.
func TestOutParamsSurviveStackGrowth(t *testing.T) {
	a, err := load(emuDriver(t))
	require.NoError(t, err)
	want, err := a.driverVersion()
	require.NoError(t, err)
	require.NotZero(t, want)
	for depth := 0; depth < 600; depth++ {
		got := make(chan int)
		go func() {
			var v int
			fillStack(depth, func() { v, err = a.driverVersion() })
			got <- v
		}()
		v := <-got
		require.NoError(t, err)
		require.Equal(t, want, v, "driver version read at stack depth %d", depth)
	}
}

// fillStack calls f under depth frames of about 100 bytes each.
func fillStack(depth int, f func()) byte {
	var pad [64]byte
	pad[depth%64] = byte(depth)
	if depth == 0 {
		f()
		return pad[0]
	}
	return fillStack(depth-1, f) + pad[depth%64]
}
