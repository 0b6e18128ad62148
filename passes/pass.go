// Package passes holds the graph rewrites that turn a frontend's graph into
// the fused graph the backends lower, and the manager that runs them. A pass
// is a name and a func(*ir.Graph) error; the pipeline is one ordered list in
// pipeline.go. Every pass must leave a graph it does not recognise unchanged:
// a rewrite that is not provably the same computation does not fire.
package passes

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/minerva-llm/minerva/ir"
)

// Pass is one graph rewrite.
type Pass struct {
	Name string
	Doc  string
	Run  func(*ir.Graph) error
}

var registry = map[string]Pass{}

// register adds a pass to the table; each pass file registers itself.
func register(p Pass) {
	if _, dup := registry[p.Name]; dup {
		panic("passes: " + p.Name + " registered twice")
	}
	registry[p.Name] = p
}

// Lookup returns the pass with the given name.
func Lookup(name string) (Pass, bool) {
	p, ok := registry[name]
	return p, ok
}

// Names lists every registered pass, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Options control how the manager runs a pipeline.
type Options struct {
	// VerifyEach runs ir.Verify after every pass (tests always do).
	VerifyEach bool
	// PrintAfter prints the graph after the named pass, or after every pass
	// when it is "all".
	PrintAfter string
	// TimePasses reports each pass's wall time after the run.
	TimePasses bool
	// Out receives printed graphs and timings.
	Out io.Writer
	// AfterPass, when set, is called after each pass has run (progress bars).
	AfterPass func(p Pass)
}

// Timing is how long one pass took.
type Timing struct {
	Name string
	Time time.Duration
}

// Run applies the passes in order. It stops at the first error, naming the
// pass; with VerifyEach a pass that breaks an invariant is named too.
func Run(g *ir.Graph, list []Pass, opts Options) ([]Timing, error) {
	if opts.PrintAfter != "" && opts.PrintAfter != "all" {
		found := false
		for _, p := range list {
			found = found || p.Name == opts.PrintAfter
		}
		if !found {
			return nil, fmt.Errorf("--print-after=%s: no such pass in the pipeline (passes: %v)", opts.PrintAfter, names(list))
		}
	}
	times := make([]Timing, 0, len(list))
	for _, p := range list {
		start := time.Now()
		if err := p.Run(g); err != nil {
			return times, fmt.Errorf("pass %s: %w", p.Name, err)
		}
		times = append(times, Timing{p.Name, time.Since(start)})
		if opts.AfterPass != nil {
			opts.AfterPass(p)
		}
		if opts.VerifyEach {
			if err := ir.Verify(g); err != nil {
				return times, fmt.Errorf("after pass %s the graph is invalid: %w", p.Name, err)
			}
		}
		if opts.Out != nil && (opts.PrintAfter == "all" || opts.PrintAfter == p.Name) {
			fmt.Fprintf(opts.Out, "; after %s\n%s", p.Name, ir.Print(g))
		}
	}
	if opts.TimePasses && opts.Out != nil {
		var total time.Duration
		for _, t := range times {
			total += t.Time
		}
		fmt.Fprintf(opts.Out, "; pass times (total %v)\n", total.Round(time.Microsecond))
		for _, t := range times {
			fmt.Fprintf(opts.Out, ";   %-16s %10v\n", t.Name, t.Time.Round(time.Microsecond))
		}
	}
	return times, nil
}

func names(list []Pass) []string {
	out := make([]string, len(list))
	for i, p := range list {
		out[i] = p.Name
	}
	return out
}
