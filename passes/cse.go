package passes

import (
	"fmt"
	"strings"

	"github.com/minerva-llm/minerva/ir"
)

// cse merges values that compute the same thing: the same op applied to the
// same operands (the same values, in the same order), with equal attributes
// and the same type. Leaves are the same when they have the same op and name
// (and type: a leaf declared twice with two types is not silently merged).
// The value defined first is kept and the later ones' uses move to it, so the
// graph stays in topological order. Merging runs in one pass over the graph:
// once two values are one, their users compare equal in turn.
//
// Ops that write state (kvwrite, qkv_rope) are never merged: each is a write,
// and two writes are not one. States are never merged either. Operands are
// compared as given; add(a, b) and add(b, a) are one value only after
// canonicalize has ordered them.
func cse(g *ir.Graph) error {
	index := make(map[*ir.Value]int, len(g.Values))
	for i, v := range g.Values {
		index[v] = i
	}
	seen := map[string]*ir.Value{}
	repl := map[*ir.Value]*ir.Value{}
	for _, v := range g.Values {
		for i, a := range v.Args {
			if r, ok := repl[a]; ok {
				v.Args[i] = r
			}
		}
		if v.Op == ir.OpState || ir.WritesState(v.Op) {
			continue
		}
		key := cseKey(v, index)
		if first, ok := seen[key]; ok {
			repl[v] = first
			continue
		}
		seen[key] = v
	}
	if len(repl) == 0 {
		return nil
	}
	for i, o := range g.Outputs {
		if r, ok := repl[o.Value]; ok {
			g.Outputs[i].Value = r
		}
	}
	dead := make(map[*ir.Value]bool, len(repl))
	for v := range repl {
		dead[v] = true
	}
	Remove(g, dead)
	Finish(g)
	return nil
}

// cseKey is a string equal for exactly the values cse treats as one: the op,
// then for a leaf its name and type, otherwise the operands (by position in the
// graph) and every attribute with its Go type, then the type.
func cseKey(v *ir.Value, index map[*ir.Value]int) string {
	var sb strings.Builder
	sb.WriteString(string(v.Op))
	if v.Op.IsLeaf() {
		fmt.Fprintf(&sb, " %q %s", v.Name(), v.Type)
		return sb.String()
	}
	for _, a := range v.Args {
		fmt.Fprintf(&sb, " %d", index[a])
	}
	sb.WriteString(" {")
	for _, k := range v.Attrs.Keys() {
		fmt.Fprintf(&sb, "%q: %T %#v, ", k, v.Attrs[k], v.Attrs[k])
	}
	sb.WriteString("} ")
	sb.WriteString(v.Type.String())
	return sb.String()
}

func init() {
	register(Pass{
		Name: "cse",
		Doc:  "merge values with the same op, operands, attributes and type (never state writes or states)",
		Run:  cse,
	})
}
