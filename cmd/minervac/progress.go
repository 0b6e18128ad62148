package main

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress is a bar on stderr when stderr is a terminal, and nothing
// otherwise, so logs and pipes stay clean. progressbar draws and throttles;
// we only decide whether a person is watching.
type progress struct{ bar *progressbar.ProgressBar }

var stderrIsTerminal = term.IsTerminal(int(os.Stderr.Fd()))

func newProgress(total int64, what string) *progress {
	if !stderrIsTerminal {
		return &progress{}
	}
	return newProgressTo(os.Stderr, total, what, false, redraw)
}

// newBytesProgress is a progress of bytes written: the bar shows done and
// total in B/kB/MB/GB, the rate, and the time taken and left. A total not
// known yet (-1) is given later with SetTotal.
func newBytesProgress(total int64, what string) *progress {
	if !stderrIsTerminal {
		return &progress{}
	}
	return newProgressTo(os.Stderr, total, what, true, redraw)
}

// redraw is the least time between two frames of a bar.
const redraw = 65 * time.Millisecond

// newProgressTo draws on w, whatever w is (tests read it), at most once per
// throttle.
func newProgressTo(w io.Writer, total int64, what string, bytes bool, throttle time.Duration) *progress {
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(throttle),
	}
	if bytes {
		opts = append(opts, progressbar.OptionShowBytes(true), progressbar.OptionShowTotalBytes(true), progressbar.OptionSetPredictTime(true))
	}
	return &progress{bar: progressbar.NewOptions64(total, opts...)}
}

// SetTotal sets the amount of work once it is known (a bar made with -1
// spins until then).
func (p *progress) SetTotal(n int64) {
	if p.bar != nil {
		p.bar.ChangeMax64(n)
	}
}

func (p *progress) Add(n int) {
	if p.bar != nil {
		p.bar.Add(n)
	}
}

// spin shows a spinner labelled what while fn runs (for work that reports no
// progress of its own, such as a backend uploading weights), only on a
// terminal.
func spin(what string, fn func() error) error {
	if !stderrIsTerminal {
		return fn()
	}
	bar := progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionClearOnFinish(),
	)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				bar.Add(1)
			}
		}
	}()
	err := fn()
	close(done)
	bar.Finish()
	return err
}

func (p *progress) Done() {
	if p.bar != nil {
		p.bar.Finish()
	}
}
