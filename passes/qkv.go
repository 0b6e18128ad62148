package passes

import (
	"reflect"

	"github.com/minerva-llm/minerva/ir"
)

func init() {
	register(Pass{
		Name: "fuse-qkv",
		Doc:  "q, k, v projections of one input + rope + cache writes → qkv_rope with a merged weight",
		Run:  fuseQKV,
	})
}

// fuseQKV rewrites
//
//	mq = matmul(x, wq [, bq]); q = rope(mq, pos)
//	mk = matmul(x, wk [, bk]); k = rope(mk, pos); kc' = kvwrite(kc, k, pos)
//	mv = matmul(x, wv [, bv]);                    vc' = kvwrite(vc, mv, pos)
//
// into q' = qkv_rope(x, concat(wq, wk, wv), pos, kc, vc [, concat(bq, bk, bv)]).
// Between a matmul and its rope there may be a per-head RMSNorm (Qwen3's
// q/k norms: reshape to [T, heads, Dh] → rmsnorm with a [Dh] gain → reshape
// back), on both q and k with one eps; qkv_rope then takes the two gains
// (qk_norm).
// Users of q take q'; users of kc' and vc' take the state values kc and vc,
// which qkv_rope writes (those users must also take q', so that they are
// ordered after the write). Anything that does not match exactly is left as
// it is: weights of different dtypes (Q4_K_M files mix q4_k and q6_k),
// different inputs or positions, ropes with different attributes, extra
// users of an intermediate value, or a missing cache write.
func fuseQKV(g *ir.Graph) error {
	for fuseQKVOnce(g) {
	}
	Finish(g)
	return nil
}

// qkvProj is one projection of a candidate group: its matmul, its rope (q, k)
// and its cache write (k, v).
type qkvProj struct {
	mm, rope, write *ir.Value
	norm            *headNorm // nil without a per-head norm
}

// headNorm is a per-head RMSNorm between a projection and its rope.
type headNorm struct {
	split, norm, join *ir.Value // reshape to [T, heads, Dh], rmsnorm, reshape back
}

// qkvGroup collects the projections of one input and one position vector.
type qkvGroup struct {
	x, pos  *ir.Value
	q, k, v []qkvProj
}

// fuseQKVOnce applies the first fusion that matches and reports whether it
// did. Scanning afresh after each rewrite keeps the use lists exact.
func fuseQKVOnce(g *ir.Graph) bool {
	users := Users(g)
	outs := fzOutputs(g)
	sole := func(v *ir.Value) *ir.Value {
		if outs[v] || len(users[v]) != 1 {
			return nil
		}
		return users[v][0]
	}
	type key struct{ x, pos *ir.Value }
	groups := map[key]*qkvGroup{}
	var order []*qkvGroup
	group := func(x, pos *ir.Value) *qkvGroup {
		k := key{x, pos}
		if gr, ok := groups[k]; ok {
			return gr
		}
		gr := &qkvGroup{x: x, pos: pos}
		groups[k] = gr
		order = append(order, gr)
		return gr
	}
	for _, m := range g.Values {
		if m.Op != ir.OpMatMul {
			continue
		}
		u := sole(m)
		in := m // what the rope rotates: m, or the per-head norm's result
		hn := matchHeadNorm(m, sole)
		if hn != nil {
			u, in = sole(hn.join), hn.join
		}
		switch {
		case u == nil:
		case u.Op == ir.OpRoPE && u.Args[0] == in:
			pos := u.Args[1]
			if w := sole(u); w != nil && w.Op == ir.OpKVWrite && w.Args[1] == u {
				if w.Args[2] == pos {
					gr := group(m.Args[0], pos)
					gr.k = append(gr.k, qkvProj{m, u, w, hn})
				}
				continue
			}
			written := false
			for _, r := range users[u] {
				written = written || ir.WritesState(r.Op)
			}
			if !written {
				gr := group(m.Args[0], pos)
				gr.q = append(gr.q, qkvProj{m, u, nil, hn})
			}
		case hn == nil && u.Op == ir.OpKVWrite && u.Args[1] == m:
			gr := group(m.Args[0], u.Args[2])
			gr.v = append(gr.v, qkvProj{m, nil, u, nil})
		}
	}
	for _, gr := range order {
		if len(gr.q) == 1 && len(gr.k) == 1 && len(gr.v) == 1 && fuseQKVGroup(g, users, outs, gr) {
			return true
		}
	}
	return false
}

// matchHeadNorm finds reshape → rmsnorm(gain) → reshape after m, each the
// sole user of the one before, splitting m's [T, heads·Dh] rows into
// heads and joining them back; nil when m is not followed by one.
func matchHeadNorm(m *ir.Value, sole func(*ir.Value) *ir.Value) *headNorm {
	split := sole(m)
	if split == nil || split.Op != ir.OpReshape || len(split.Type.Shape) != 3 {
		return nil
	}
	norm := sole(split)
	if norm == nil || norm.Op != ir.OpRMSNorm || len(norm.Args) != 2 || norm.Args[0] != split {
		return nil
	}
	join := sole(norm)
	if join == nil || join.Op != ir.OpReshape || !join.Type.Equal(m.Type) {
		return nil
	}
	s := split.Type.Shape
	if len(m.Type.Shape) != 2 || s[0] != m.Type.Shape[0] || !s[1].IsConst() || !s[2].IsConst() ||
		!m.Type.Shape[1].IsConst() || s[1].N*s[2].N != m.Type.Shape[1].N {
		return nil
	}
	return &headNorm{split, norm, join}
}

// fuseQKVGroup checks the remaining conditions on one matched group and
// rewrites it; it reports false, changing nothing, when one fails.
func fuseQKVGroup(g *ir.Graph, users map[*ir.Value][]*ir.Value, outs map[*ir.Value]bool, gr *qkvGroup) bool {
	q, k, v := gr.q[0], gr.k[0], gr.v[0]
	wq, wk, wv := q.mm.Args[1], k.mm.Args[1], v.mm.Args[1]
	consts := ir.ConstValues(g)
	for _, w := range []*ir.Value{wk, wv} {
		if w.Type.DType != wq.Type.DType || w.Type.Shape[1] != wq.Type.Shape[1] {
			return false
		}
	}
	for _, w := range []*ir.Value{wq, wk, wv} {
		if !consts[w] || !w.Type.Shape[0].IsConst() {
			return false
		}
	}
	nb := len(q.mm.Args)
	if len(k.mm.Args) != nb || len(v.mm.Args) != nb {
		return false
	}
	// Per-head norms: on both q and k or on neither, with one eps, constant
	// gains of one head's width, over heads of the rope's head_dim.
	var qg, kg *ir.Value
	if (q.norm == nil) != (k.norm == nil) {
		return false
	}
	if q.norm != nil {
		qn, kn := q.norm.norm, k.norm.norm
		qg, kg = qn.Args[1], kn.Args[1]
		hd := q.rope.Attrs.Int("head_dim", 0)
		if qn.Attrs.Float("eps", 0) != kn.Attrs.Float("eps", 0) || !consts[qg] || !consts[kg] ||
			q.norm.split.Type.Shape[2] != ir.D(hd) || k.norm.split.Type.Shape[2] != ir.D(hd) {
			return false
		}
	}
	var bq, bk, bv *ir.Value
	if nb == 3 {
		bq, bk, bv = q.mm.Args[2], k.mm.Args[2], v.mm.Args[2]
		for _, b := range []*ir.Value{bq, bk, bv} {
			if !consts[b] || b.Type.DType != bq.Type.DType {
				return false
			}
		}
	}
	if !reflect.DeepEqual(q.rope.Attrs, k.rope.Attrs) {
		return false
	}
	for _, a := range []string{"n_head", "n_kv_head", "norm", "eps", "gain", "bias", "residual"} {
		if _, ok := q.rope.Attrs[a]; ok {
			return false
		}
	}
	hd := q.rope.Attrs.Int("head_dim", 0)
	qw, kw, vw := wq.Type.Shape[0].N, wk.Type.Shape[0].N, wv.Type.Shape[0].N
	if hd <= 0 || qw%hd != 0 || kw%hd != 0 || vw != kw {
		return false
	}
	// The caches: states that nothing else reads or writes, so writing them
	// earlier than the kvwrites did cannot be observed.
	kc, vc := k.write.Args[0], v.write.Args[0]
	if kc == vc {
		return false
	}
	for _, c := range []struct{ state, write *ir.Value }{{kc, k.write}, {vc, v.write}} {
		if c.state.Op != ir.OpState || outs[c.state] || len(users[c.state]) != 1 || users[c.state][0] != c.write {
			return false
		}
	}
	// Readers of the written caches must also read q', which orders them
	// after the write; graph outputs are read after the whole step.
	for _, w := range []*ir.Value{k.write, v.write} {
		for _, u := range users[w] {
			reads := false
			for _, a := range u.Args {
				reads = reads || a == q.rope
			}
			if !reads {
				return false
			}
		}
	}

	attrs, err := q.rope.Attrs.Clone()
	if err != nil {
		return false
	}
	attrs["n_head"] = qw / hd
	attrs["n_kv_head"] = kw / hd
	attrs["norm"] = int64(0)
	if qg != nil {
		attrs["qk_norm"] = int64(1)
		attrs["qk_eps"] = q.norm.norm.Attrs.Float("eps", 0)
	}
	wqkv, err := NewValue(ir.OpConcat, nil, wq, wk, wv)
	if err != nil {
		return false
	}
	newVals := []*ir.Value{wqkv}
	args := []*ir.Value{gr.x, wqkv, gr.pos, kc, vc}
	if nb == 3 {
		bqkv, err := NewValue(ir.OpConcat, nil, bq, bk, bv)
		if err != nil {
			return false
		}
		newVals = append(newVals, bqkv)
		args = append(args, bqkv)
		attrs["bias"] = int64(1)
	}
	if qg != nil {
		args = append(args, qg, kg)
	}
	fused, err := NewValue(ir.OpQKVRoPE, attrs, args...)
	if err != nil || !fused.Type.Equal(q.rope.Type) {
		return false
	}
	newVals = append(newVals, fused)

	// Place the new values after all their operands and before the first
	// value that reads q or the written caches.
	index := fzIndex(g)
	last := -1
	for _, a := range []*ir.Value{gr.x, gr.pos, kc, vc, wq, wk, wv, bq, bk, bv, qg, kg} {
		if a == nil {
			continue
		}
		last = max(last, index[a])
	}
	dead := []*ir.Value{q.mm, q.rope, k.mm, k.rope, k.write, v.mm, v.write}
	for _, p := range []qkvProj{q, k} {
		if p.norm != nil {
			dead = append(dead, p.norm.split, p.norm.norm, p.norm.join)
		}
	}
	at := 0 // with no users: just after the values it replaces
	for _, d := range dead {
		at = max(at, index[d]+1)
	}
	for _, r := range []*ir.Value{q.rope, k.write, v.write} {
		for _, u := range users[r] {
			at = min(at, index[u])
		}
	}
	if at <= last {
		return false
	}
	id := nextID(g)
	for _, nv := range newVals {
		nv.ID = id
		id++
	}
	if at < len(g.Values) {
		InsertBefore(g, g.Values[at], newVals...)
	} else {
		g.Values = append(g.Values, newVals...)
	}
	ReplaceUses(g, q.rope, fused)
	ReplaceUses(g, k.write, kc)
	ReplaceUses(g, v.write, vc)
	gone := map[*ir.Value]bool{}
	for _, d := range dead {
		gone[d] = true
	}
	Remove(g, gone)
	return true
}

// fzOutputs is the set of values that are graph outputs.
func fzOutputs(g *ir.Graph) map[*ir.Value]bool {
	outs := make(map[*ir.Value]bool, len(g.Outputs))
	for _, o := range g.Outputs {
		outs[o.Value] = true
	}
	return outs
}

// fzIndex maps every value to its position in the graph's list.
func fzIndex(g *ir.Graph) map[*ir.Value]int {
	index := make(map[*ir.Value]int, len(g.Values))
	for i, v := range g.Values {
		index[v] = i
	}
	return index
}
