package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/passes"
)

type compileCmd struct {
	Model        string `arg:"" optional:"" help:"Model file (.gguf). Without one, the built-in synthetic llama." type:"path"`
	Target       string `short:"t" help:"Target: goasm (the CPU), reference (the interpreter), cuda or metal." default:"goasm"`
	Output       string `short:"o" help:"Write the plan to this file (run it with: minervac run FILE)." type:"path"`
	EmbedWeights bool   `help:"Copy the weights into the plan (self-contained, mmap-able) instead of referencing the model file."`
	Ctx          int    `help:"Default KV cache size in positions (default: the model's context length, at most 4096)."`
	cacheFlags   `embed:""`
	Emit         string `help:"What to print on stdout: ir (the final graph), summary, none, or cuda/metal (the emitted kernel source of that target; default: summary, or none with -o)." enum:"ir,summary,none,cuda,metal," default:""`
	PrintAfter   string `help:"Print the graph on stderr after the named pass, or after every pass with 'all'." placeholder:"all|PASS"`
	TimePasses   bool   `help:"Report each pass's time on stderr."`
	VerifyEach   bool   `help:"Run the IR verifier after every pass."`
	Verbose      bool   `short:"v" help:"Print load, compile and write times on stderr."`
}

func (c *compileCmd) Run() error {
	if c.Ctx < 0 {
		return usageError{fmt.Sprintf("--ctx %d must be positive", c.Ctx)}
	}
	if err := checkTarget(c.Target); err != nil {
		return err
	}
	if (c.Emit == "cuda" || c.Emit == "metal") && c.Emit != c.Target {
		return usageError{fmt.Sprintf("--emit %s needs -target %s (the source is emitted for the target compiled)", c.Emit, c.Emit)}
	}
	if c.EmbedWeights && c.Output == "" {
		return usageError{"--embed-weights needs -o FILE"}
	}
	if c.Output != "" && c.Model == "" {
		return usageError{"-o needs a model file: the built-in model has no file for the plan to refer to"}
	}
	tm := &timer{on: c.Verbose}
	tm.reset()
	m, err := loadModel(c.Model, c.types().arch())
	if err != nil {
		return err
	}
	defer m.src.Close()
	tm.say("loaded %s", displayName(c.Model))
	before := opCounts(m.model.Graph)
	p, err := compileModel(m, c.Model, compileOptions{
		Target: c.Target, Ctx: c.Ctx, Cache: c.types(),
		Pass: passes.Options{VerifyEach: c.VerifyEach, PrintAfter: c.PrintAfter, TimePasses: c.TimePasses, Out: os.Stderr},
	})
	if err != nil {
		return err
	}
	tm.say("compiled for %s", c.Target)
	if c.Ctx > 0 {
		// A plan may be compiled for a bigger machine: say so, do not refuse.
		if err := checkKVMemory(p.Graph, c.Ctx, availableMemory()); err != nil {
			fmt.Fprintf(os.Stderr, "minervac: warning: %v (running the plan here would be refused)\n", err)
		}
	}
	if c.Output != "" {
		if err := writePlan(p, m, c.Output, c.EmbedWeights); err != nil {
			return err
		}
		st, err := os.Stat(c.Output)
		if err != nil {
			return err
		}
		tm.say("wrote %s (%d bytes)", c.Output, st.Size())
	}
	g := m.model.Graph
	emit := c.Emit
	if emit == "" {
		emit = "summary"
		if c.Output != "" {
			emit = "none"
		}
	}
	switch emit {
	case "ir":
		fmt.Print(ir.Print(g))
	case "summary":
		printSummary(c.Model, m, before, g)
	case "cuda", "metal":
		var lib gpuLibrary
		if err := json.Unmarshal(p.Kernels[emit], &lib); err != nil {
			return fmt.Errorf("--emit %s: %w", emit, err)
		}
		fmt.Print(lib.Source)
	}
	return nil
}

func printSummary(path string, m *loaded, before map[string]int, g *ir.Graph) {
	after := opCounts(g)
	fmt.Printf("model: %s (%s, %d layers)\n", displayName(path), m.model.Config.Arch, m.model.Config.NLayer)
	fmt.Printf("ops per step: %d before fusion, %d after (plus %d weight transforms done once at load)\n",
		total(before), total(after), loadOps(after))
	fmt.Printf("  %-16s %8s %8s\n", "op", "before", "after")
	for _, op := range unionKeys(before, after) {
		fmt.Printf("  %-16s %8d %8d\n", op, before[op], after[op])
	}
	if a, ok := g.Attrs["arena_bytes_per_token"]; ok {
		fmt.Printf("activation arena: %v bytes per token (naive sum of intermediates: %v)\n", a, g.Attrs["naive_bytes_per_token"])
	}
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
