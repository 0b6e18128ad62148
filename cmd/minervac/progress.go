package main

import (
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
	return &progress{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(65_000_000),
	)}
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
