package chat

import (
	"errors"
	"fmt"

	"github.com/nikolalohinski/gonja/v2/builtins"
	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
)

// Limits that keep a hostile or broken template (templates come inside model
// files) to an error instead of a crash: transformers renders in Jinja2's
// sandbox, which has no loader for include/import/extends and caps range();
// a Go stack overflow from endless macro recursion cannot be recovered, so
// macro calls are counted.

const (
	// maxRange is the sandbox's MAX_RANGE: range() may give at most this many items.
	maxRange = 100000
	// maxMacroDepth bounds macro recursion (Python stops at its recursion
	// limit, about a thousand frames; real templates nest a few levels).
	maxMacroDepth = 200
	// depthVar names the per-render macro depth counter in the context.
	depthVar = "__chat_macro_depth__"
)

// controlStructureNames are gonja's statements that a chat template may use.
// include, import, from and extends are left out: there is nothing to load
// (transformers' environment has no loader either), and a template including
// itself would never end.
var controlStructureNames = []string{
	"autoescape", "block", "filter", "for", "if", "macro", "raw", "set", "with", "do", "break",
	"continue", "trans", "call",
}

func controlStructureSet() *exec.ControlStructureSet {
	m := map[string]parser.ControlStructureParser{}
	for _, name := range controlStructureNames {
		if p, ok := builtins.ControlStructures.Get(name); ok {
			m[name] = p
		}
	}
	if p, ok := m["macro"]; ok {
		m["macro"] = countedMacroParser(p)
	}
	return exec.NewControlStructureSet(m)
}

// countedMacro defines a macro as gonja does, then wraps the function it
// stored so that each call counts against the render's depth.
type countedMacro struct {
	*controlStructures.MacroControlStructure
}

func countedMacroParser(inner parser.ControlStructureParser) parser.ControlStructureParser {
	return func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
		cs, err := inner(p, args)
		if err != nil {
			return nil, err
		}
		mcs, ok := cs.(*controlStructures.MacroControlStructure)
		if !ok {
			return cs, nil
		}
		return &countedMacro{mcs}, nil
	}
}

func (c *countedMacro) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	if err := c.MacroControlStructure.Execute(r, tag); err != nil {
		return err
	}
	fn, ok := r.Environment.Context.Get(c.Name)
	macro, isMacro := fn.(exec.Macro)
	depthAny, _ := r.Environment.Context.Get(depthVar)
	depth, hasDepth := depthAny.(*int)
	if !ok || !isMacro || !hasDepth {
		return nil
	}
	name := c.Name
	r.Environment.Context.Set(name, exec.Macro(func(params *exec.VarArgs) *exec.Value {
		if *depth >= maxMacroDepth {
			return exec.AsValue(fmt.Errorf("macro %s: calls nested deeper than %d", name, maxMacroDepth))
		}
		*depth++
		defer func() { *depth-- }()
		return macro(params)
	}))
	return nil
}

// rangeList is Python's range() as a list, capped as the sandbox caps it
// (gonja's feeds a channel from a goroutine, which a loop that breaks early
// leaves blocked forever).
func rangeList(args *exec.VarArgs) (*exec.Value, error) {
	if len(args.KwArgs) > 0 {
		return nil, errors.New("range() takes no keyword arguments")
	}
	var n [3]int
	for i, a := range args.Args {
		if i >= 3 || !a.IsInteger() {
			return nil, errors.New("range() takes one to three integers")
		}
		n[i] = a.Integer()
	}
	start, stop, step := 0, 0, 1
	switch len(args.Args) {
	case 1:
		stop = n[0]
	case 2:
		start, stop = n[0], n[1]
	case 3:
		start, stop, step = n[0], n[1], n[2]
	default:
		return nil, errors.New("range() takes one to three integers")
	}
	if step == 0 {
		return nil, errors.New("range() arg 3 must not be zero")
	}
	count := 0
	if step > 0 && stop > start {
		count = (stop - start + step - 1) / step
	} else if step < 0 && start > stop {
		count = (start - stop - step - 1) / -step
	}
	if count > maxRange {
		return nil, fmt.Errorf("range() too big: %d items, at most %d", count, maxRange)
	}
	out := make(pyList, count)
	for i := range out {
		out[i] = start + i*step
	}
	return exec.AsValue(out), nil
}
