package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/passes"
)

type compileCmd struct {
	Model      string `arg:"" optional:"" help:"Model file (.gguf). Without one, the built-in synthetic llama." type:"path"`
	Emit       string `help:"What to print on stdout: ir (the final graph) or summary." default:"summary" enum:"ir,summary"`
	PrintAfter string `help:"Print the graph on stderr after the named pass, or after every pass with 'all'." placeholder:"all|PASS"`
	TimePasses bool   `help:"Report each pass's time on stderr."`
	VerifyEach bool   `help:"Run the IR verifier after every pass."`
}

func (c *compileCmd) Run() error {
	m, err := loadModel(c.Model, arch.Options{})
	if err != nil {
		return err
	}
	defer m.file.Close()
	list, err := passes.Pipeline()
	if err != nil {
		return err
	}
	g := m.model.Graph
	before := opCounts(g)
	_, err = passes.Run(g, list, passes.Options{
		VerifyEach: c.VerifyEach,
		PrintAfter: c.PrintAfter,
		TimePasses: c.TimePasses,
		Out:        os.Stderr,
	})
	if err != nil {
		if strings.HasPrefix(err.Error(), "--print-after") {
			return usageError{err.Error()}
		}
		return err
	}
	if c.Emit == "ir" {
		fmt.Print(ir.Print(g))
		return nil
	}
	after := opCounts(g)
	fmt.Printf("model: %s (%s, %d layers)\n", displayName(c.Model), m.model.Config.Arch, m.model.Config.NLayer)
	fmt.Printf("ops per step: %d before fusion, %d after (plus %d weight transforms done once at load)\n",
		total(before), total(after), loadOps(after))
	fmt.Printf("  %-16s %8s %8s\n", "op", "before", "after")
	for _, op := range unionKeys(before, after) {
		fmt.Printf("  %-16s %8d %8d\n", op, before[op], after[op])
	}
	if a, ok := g.Attrs["arena_bytes_per_token"]; ok {
		fmt.Printf("activation arena: %v bytes per token (naive sum of intermediates: %v)\n", a, g.Attrs["naive_bytes_per_token"])
	}
	return nil
}

// opCounts counts the ops a step executes (leaves excluded). Values computed
// from weights alone (merged projections, folded norm gains) run once at
// load; they are counted apart, under "load: op".
func opCounts(g *ir.Graph) map[string]int {
	n := map[string]int{}
	consts := ir.ConstValues(g)
	for _, v := range g.Values {
		switch {
		case v.Op.IsLeaf():
		case consts[v]:
			n["load: "+string(v.Op)]++
		default:
			n[string(v.Op)]++
		}
	}
	return n
}

func total(m map[string]int) int {
	t := 0
	for k, v := range m {
		if !strings.HasPrefix(k, "load: ") {
			t += v
		}
	}
	return t
}

func loadOps(m map[string]int) int {
	t := 0
	for k, v := range m {
		if strings.HasPrefix(k, "load: ") {
			t += v
		}
	}
	return t
}

func unionKeys(a, b map[string]int) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}
