package passes

import "github.com/minerva-llm/minerva/ir"

// dce removes the values no output depends on.
//
// A value is live when a graph output refers to it or a live value takes it
// as an operand. Ops that write state (kvwrite, qkv_rope) are no exception:
// in a real graph the cache outputs keep each kvwrite alive and attention
// keeps qkv_rope alive through the query it returns. But their write into
// the persistent buffer is seen by later steps even when nothing in this
// step reads it, so an unused writer is dropped only when a live op writes
// the same rows (same positions operand) of every state it writes, as after
// fuse-qkv, whose qkv_rope takes over the cache writes of the kvwrites it
// replaced. Any other unused writer stays and keeps its operands alive.
//
// Leaves go like any other value, except the inputs the runtime binds by
// name ("tokens", "pos") and every state: those stay even when unused.
func dce(g *ir.Graph) error {
	live := map[*ir.Value]bool{}
	mark := func(v *ir.Value) {
		stack := []*ir.Value{v}
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if live[v] {
				continue
			}
			live[v] = true
			stack = append(stack, v.Args...)
		}
	}
	for _, o := range g.Outputs {
		mark(o.Value)
	}
	for _, v := range g.Values {
		if keptLeaf(v) {
			mark(v)
		}
	}
	// The rows of states written by the live writers.
	type rows struct{ state, pos *ir.Value }
	covered := map[rows]bool{}
	for _, v := range g.Values {
		if live[v] && ir.WritesState(v.Op) {
			for _, s := range writtenStates(v) {
				covered[rows{s, writePos(v)}] = true
			}
		}
	}
	for _, v := range g.Values {
		if live[v] || !ir.WritesState(v.Op) {
			continue
		}
		for _, s := range writtenStates(v) {
			if !covered[rows{s, writePos(v)}] {
				mark(v)
				break
			}
		}
	}
	dead := map[*ir.Value]bool{}
	for _, v := range g.Values {
		if !live[v] {
			dead[v] = true
		}
	}
	if len(dead) == 0 {
		return nil
	}
	Remove(g, dead)
	Finish(g)
	return nil
}

// keptLeaf reports whether v is a leaf the runtime binds by name, which stays
// in the graph even when nothing uses it.
func keptLeaf(v *ir.Value) bool {
	switch v.Op {
	case ir.OpState:
		return true
	case ir.OpInput:
		return v.Name() == "tokens" || v.Name() == "pos"
	}
	return false
}

// writtenStates returns the buffers a state-writing op writes: the state
// values at the root of its cache operands (a cache operand may itself be
// the result of an earlier kvwrite into the same buffer).
func writtenStates(v *ir.Value) []*ir.Value {
	caches := ir.WrittenOperands(v)
	out := make([]*ir.Value, len(caches))
	for i, c := range caches {
		for c.Op == ir.OpKVWrite {
			c = c.Args[0]
		}
		out[i] = c
	}
	return out
}

// writePos returns the positions operand of a state-writing op, the rows it
// writes (ir's table of in-place writes).
func writePos(v *ir.Value) *ir.Value { return ir.WritePos(v) }

func init() {
	register(Pass{
		Name: "dce",
		Doc:  "remove values no output depends on (keeps tokens/pos inputs, states, and the only writer of a state)",
		Run:  dce,
	})
}
