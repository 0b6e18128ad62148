package gpu

import (
	"fmt"
	"strings"

	"github.com/minerva-llm/minerva/codegen/internal/kernsrc"
	"github.com/minerva-llm/minerva/ir"
)

// Standalone rope and kvwrite: what a graph keeps when fuse-qkv cannot
// merge its projections (Q4_K_M files give q/k and v different weight
// types). They run as two small launches per projection instead of one
// fused one, but every graph the passes leave runs.

// rope rotates x [T, W] (heads of head_dim) by the positions: one thread
// per column pair, as rope_kv's pairs.
func (e *Emitter) rope(v *ir.Value) error {
	a := v.Attrs
	w, err := kernsrc.LastConst(v.Type)
	if err != nil {
		return err
	}
	hd, nrot := a.Int("head_dim", 0), a.Int("n_rot", 0)
	if hd <= 0 || hd%2 != 0 || w%hd != 0 {
		return fmt.Errorf("rows of %d are not whole heads of an even head_dim %d", w, hd)
	}
	p := &Params{HD: hd, NRot: nrot, Half: nrot / 2, HalfHD: hd / 2, QD: w, QKD: w, N: w, Pairs: w / 2,
		Mode: a.Str("mode", "normal"), Threads: ropeThreads}
	p.Neox = p.Mode == "neox"
	if err := e.ropeFreqs(a, p); err != nil {
		return err
	}
	p.Name = fmt.Sprintf("rope_%s_w%dd%dr%d", p.Mode, w, hd, nrot)
	rows, err := RowsOf(v.Type)
	if err != nil {
		return err
	}
	args := []Arg{val(v.Args[0]), val(v.Args[1]), val(v)}
	p.bind(args)
	name, err := e.Add("rope", "", p)
	if err != nil {
		return err
	}
	e.Launch(Launch{Value: v.ID, Kernel: name, Threads: ropeThreads, Args: args,
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(p.Pairs, ropeThreads)}, rows, {N: 1}}})
	return nil
}

// ropeFreqs fills the frequency table and magnitude scale of a rotation
// from its attributes (ir/rope's numbers, as literals).
func (e *Emitter) ropeFreqs(a ir.Attrs, p *Params) error {
	freqs, mscale, err := kernsrc.RopeFreqs(a)
	if err != nil {
		return err
	}
	var fr []string
	for _, f := range freqs {
		fr = append(fr, fmt.Sprintf(e.Lang.Vec2, f[0], f[1]))
	}
	p.Freqs = strings.Join(fr, ", ")
	if mscale != 1 {
		s, err := kernsrc.FloatLiteral(mscale)
		if err != nil {
			return err
		}
		p.MScale = " * " + s
	}
	return nil
}

// kvwrite stores x [T, W] into rows base[t] + pos[t] of the cache. Its result is the
// cache itself (val binds the state), so readers of the written cache bind
// the state's buffer.
func (e *Emitter) kvwrite(v *ir.Value) error {
	cache, x := v.Args[0], v.Args[1]
	w, err := kernsrc.LastConst(x.Type)
	if err != nil {
		return err
	}
	p := &Params{K: w, Threads: 32}
	if p.CacheT, err = e.cacheType(cache.Type.DType); err != nil {
		return err
	}
	p.Name = fmt.Sprintf("kv_write_%d_%s", w, p.CacheT)
	rows, err := RowsOf(x.Type)
	if err != nil {
		return err
	}
	args := []Arg{val(x), val(v.Args[2]), KVBaseArg, val(cache)}
	p.bind(args)
	name, err := e.Add("kv_write", cache.Type.DType.String(), p)
	if err != nil {
		return err
	}
	e.Launch(Launch{Value: v.ID, Kernel: name, Threads: 32, Args: args,
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(w, 32)}, rows, {N: 1}}})
	return nil
}
