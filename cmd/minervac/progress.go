package main

import (
	"os"

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

func (p *progress) Done() {
	if p.bar != nil {
		p.bar.Finish()
	}
}
