package gpu

import (
	"fmt"
	"strings"

	"github.com/minerva-llm/minerva/codegen/internal/kernsrc"
	"github.com/minerva-llm/minerva/codegen/sched"
	"github.com/minerva-llm/minerva/ir"
)

// attnRows is how many cache rows a warp scores before one online-softmax
// step (CUDA's attn_split, one lane per dimension): their warp_sums
// interleave.
const attnRows = 4

// attention lowers attention and flash_attention to a split pass and a
// merge pass through the step's scratch buffer (kv_splits partials per
// query and head); plain attention is one split.
func (e *Emitter) attention(v *ir.Value) error {
	a := v.Attrs
	q, k, vv := v.Args[0], v.Args[1], v.Args[2]
	nh, nkv, hd := a.Int("n_head", 0), a.Int("n_kv_head", 0), a.Int("head_dim", 0)
	splits := a.Int("kv_splits", 1)
	if k.Type.DType != vv.Type.DType {
		return fmt.Errorf("K and V differ in dtype: %s, %s", k.Type.DType, vv.Type.DType)
	}
	ct, err := e.cacheType(k.Type.DType)
	if err != nil {
		return err
	}
	kw, err := kernsrc.LastConst(k.Type)
	if err != nil {
		return err
	}
	vw, err := kernsrc.LastConst(vv.Type)
	if err != nil {
		return err
	}
	scale, err := kernsrc.FloatLiteral(a.Float("scale", 1))
	if err != nil {
		return err
	}
	dv := vw / nkv
	p := &Params{
		CacheT: ct, H: nh, HD: hd, DV: dv, Group: nh / nkv, Splits: splits, Window: a.Int("window", 0),
		QW: nh * hd, KW: kw, VW: vw, OW: nh * dv, PartW: dv + 2, Scale: scale, Sinks: len(v.Args) == 5,
		QPer: kernsrc.CeilDiv(hd, 32), VPer: kernsrc.CeilDiv(dv, 32), Rows: attnRows, NW: 1, Threads: 32,
	}
	p.Name = fmt.Sprintf("attn_split_%s_h%dkv%dd%dv%d_s%d", ct, nh, nkv, hd, dv, splits)
	if p.Window > 0 {
		p.Name += fmt.Sprintf("_w%d", p.Window)
	}
	scratch := Arg{Value: sched.Scratch, ScratchPerToken: 4 * nh * splits * p.PartW}
	args := []Arg{val(q), val(k), val(vv), val(v.Args[3]), KVBaseArg, scratch}
	p.bind(args)
	grid := [3]GridDim{{N: nh}, {N: splits}, {N: 1, PerToken: true}}
	minT := 0
	// A language with a kernel of its own for one-token steps runs it
	// then, and attn_split with one warp for longer steps; both write the
	// same partials.
	if nw := e.Lang.AttnDecodeWarps; nw > 1 {
		dp := *p
		dp.NW, dp.Threads = nw, 32*nw
		dp.Name = "attn_split_dec" + strings.TrimPrefix(p.Name, "attn_split")
		dec, err := e.Add("attn_split", k.Type.DType.String(), &dp)
		if err != nil {
			return err
		}
		e.Launch(Launch{Value: v.ID, Kernel: dec, Threads: dp.Threads, Args: args, MaxT: 1, Grid: grid})
		minT = 2
	}
	if _, ok := e.Lang.Templates["attn_prefill"]; ok && minT == 2 && ct == e.Lang.F16 && hd%16 == 0 && hd <= 128 &&
		dv%8 == 0 && dv <= 128 && kw%8 == 0 && vw%8 == 0 {
		// A language with a tensor-core kernel for prefill steps (CUDA's
		// attn_prefill: 64 queries of a head per block, f16 caches) runs
		// it there; it writes the same partials.
		pp := *p
		pp.NW, pp.Threads = 4, 128
		pp.Name = "attn_prefill" + strings.TrimPrefix(p.Name, "attn_split")
		pre, err := e.Add("attn_prefill", k.Type.DType.String(), &pp)
		if err != nil {
			return err
		}
		e.Launch(Launch{Value: v.ID, Kernel: pre, Threads: pp.Threads, Args: args, MinT: 2,
			Grid: [3]GridDim{{N: nh}, {N: 1, PerToken: true, Tile: 64}, {N: 1}}})
	} else {
		split, err := e.Add("attn_split", k.Type.DType.String(), p)
		if err != nil {
			return err
		}
		e.Launch(Launch{Value: v.ID, Kernel: split, Threads: 32, Args: args, MinT: minT, Grid: grid})
	}

	m := &Params{H: nh, DV: dv, Splits: splits, PartW: dv + 2, OW: nh * dv, Sinks: p.Sinks}
	args = []Arg{scratch}
	if m.Sinks {
		if m.SinkT, err = e.operandType("sinks", v.Args[4]); err != nil {
			return err
		}
		args = append(args, val(v.Args[4]))
	}
	args = append(args, val(v))
	m.bind(args)
	m.Name = fmt.Sprintf("attn_merge_h%dv%d_s%d", nh, dv, splits)
	if m.Sinks {
		m.Name += "_sinks"
		if m.SinkT == e.Lang.F16 {
			m.Name += "_f16"
		}
	}
	merge, err := e.Add("attn_merge", "", m)
	if err != nil {
		return err
	}
	e.Launch(Launch{Value: v.ID, Kernel: merge, Threads: int(32 * kernsrc.CeilDiv(dv, 32)), Args: args,
		Grid: [3]GridDim{{N: nh}, {N: 1, PerToken: true}, {N: 1}}})
	return nil
}
