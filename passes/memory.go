package passes

import (
	"fmt"
	"sort"

	"github.com/minerva-llm/minerva/ir"
)

// The memory plan places every activation of a step in one arena. Sizes are
// symbolic in T (tokens in the step), so the plan is made in bytes per token:
// an activation of type f32[T, 64] takes 256 bytes per token, and for a step
// of T tokens the arena holds T · arena_bytes_per_token bytes and a value with
// arena_offset o starts at byte T · o. The plan is recorded in attributes:
//
//	value  arena_offset = o          every activation (views share their operand's)
//	value  inplace = 1               the result overwrites its first operand's buffer
//	graph  arena_bytes_per_token     the arena size (the peak of the plan)
//	graph  naive_bytes_per_token     the sum of all buffers, as if none were reused
//	graph  arena_lower_bound_bytes_per_token
//	                                 the most bytes ever live at once: no plan
//	                                 can use a smaller arena
const (
	memAttrOffset     = "arena_offset"
	memAttrInPlace    = "inplace"
	memAttrArena      = "arena_bytes_per_token"
	memAttrNaive      = "naive_bytes_per_token"
	memAttrLowerBound = "arena_lower_bound_bytes_per_token"
)

// memInPlaceOps are the ops whose result may overwrite their first operand:
// each output element depends only on the same element of the first operand
// (add, mul, silu, gelu), on the pair of elements it is rotated with (rope),
// or on its own row, which a kernel reads completely before writing it back
// (softmax, rmsnorm). The result has the first operand's type.
var memInPlaceOps = map[ir.Op]bool{
	ir.OpAdd: true, ir.OpMul: true, ir.OpSiLU: true, ir.OpGELU: true,
	ir.OpSoftmax: true, ir.OpRoPE: true, ir.OpRMSNorm: true,
}

func init() {
	register(Pass{
		Name: "plan-memory",
		Doc:  "liveness-based offsets of all activations in one arena (bytes per token), in-place reuse; checked by CheckMemoryPlan",
		Run:  PlanMemory,
	})
}

// memIsStateResult reports whether v's result is a state buffer rather than a
// new value: kvwrite returns the cache it wrote into. qkv_rope writes the
// caches too, but its result is the rotated q, an ordinary activation.
func memIsStateResult(v *ir.Value) bool {
	return ir.WritesState(v.Op) && v.Op != ir.OpQKVRoPE
}

// memActivations returns the bytes per token of every value that lives in the
// arena. Those are all values except leaves (inputs, including the per-step
// "tokens" and "pos", weights and states), constants (ir.ConstValues: merged
// or rescaled weights live with the weights), the results of state-writing
// ops that are the state buffer itself (kvwrite), and reshapes of any of
// these (a view of a buffer outside the arena), and the "logits" output: a
// step computes and returns only the logits rows it is asked for (a prompt
// step, the last one), so a backend sizes that buffer by those rows — in
// the arena, a [T, 32000] logits value took 94% of a llama's bytes per
// token for rows nobody computes. A reshape of an activation
// is a view of its operand's buffer and takes its operand's size whatever
// its own shape; every other activation must have type [T, n...] with
// constant n, or the plan cannot be expressed per token and an error names
// the value.
func memActivations(g *ir.Graph) (map[*ir.Value]int64, error) {
	consts := ir.ConstValues(g)
	logits := g.Output("logits")
	acts := make(map[*ir.Value]int64)
	for _, v := range g.Values {
		switch {
		case v.Op.IsLeaf(), consts[v], memIsStateResult(v), v == logits && v.Op != ir.OpReshape:
			continue
		case v.Op == ir.OpReshape:
			if n, ok := acts[v.Args[0]]; ok {
				acts[v] = n
			}
			continue
		}
		n, err := memBytesPerToken(v.Type)
		if err != nil {
			return nil, fmt.Errorf("%v (%s): %w", v, v.Op, err)
		}
		acts[v] = n
	}
	return acts, nil
}

// memBytesPerToken is the size of one token's row of a [T, n...] value.
func memBytesPerToken(t ir.Type) (int64, error) {
	bad := fmt.Errorf("type %s is not [T, n...] with constant n, so its size is not a number of bytes per token", t)
	if len(t.Shape) == 0 || t.Shape[0] != ir.Sym("T") {
		return 0, bad
	}
	n := int64(1)
	for _, d := range t.Shape[1:] {
		if !d.IsConst() {
			return 0, bad
		}
		n *= d.N
	}
	b, err := t.DType.RowBytes(n)
	if err != nil {
		return 0, fmt.Errorf("type %s: %w", t, err)
	}
	return b, nil
}

// memBuffer is one block of the arena: a value and everything that shares its
// bytes (its reshape views and the in-place results written over it).
type memBuffer struct {
	members    []*ir.Value
	size       int64
	start, end int // live from the root's definition to the members' last use
	offset     int64
}

// PlanMemory is the plan-memory pass. It drops any previous plan, so running
// it twice gives the same graph.
//
// Liveness: with the values numbered in graph order, a value is live from its
// definition to its last use; a graph output is live to the end (index
// len(g.Values)), and a value nobody uses only at its definition. A value
// and an operand of the same op are live at once (the op reads one while
// writing the other), so they get different bytes unless the op is in place.
//
// Sharing: a reshape is a view and always shares its operand's buffer,
// extending that buffer's lifetime to its own last use. An op of memInPlaceOps
// takes over its first operand's buffer (attribute inplace = 1) when the
// sizes agree and nothing that lives in that buffer, the operand and its
// views, is used after the op or is a graph output.
//
// Placement: buffers are placed first fit (the lowest offset where they
// overlap no already placed buffer live at the same time) in three orders:
// by decreasing size, by definition, and by decreasing lifetime. The
// smallest arena wins (the first of the three on a tie). On the graphs we
// build the result equals the lower bound, the most bytes live at one time.
//
// A graph with an activation whose size is not a whole number of bytes per
// token (a [T, T] score matrix, say) is left unplanned: the pass records why
// in the graph attribute memory_unplanned and changes nothing else, so a
// backend can fall back to allocating each value on its own. Our frontends
// never build such graphs.
//
// The pass checks its result with CheckMemoryPlan before returning.
func PlanMemory(g *ir.Graph) error {
	memClear(g)
	acts, err := memActivations(g)
	if err != nil {
		if g.Attrs == nil {
			g.Attrs = ir.Attrs{}
		}
		g.Attrs["memory_unplanned"] = err.Error()
		return nil
	}
	index, last := memLiveness(g)

	bufOf := make(map[*ir.Value]*memBuffer)
	var bufs []*memBuffer
	inPlace := make(map[*ir.Value]bool)
	naive := int64(0)
	for i, v := range g.Values {
		size, ok := acts[v]
		if !ok {
			continue
		}
		if v.Op == ir.OpReshape {
			b := bufOf[v.Args[0]]
			b.members = append(b.members, v)
			b.end = max(b.end, last[v])
			bufOf[v] = b
			continue
		}
		naive += size
		if memInPlaceOps[v.Op] {
			// b.end is the last use of everything in b so far; v uses b, so
			// b.end ≥ i, and b.end == i means all of it dies here.
			if b := bufOf[v.Args[0]]; b != nil && b.size == size && b.end == i {
				b.members = append(b.members, v)
				b.end = max(b.end, last[v])
				bufOf[v] = b
				inPlace[v] = true
				continue
			}
		}
		b := &memBuffer{members: []*ir.Value{v}, size: size, start: index[v], end: last[v]}
		bufOf[v] = b
		bufs = append(bufs, b)
	}

	arena := memPlace(bufs)
	for _, b := range bufs {
		for _, v := range b.members {
			memSetAttr(v, memAttrOffset, b.offset)
			if inPlace[v] {
				memSetAttr(v, memAttrInPlace, int64(1))
			}
		}
	}
	if g.Attrs == nil {
		g.Attrs = ir.Attrs{}
	}
	g.Attrs[memAttrArena] = arena
	g.Attrs[memAttrNaive] = naive
	g.Attrs[memAttrLowerBound] = memLowerBound(bufs, len(g.Values))
	if err := CheckMemoryPlan(g); err != nil {
		return fmt.Errorf("the plan is wrong (a bug in plan-memory): %w", err)
	}
	return nil
}

// memClear removes every attribute a previous plan wrote.
func memClear(g *ir.Graph) {
	for _, v := range g.Values {
		for _, k := range []string{memAttrOffset, memAttrInPlace} {
			if _, ok := v.Attrs[k]; ok {
				a := memCloneAttrs(v.Attrs)
				delete(a, k)
				v.Attrs = a
			}
		}
	}
	for _, k := range []string{memAttrArena, memAttrNaive, memAttrLowerBound, "memory_unplanned"} {
		delete(g.Attrs, k)
	}
}

// setAttr sets one attribute on a copy of the value's map, so that maps a
// pass may have shared between values are never changed behind its back.
func memSetAttr(v *ir.Value, key string, val any) {
	a := memCloneAttrs(v.Attrs)
	a[key] = val
	v.Attrs = a
}

func memCloneAttrs(a ir.Attrs) ir.Attrs {
	out := make(ir.Attrs, len(a)+1)
	for k, x := range a {
		out[k] = x
	}
	return out
}

// memLiveness numbers the values in graph order and returns, for each, the
// index of its last use (len(g.Values) for graph outputs, its own index when
// unused).
func memLiveness(g *ir.Graph) (index, last map[*ir.Value]int) {
	index = make(map[*ir.Value]int, len(g.Values))
	last = make(map[*ir.Value]int, len(g.Values))
	for i, v := range g.Values {
		index[v] = i
		last[v] = i
		for _, a := range v.Args {
			last[a] = max(last[a], i)
		}
	}
	for _, o := range g.Outputs {
		last[o.Value] = len(g.Values)
	}
	return index, last
}

// memPlace sets every buffer's offset and returns the arena size.
func memPlace(bufs []*memBuffer) int64 {
	orders := []func(a, b *memBuffer) bool{
		func(a, b *memBuffer) bool { return a.size > b.size },
		func(a, b *memBuffer) bool { return false }, // definition order
		func(a, b *memBuffer) bool { return a.end-a.start > b.end-b.start },
	}
	best, bestArena := []int64(nil), int64(-1)
	for _, less := range orders {
		order := append([]*memBuffer(nil), bufs...) // bufs are in definition order
		sort.SliceStable(order, func(i, j int) bool { return less(order[i], order[j]) })
		arena := memFirstFit(order)
		if bestArena < 0 || arena < bestArena {
			bestArena = arena
			best = best[:0]
			for _, b := range bufs {
				best = append(best, b.offset)
			}
		}
	}
	for i, b := range bufs {
		b.offset = best[i]
	}
	return max(bestArena, 0)
}

// memFirstFit places the buffers in the given order, each at the lowest offset
// where it overlaps no buffer placed before it that is live at the same
// time, and returns the arena size.
func memFirstFit(order []*memBuffer) int64 {
	var placed []*memBuffer
	arena := int64(0)
	for _, b := range order {
		b.offset = 0
		if b.size == 0 {
			continue
		}
		var busy []*memBuffer
		for _, p := range placed {
			if p.start <= b.end && b.start <= p.end {
				busy = append(busy, p)
			}
		}
		sort.Slice(busy, func(i, j int) bool { return busy[i].offset < busy[j].offset })
		off := int64(0)
		for _, p := range busy {
			if p.offset >= off+b.size {
				break // the gap before p is large enough
			}
			off = max(off, p.offset+p.size)
		}
		b.offset = off
		arena = max(arena, off+b.size)
		placed = append(placed, b)
	}
	return arena
}

// memLowerBound is the most bytes live at any one time.
func memLowerBound(bufs []*memBuffer, n int) int64 {
	delta := make([]int64, n+2)
	for _, b := range bufs {
		delta[b.start] += b.size
		delta[b.end+1] -= b.size
	}
	best, cur := int64(0), int64(0)
	for _, d := range delta {
		cur += d
		best = max(best, cur)
	}
	return best
}
