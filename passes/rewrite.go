package passes

import "github.com/minerva-llm/minerva/ir"

// Users maps every value to the values that take it as an operand, in graph
// order (a value appears once per operand slot). Graph outputs are not users;
// see IsOutput.
func Users(g *ir.Graph) map[*ir.Value][]*ir.Value {
	users := make(map[*ir.Value][]*ir.Value, len(g.Values))
	for _, v := range g.Values {
		for _, a := range v.Args {
			users[a] = append(users[a], v)
		}
	}
	return users
}

// IsOutput reports whether v is a named output of g.
func IsOutput(g *ir.Graph, v *ir.Value) bool {
	for _, o := range g.Outputs {
		if o.Value == v {
			return true
		}
	}
	return false
}

// ReplaceUses makes every operand and output that refers to old refer to new.
func ReplaceUses(g *ir.Graph, old, new *ir.Value) {
	for _, v := range g.Values {
		for i, a := range v.Args {
			if a == old {
				v.Args[i] = new
			}
		}
	}
	for i, o := range g.Outputs {
		if o.Value == old {
			g.Outputs[i].Value = new
		}
	}
}

// InsertBefore puts vals into the graph just before at (in order), keeping
// the list topological as long as vals only use values defined before at.
func InsertBefore(g *ir.Graph, at *ir.Value, vals ...*ir.Value) {
	for i, v := range g.Values {
		if v == at {
			rest := append(append([]*ir.Value{}, vals...), g.Values[i:]...)
			g.Values = append(g.Values[:i], rest...)
			return
		}
	}
	g.Values = append(g.Values, vals...)
}

// Remove deletes the given values from the list (their users must be gone).
func Remove(g *ir.Graph, dead map[*ir.Value]bool) {
	kept := g.Values[:0]
	for _, v := range g.Values {
		if !dead[v] {
			kept = append(kept, v)
		}
	}
	g.Values = kept
}

// NewValue builds a value whose type is inferred from its operands (or given
// for leaf ops and reshape), for passes that create ops.
func NewValue(op ir.Op, attrs ir.Attrs, args ...*ir.Value) (*ir.Value, error) {
	attrs, err := attrs.Clone() // plain Go ints become int64, as the IR stores them
	if err != nil {
		return nil, err
	}
	t, err := ir.Infer(op, args, attrs)
	if err != nil {
		return nil, err
	}
	return &ir.Value{ID: -1, Op: op, Args: args, Attrs: attrs, Type: t}, nil
}

// nextID returns an ID no value of g uses, for values a pass inserts before
// it renumbers.
func nextID(g *ir.Graph) int {
	n := 0
	for _, v := range g.Values {
		n = max(n, v.ID+1)
	}
	return n
}

// Finish renumbers the graph after a rewrite so printed graphs stay dense.
func Finish(g *ir.Graph) { g.Renumber() }
