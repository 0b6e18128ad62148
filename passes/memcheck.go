package passes

import (
	"fmt"
	"sort"

	"github.com/minerva-llm/minerva/ir"
)

// CheckMemoryPlan proves that the memory plan recorded in g's attributes (see
// PlanMemory) is safe. It trusts nothing but the graph itself: it re-derives
// which values are activations, their sizes and their live ranges, and then
// requires that
//
//   - the graph has arena_bytes_per_token, and every activation an
//     arena_offset with 0 ≤ offset and offset + size ≤ arena; values that
//     are not activations have no offset and no inplace claim;
//   - a reshape has its operand's offset (a view shares the buffer);
//   - a value marked inplace = 1 is an op that may run in place, with its
//     first operand's offset and size, and overwrites nothing still needed:
//     every value defined before it that shares its bytes (the operand, the
//     values the operand was itself in place on, and their views) has its
//     last use at this op at the latest and is not a graph output;
//   - any two activations whose live ranges overlap share no byte, unless
//     they are joined by the view and in-place relations above.
//
// Live ranges are inclusive: a value is live from its definition to its last
// use, graph outputs to the end. Errors name the values involved.
func CheckMemoryPlan(g *ir.Graph) error {
	acts, err := memActivations(g)
	if err != nil {
		return fmt.Errorf("memory plan: %w", err)
	}
	arena, ok := g.Attrs[memAttrArena].(int64)
	if !ok || arena < 0 {
		return fmt.Errorf("memory plan: graph attribute %s is missing or not a non-negative integer (%v)", memAttrArena, g.Attrs[memAttrArena])
	}

	// Re-derive liveness.
	def := make(map[*ir.Value]int, len(g.Values))
	last := make(map[*ir.Value]int, len(g.Values))
	lastUser := make(map[*ir.Value]string, len(g.Values))
	for i, v := range g.Values {
		def[v], last[v] = i, i
		for _, a := range v.Args {
			last[a] = i
			lastUser[a] = fmt.Sprintf("%v (%s)", v, v.Op)
		}
	}
	for _, o := range g.Outputs {
		last[o.Value] = len(g.Values)
		lastUser[o.Value] = fmt.Sprintf("output %q", o.Name)
	}
	name := func(v *ir.Value) string { return fmt.Sprintf("%v (%s)", v, v.Op) }

	// Offsets, bounds and attributes on the wrong values.
	offset := make(map[*ir.Value]int64, len(acts))
	for _, v := range g.Values {
		size, isAct := acts[v]
		raw, has := v.Attrs[memAttrOffset]
		if !isAct {
			if has {
				return fmt.Errorf("memory plan: %s is not an activation but has %s = %v", name(v), memAttrOffset, raw)
			}
			if _, claims := v.Attrs[memAttrInPlace]; claims {
				return fmt.Errorf("memory plan: %s is not an activation but claims %s", name(v), memAttrInPlace)
			}
			continue
		}
		off, isInt := raw.(int64)
		switch {
		case !has:
			return fmt.Errorf("memory plan: activation %s has no %s", name(v), memAttrOffset)
		case !isInt:
			return fmt.Errorf("memory plan: %s of %s is %v (%T), not an int64", memAttrOffset, name(v), raw, raw)
		case off < 0:
			return fmt.Errorf("memory plan: %s has a negative offset %d", name(v), off)
		case off > arena-size:
			return fmt.Errorf("memory plan: %s occupies bytes [%d, %d) per token, past the end of the arena (%d)", name(v), off, off+size, arena)
		}
		offset[v] = off
	}

	// Views and in-place claims join values into groups that share bytes.
	parent := make(map[*ir.Value]*ir.Value)
	var find func(v *ir.Value) *ir.Value
	find = func(v *ir.Value) *ir.Value {
		p, ok := parent[v]
		if !ok || p == v {
			return v
		}
		r := find(p)
		parent[v] = r
		return r
	}
	members := make(map[*ir.Value][]*ir.Value) // group root → members in graph order
	for _, v := range g.Values {
		if _, ok := acts[v]; !ok {
			continue
		}
		claim, claims := v.Attrs[memAttrInPlace]
		if claims && claim != int64(1) {
			return fmt.Errorf("memory plan: %s has %s = %v; the only value is 1", name(v), memAttrInPlace, claim)
		}
		switch {
		case v.Op == ir.OpReshape:
			a := v.Args[0]
			if claims {
				return fmt.Errorf("memory plan: %s is a view of %s and cannot also be in place", name(v), name(a))
			}
			if offset[v] != offset[a] {
				return fmt.Errorf("memory plan: %s is a view of %s but has offset %d, not %d", name(v), name(a), offset[v], offset[a])
			}
			parent[v] = find(a)
		case claims:
			if !memInPlaceOps[v.Op] {
				return fmt.Errorf("memory plan: %s claims to run in place, which %s cannot", name(v), v.Op)
			}
			a := v.Args[0]
			if _, ok := acts[a]; !ok {
				return fmt.Errorf("memory plan: %s claims to run in place on %s, which is not in the arena", name(v), name(a))
			}
			if acts[a] != acts[v] || offset[a] != offset[v] {
				return fmt.Errorf("memory plan: %s claims to run in place on %s but has bytes [%d, %d) per token, not [%d, %d)",
					name(v), name(a), offset[v], offset[v]+acts[v], offset[a], offset[a]+acts[a])
			}
			r := find(a)
			for _, u := range members[r] {
				if last[u] > def[v] {
					if u == a {
						return fmt.Errorf("memory plan: %s claims to run in place on %s, but %s is still used later by %s",
							name(v), name(a), name(a), lastUser[u])
					}
					return fmt.Errorf("memory plan: %s claims to run in place on %s, but %s shares its bytes and is still used later by %s",
						name(v), name(a), name(u), lastUser[u])
				}
			}
			parent[v] = r
		}
		r := find(v)
		members[r] = append(members[r], v)
	}

	// Values of different groups that are live at the same time must not
	// share a byte. Sorted by offset, each value only needs comparing with
	// the ones that start inside it.
	list := make([]*ir.Value, 0, len(acts))
	for v := range acts {
		if acts[v] > 0 {
			list = append(list, v)
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if offset[list[i]] != offset[list[j]] {
			return offset[list[i]] < offset[list[j]]
		}
		return def[list[i]] < def[list[j]]
	})
	for i, u := range list {
		end := offset[u] + acts[u]
		for _, w := range list[i+1:] {
			if offset[w] >= end {
				break
			}
			if find(u) == find(w) || last[u] < def[w] || last[w] < def[u] {
				continue
			}
			a, b := u, w
			if def[b] < def[a] {
				a, b = b, a
			}
			return fmt.Errorf("memory plan: %s (bytes [%d, %d) per token, live %d–%d) and %s (bytes [%d, %d), live %d–%d) overlap while both are live",
				name(a), offset[a], offset[a]+acts[a], def[a], last[a], name(b), offset[b], offset[b]+acts[b], def[b], last[b])
		}
	}
	return nil
}
