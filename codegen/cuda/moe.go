package cuda

import (
	"fmt"

	"github.com/minerva-llm/minerva/codegen/internal/kernsrc"
	"github.com/minerva-llm/minerva/ir"
)

// The gpt-oss kernels (router selection and the expert block, as
// codegen/metal has them) and the greedy argmax over the logits.

// topkSoftmax: one warp per row (kernel topk_softmax).
func (e *emitter) topkSoftmax(v *ir.Value) error {
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
	p := &params{Name: fmt.Sprintf("topk_softmax_%d_k%d", n, k), E: n, TopK: k}
	return e.rowKernel(v, "topk_softmax", p, []Arg{val(v.Args[0]), val(v)})
}

// moeWeights checks a [E, rows, cols] expert tensor and returns its
// decoder, the bytes of one row and of one expert.
func (e *emitter) moeWeights(w *ir.Value) (dtypeRender, int64, int64, error) {
	r, ok := dtypeTable[w.Type.DType]
	if !ok {
		return r, 0, 0, fmt.Errorf("expert dtype %s has no CUDA decoder", w.Type.DType)
	}
	s := w.Type.Shape
	if len(s) != 3 || !s[0].IsConst() || !s[1].IsConst() || !s[2].IsConst() {
		return r, 0, 0, fmt.Errorf("expert weights must be a constant [E, N, K] tensor, got %s", w.Type)
	}
	rb, err := w.Type.DType.RowBytes(s[2].N)
	if err != nil {
		return r, 0, 0, err
	}
	if s[2].N%int64(r.unit) != 0 {
		return r, 0, 0, fmt.Errorf("expert row length %d is not a multiple of the %s unit %d", s[2].N, w.Type.DType, r.unit)
	}
	e.dtypes[w.Type.DType] = true
	return r, rb, rb * s[1].N, nil
}

// moeActBody renders the gated activation of moe's act attribute as CUDA C
// statements that set h from g and up (ir/eval's moeAct).
func moeActBody(a ir.Attrs) (string, error) {
	switch act := a.Str("act", ""); act {
	case ir.MoEActSiLU:
		return `
        const float h = g / (1.0f + expf(-g)) * up;`, nil
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
        g = fminf(g, %[2]s);
        up = fmaxf(-%[2]s, fminf(up, %[2]s));
        const float h = g / (1.0f + expf(-%[1]s * g)) * (up + 1.0f);`, alpha, limit), nil
	}
	return "", fmt.Errorf("moe act %q has no CUDA kernel", a.Str("act", ""))
}

// moe lowers a mixture-of-experts block to two launches through the step's
// scratch: moe_up (gate and up products and the activation of each
// selected expert, grid (column blocks, slots, T)) and moe_down (the down
// products, weighted by the route and summed, grid (column blocks, T)). A
// block finds its expert from the route row, so only the selected experts'
// rows are read. The slots are k when the route is a topk_softmax's output
// (at most k non-zero weights per row), else E.
func (e *emitter) moe(v *ir.Value) error {
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
			t, err := operandType([]string{"gate bias", "up bias", "down bias"}[i], b)
			if err != nil {
				return err
			}
			if i > 0 && t != biasT {
				return fmt.Errorf("moe biases differ in dtype")
			}
			biasT = t
		}
	}
	actBody, err := moeActBody(v.Attrs)
	if err != nil {
		return err
	}
	act := v.Attrs.Str("act", "")
	bsuf := ""
	if bias {
		bsuf = "_bias"
		if biasT == "f16" {
			bsuf += "f16"
		}
	}
	scratch := Arg{Value: -1, ScratchPerToken: 4 * slots * F}

	pu := &params{DT: ru.name, Unit: int64(ru.unit), NU: D / int64(ru.unit), RowBytes: rbu, ExpBytes: ebu,
		K: D, F: F, E: E, Slots: slots, Bias: bias, BiasT: biasT, Act: act, ActBody: actBody,
		NW: nwarps, Threads: 32 * nwarps}
	pu.XS = planXStage(pu)
	args := []Arg{val(x), val(route), val(gate), val(up)}
	if bias {
		args = append(args, val(v.Args[5]), val(v.Args[6]))
	}
	if act == ir.MoEActSwiGLUOAI {
		act = "oai" // alpha and limit are baked in; add renames a kernel whose constants differ
	}
	pu.Name = fmt.Sprintf("moe_up_%s%s_%s_e%dk%d_%dx%d", act, bsuf, ru.name, E, slots, F, D)
	up1, err := e.add("moe_up", gate.Type.DType.String(), pu)
	if err != nil {
		return err
	}
	e.launches = append(e.launches, Launch{Value: v.ID, Kernel: up1, Threads: pu.Threads,
		Args: append(args, scratch),
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(F, nwarps)}, {N: slots}, {N: 1, PerToken: true}}})

	pd := &params{DT: rd.name, Unit: int64(rd.unit), NU: F / int64(rd.unit), RowBytes: rbd, ExpBytes: ebd,
		K: F, D: D, E: E, Slots: slots, Bias: bias, BiasT: biasT, NW: nwarps, Threads: 32 * nwarps}
	pd.XS = planXStage(pd)
	args = []Arg{scratch, val(route), val(down)}
	if bias {
		args = append(args, val(v.Args[7]))
	}
	pd.Name = fmt.Sprintf("moe_down%s_%s_e%dk%d_%dx%d", bsuf, rd.name, E, slots, D, F)
	dn, err := e.add("moe_down", down.Type.DType.String(), pd)
	if err != nil {
		return err
	}
	rows, err := rowsOf(v.Type)
	if err != nil {
		return err
	}
	e.launches = append(e.launches, Launch{Value: v.ID, Kernel: dn, Threads: pd.Threads,
		Args: append(args, val(v)),
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(D, nwarps)}, rows, {N: 1}}})
	return nil
}

// Argmax is the greedy-sampling kernel of a library with a logits output:
// extern "C" __global__ void Kernel(const float* logits, int* out, const
// u32 T), grid (1, T, 1), blockDim.x = Threads, writing into out[t] the
// smallest index of the largest value of logits row t (NaN never wins; a
// row of NaNs gives 0). It is not in Launches: the runtime launches it
// after a step when it needs the greedy token alone, and then copies T ints
// back instead of T·V floats.
type Argmax struct {
	Value   int    `json:"value"` // the logits value
	Kernel  string `json:"kernel"`
	Threads int    `json:"threads"`
}

// argmaxThreads is the block size of the argmax kernel: 1024 threads for a
// vocabulary of at least 8192 (each thread then scans V/1024 values, with
// as many loads in flight), 256 below.
func argmaxThreads(V int64) int {
	if V >= 8192 {
		return 1024
	}
	return 256
}

// argmax emits the argmax kernel of g's logits output, if there is one.
func (e *emitter) argmax(g *ir.Graph) (*Argmax, error) {
	lg := g.Output("logits")
	if lg == nil {
		return nil, nil
	}
	s := lg.Type.Shape
	if lg.Type.DType != ir.F32 || len(s) != 2 || s[0] != ir.Sym("T") || !s[1].IsConst() || s[1].N <= 0 {
		return nil, fmt.Errorf("logits output must be f32[T, V] for the argmax kernel, got %s", lg.Type)
	}
	V := s[1].N
	if V > 1<<31-1 {
		return nil, fmt.Errorf("vocabulary of %d does not fit the argmax kernel's int result", V)
	}
	threads := argmaxThreads(V)
	p := &params{Name: fmt.Sprintf("argmax_%d", V), V: V, Threads: threads, NW: threads / 32}
	name, err := e.add("argmax", "", p)
	if err != nil {
		return nil, err
	}
	return &Argmax{Value: lg.ID, Kernel: name, Threads: threads}, nil
}
