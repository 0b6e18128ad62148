package gpu

import (
	"fmt"

	"github.com/minerva-llm/minerva/codegen/internal/kernsrc"
	"github.com/minerva-llm/minerva/codegen/sched"
	"github.com/minerva-llm/minerva/ir"
)

// The gpt-oss blocks: router selection and the expert block.

// topkSoftmax: one warp (simdgroup) per row (kernel topk_softmax).
func (e *Emitter) topkSoftmax(v *ir.Value) error {
	n, err := kernsrc.LastConst(v.Type)
	if err != nil {
		return err
	}
	if n >= 1<<24 {
		return fmt.Errorf("%d experts: indices must stay below 2^24", n)
	}
	if v.Args[0].Type.DType != ir.F32 {
		return fmt.Errorf("router logits must be f32, got %s", v.Args[0].Type)
	}
	k := v.Attrs.Int("k", 0)
	if k <= 0 || k > n {
		return fmt.Errorf("k = %d is outside 1..%d", k, n)
	}
	p := &Params{Name: fmt.Sprintf("topk_softmax_%d_k%d", n, k), E: n, TopK: k}
	return e.rowKernel(v, "topk_softmax", p, []Arg{val(v.Args[0]), val(v)})
}

// moeWeights checks a [E, rows, cols] expert tensor and returns its
// decoder, the bytes of one row and of one expert.
func (e *Emitter) moeWeights(w *ir.Value) (Decoder, int64, int64, error) {
	r, ok := e.Lang.Decoders[w.Type.DType]
	if !ok {
		return r, 0, 0, fmt.Errorf("expert dtype %s has no %s decoder", w.Type.DType, e.Lang.Name)
	}
	s := w.Type.Shape
	if len(s) != 3 || !s[0].IsConst() || !s[1].IsConst() || !s[2].IsConst() {
		return r, 0, 0, fmt.Errorf("expert weights must be a constant [E, N, K] tensor, got %s", w.Type)
	}
	rb, err := w.Type.DType.RowBytes(s[2].N)
	if err != nil {
		return r, 0, 0, err
	}
	if s[2].N%int64(r.Unit) != 0 {
		return r, 0, 0, fmt.Errorf("expert row length %d is not a multiple of the %s unit %d", s[2].N, w.Type.DType, r.Unit)
	}
	e.dtypes[w.Type.DType] = true
	return r, rb, rb * s[1].N, nil
}

// moeActBody renders the gated activation of moe's act attribute as
// statements that set h from g and up (ir/eval's moeAct).
func (e *Emitter) moeActBody(a ir.Attrs) (string, error) {
	m := e.Lang.math
	switch act := a.Str("act", ""); act {
	case ir.MoEActSiLU:
		return fmt.Sprintf(`
        const float h = g / (1.0f + %s(-g)) * up;`, m("expf")), nil
	case ir.MoEActSwiGLUOAI:
		alpha, err := kernsrc.FloatLiteral(a.Float("alpha", 0))
		if err != nil {
			return "", err
		}
		limit, err := kernsrc.FloatLiteral(a.Float("limit", 0))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf(`
        // clamped SwiGLU: g' = min(g, limit), u' = clamp(u, -limit, limit), g'·σ(alpha·g')·(u' + 1)
        g = %[3]s(g, %[2]s);
        up = %[4]s(-%[2]s, %[3]s(up, %[2]s));
        const float h = g / (1.0f + %[5]s(-%[1]s * g)) * (up + 1.0f);`, alpha, limit, m("fminf"), m("fmaxf"), m("expf")), nil
	}
	return "", fmt.Errorf("moe act %q has no %s kernel", a.Str("act", ""), e.Lang.Name)
}

// moe lowers a mixture-of-experts block to two launches through the step's
// scratch: moe_up (gate and up products and the activation of each
// selected expert, grid (column blocks, slots, T)) and moe_down (the down
// products, weighted by the route and summed, grid (column blocks, T)). A
// block finds its expert from the route row, so only the selected experts'
// rows are read. The slots are k when the route is a topk_softmax's output
// (at most k non-zero weights per row), else E.
func (e *Emitter) moe(v *ir.Value) error {
	x, route, gate, up, down := v.Args[0], v.Args[1], v.Args[2], v.Args[3], v.Args[4]
	if gate.Type.DType != up.Type.DType {
		return fmt.Errorf("gate and up experts differ in dtype: %s, %s", gate.Type.DType, up.Type.DType)
	}
	ru, rbu, ebu, err := e.moeWeights(gate)
	if err != nil {
		return err
	}
	if _, _, _, err := e.moeWeights(up); err != nil {
		return err
	}
	rd, rbd, ebd, err := e.moeWeights(down)
	if err != nil {
		return err
	}
	gs := gate.Type.Shape
	E, F, D := gs[0].N, gs[1].N, gs[2].N
	if x.Type.DType != ir.F32 || route.Type.DType != ir.F32 {
		return fmt.Errorf("moe input and route must be f32, got %s and %s", x.Type, route.Type)
	}
	slots := E
	if route.Op == ir.OpTopKSoftmax {
		slots = min(E, route.Attrs.Int("k", E))
	}
	bias := len(v.Args) == 8
	biasT := "float"
	if bias {
		for i, b := range v.Args[5:] {
			t, err := e.operandType([]string{"gate bias", "up bias", "down bias"}[i], b)
			if err != nil {
				return err
			}
			if i > 0 && t != biasT {
				return fmt.Errorf("moe biases differ in dtype")
			}
			biasT = t
		}
	}
	actBody, err := e.moeActBody(v.Attrs)
	if err != nil {
		return err
	}
	act := v.Attrs.Str("act", "")
	bsuf := ""
	if bias {
		bsuf = "_bias"
		if biasT == e.Lang.F16 {
			bsuf += "f16"
		}
	}
	scratch := Arg{Value: sched.Scratch, ScratchPerToken: 4 * slots * F}

	pu := &Params{DT: ru.Name, Unit: int64(ru.Unit), NU: D / int64(ru.Unit), RowBytes: rbu, ExpBytes: ebu,
		K: D, F: F, E: E, Slots: slots, Bias: bias, BiasT: biasT, Act: act, ActBody: actBody}
	e.Lang.MatVec(pu, gate.Type.DType, true)
	args := []Arg{val(x), val(route), val(gate), val(up)}
	if bias {
		args = append(args, val(v.Args[5]), val(v.Args[6]))
	}
	args = append(args, scratch)
	pu.bind(args)
	if act == ir.MoEActSwiGLUOAI {
		act = "oai" // alpha and limit are baked in; Add renames a kernel whose constants differ
	}
	pu.Name = fmt.Sprintf("moe_up_%s%s_%s_e%dk%d_%dx%d", act, bsuf, ru.Name, E, slots, F, D)
	up1, err := e.Add("moe_up", gate.Type.DType.String(), pu)
	if err != nil {
		return err
	}
	e.Launch(Launch{Value: v.ID, Kernel: up1, Threads: pu.Threads, Args: args,
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(F, int64(pu.NW))}, {N: slots}, {N: 1, PerToken: true}}})

	pd := &Params{DT: rd.Name, Unit: int64(rd.Unit), NU: F / int64(rd.Unit), RowBytes: rbd, ExpBytes: ebd,
		K: F, D: D, E: E, Slots: slots, Bias: bias, BiasT: biasT}
	e.Lang.MatVec(pd, down.Type.DType, true)
	args = []Arg{scratch, val(route), val(down)}
	if bias {
		args = append(args, val(v.Args[7]))
	}
	args = append(args, val(v))
	pd.bind(args)
	pd.Name = fmt.Sprintf("moe_down%s_%s_e%dk%d_%dx%d", bsuf, rd.Name, E, slots, D, F)
	dn, err := e.Add("moe_down", down.Type.DType.String(), pd)
	if err != nil {
		return err
	}
	rows, err := RowsOf(v.Type)
	if err != nil {
		return err
	}
	e.Launch(Launch{Value: v.ID, Kernel: dn, Threads: pd.Threads, Args: args,
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(D, int64(pd.NW))}, rows, {N: 1}}})
	return nil
}
