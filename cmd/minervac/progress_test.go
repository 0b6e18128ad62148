package main

import (
	"bufio"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/synth"
)

// synth's bar learns the file's size before the first byte (gguf.Sizer) and
// shows done and total in bytes, the rate and the time taken and left,
// never a bare byte count with [0s].
func TestSynthProgressHasTotalRateAndETA(t *testing.T) {
	var screen strings.Builder
	bar := newProgressTo(&screen, -1, "writing", true, redraw)
	bw := bufio.NewWriter(io.Discard)
	n, err := synth.Default().Write(countingWriter{bw, bar})
	require.NoError(t, err)
	require.NoError(t, bw.Flush())
	require.Equal(t, n, bar.bar.GetMax64(), "the bar's total is the file's size")

	// What it draws: the total, the rate and the time taken:left.
	screen.Reset()
	bar = newProgressTo(&screen, -1, "writing", true, 0) // every change drawn
	bar.SetTotal(4 << 30)
	bar.Add(1 << 30)
	frame := screen.String()[strings.LastIndex(screen.String(), "\r")+1:]
	require.Regexp(t, `^writing +25% \|█+ +\| \(1\.1/4\.3 GB, [0-9.]+ [kMGT]?B/s\) \[[0-9]+m?s:[0-9]+m?s\]$`, frame)
}
