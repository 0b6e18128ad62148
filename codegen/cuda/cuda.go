// Package cuda lowers a fused ir.Graph to CUDA C: one library (one source,
// compiled by NVRTC at run time) holding an extern "C" __global__ kernel per
// distinct (op kind, flags, dtype, shape) of the graph, with the shapes
// baked in as constants and the step sizes (T; cache positions through the
// pos buffer) as kernel arguments, plus the launch schedule of one step.
//
// It follows codegen/metal: the renderer is a table (templates.go: family →
// template; dtypes.go: weight dtype → in-register decoder). The source is
// self-contained — no cuda_fp16.h or other header: half conversions are
// one-instruction inline PTX and the warp reductions use __shfl_down_sync —
// so NVRTC needs no include path. Nothing here runs a kernel; the tests
// compile every emitted library to PTX with clang's CUDA mode against
// testdata/cudaprelude.h, and run the kernels on the CPU as C++ against
// testdata/cudaemu.h (which defines MINERVA_CUDA_EMU, the prelude's hook for
// C++ half conversions), comparing them with ir/eval.
package cuda

import (
	"bytes"
	"fmt"
	"github.com/minerva-llm/minerva/codegen/internal/kernsrc"
	"math"
	"strings"
	"text/template"

	"github.com/minerva-llm/minerva/ir"
)

// Library is the emitted CUDA C source of one graph and how to launch it.
type Library struct {
	Source   string   `json:"source"`
	Kernels  []Kernel `json:"kernels"`  // in source order
	Launches []Launch `json:"launches"` // in execution order
}

// Kernel describes one emitted kernel function.
type Kernel struct {
	Name   string `json:"name"`
	Family string `json:"family"`          // embed, matvec, swiglu, qkv_rope, attn_split, attn_merge, rmsnorm, softmax, eltwise
	DType  string `json:"dtype,omitempty"` // weight (or KV cache) dtype the kernel decodes
}

// GridDim is a block count along one grid axis: N, times the step's token
// count T when PerToken is set, or times ceil(T / Tile) when Tile > 1 as
// well (a block per tile of Tile tokens).
type GridDim struct {
	N        int64 `json:"n"`
	PerToken bool  `json:"per_token,omitempty"`
	Tile     int64 `json:"tile,omitempty"`
}

// Count binds T.
func (d GridDim) Count(T int) int64 {
	switch {
	case d.PerToken && d.Tile > 1:
		return d.N * kernsrc.CeilDiv(int64(T), d.Tile)
	case d.PerToken:
		return d.N * int64(T)
	}
	return d.N
}

// Arg is one pointer argument of a kernel: a graph value by ID (a weight, a
// weight-only value folded at load, an input, a state or an activation), or
// the step's split-KV scratch of ScratchPerToken bytes per token. The
// argument T (unsigned int, the step's tokens) follows the pointers and is
// not listed.
type Arg struct {
	Value           int   `json:"value"` // -1 for scratch
	ScratchPerToken int64 `json:"scratch_per_token,omitempty"`
}

// Launch is one kernel launch of the step: gridDim from Grid, blockDim.x =
// Threads (a multiple of 32), no dynamic shared memory. MinT and MaxT (0:
// no bound) limit it to steps of that many tokens: a matrix product may
// have a matrix-vector launch for decode (MaxT 1) and a tiled launch for
// prefill (MinT 2), and a step runs exactly one of them.
type Launch struct {
	Value   int        `json:"value"` // the graph value this launch (helps) compute
	Kernel  string     `json:"kernel"`
	Args    []Arg      `json:"args"`
	Grid    [3]GridDim `json:"grid"`
	Threads int        `json:"threads"`
	MinT    int        `json:"min_t,omitempty"`
	MaxT    int        `json:"max_t,omitempty"`
}

// Runs reports whether the launch belongs to a step of T tokens.
func (l Launch) Runs(T int) bool {
	return T >= l.MinT && (l.MaxT == 0 || T <= l.MaxT)
}

// Step returns the launches a step of T tokens runs, in order.
func (lib *Library) Step(T int) []Launch {
	var out []Launch
	for _, l := range lib.Launches {
		if l.Runs(T) {
			out = append(out, l)
		}
	}
	return out
}

// nwarps is the warps per block of the matrix-vector kernels: one output
// feature (or RoPE pair) per warp, four per block.
const nwarps = 4

// emitter collects kernels (deduplicated by name) while walking a graph.
type emitter struct {
	kernels  []Kernel
	sources  map[string]string // kernel name → its source
	order    []string
	dtypes   map[ir.DType]bool
	launches []Launch
}

// Emit lowers g, a graph after the pass pipeline, to one CUDA C library.
// Values computed from weights alone (merged or rescaled weights) get no
// kernel: the runtime folds them at load, as the CPU backend does.
func Emit(g *ir.Graph) (*Library, error) {
	if err := ir.Verify(g); err != nil {
		return nil, fmt.Errorf("cuda: invalid graph: %w", err)
	}
	e := &emitter{sources: map[string]string{}, dtypes: map[ir.DType]bool{}}
	consts := ir.ConstValues(g)
	for _, v := range g.Values {
		if v.Op.IsLeaf() || consts[v] || v.Op == ir.OpReshape {
			continue
		}
		if err := e.node(v); err != nil {
			return nil, fmt.Errorf("cuda: %v (%s): %w", v, v.Op, err)
		}
	}
	return e.library(), nil
}

func (e *emitter) library() *Library {
	var b strings.Builder
	b.WriteString("// Code generated by minervac (codegen/cuda). DO NOT EDIT.\n")
	b.WriteString(preludeSource)
	need := map[string]bool{}
	for _, dt := range WeightDTypes() {
		if e.dtypes[dt] {
			for _, h := range dtypeTable[dt].helpers {
				need[h] = true
			}
		}
	}
	for _, h := range helperOrder {
		if need[h] {
			b.WriteString(helperSource[h])
		}
	}
	for _, dt := range WeightDTypes() {
		if e.dtypes[dt] {
			r := dtypeTable[dt]
			b.WriteString(kernsrc.Render(dqTemplate, struct {
				Name, Body string
				Unit       int
			}{r.name, r.body, r.unit}))
		}
	}
	for _, n := range e.order {
		b.WriteString(e.sources[n])
	}
	return &Library{Source: b.String(), Kernels: e.kernels, Launches: e.launches}
}

// add registers a kernel rendered from family's template with p, reusing an
// identical kernel of the same name, and renaming one that differs (say, in
// a baked-in eps) rather than shadowing it. It returns the final name.
func (e *emitter) add(family, dtype string, p *params) (string, error) {
	base := p.Name
	for i := 2; ; i++ {
		src, err := renderFamily(family, p)
		if err != nil {
			return "", err
		}
		old, ok := e.sources[p.Name]
		if !ok {
			e.sources[p.Name] = src
			e.order = append(e.order, p.Name)
			e.kernels = append(e.kernels, Kernel{Name: p.Name, Family: family, DType: dtype})
			return p.Name, nil
		}
		if old == src {
			return p.Name, nil
		}
		p.Name = fmt.Sprintf("%s_v%d", base, i)
	}
}

// params are the fields the templates read. Every number is baked into the
// source; names ending in D/K/N are element counts.
type params struct {
	Name             string
	DT               string // decoder suffix
	Unit, NU         int64
	RowBytes         int64
	N, K, F, V, D    int64
	Norm, Gain, Bias bool
	Residual         bool
	Eps              string
	Extra            []slotName
	NW, Threads      int
	UpRow            string
	Vec              vecLoad // matrix-vector weight read path (vecload.go)

	// qkv_rope
	Half, HalfHD, HD, NRot int64
	QD, KVD, QKD, Pairs    int64
	Neox                   bool
	Mode, Freqs, MScale    string
	CacheT                 string

	// attention
	Splits, DV, Group, Window int64
	QW, KW, VW, H, PartW, OW  int64
	Scale                     string
	Sinks                     bool

	// eltwise
	Expr, BIndex string
	Binary       bool

	// element types ("float" or "f16", see the prelude) of small operands
	GainT, SinkT, BT string
}

// slotName is an optional operand of the matrix-vector kernels: its
// parameter name and element type.
type slotName struct {
	Name string
	T    string
}

// operandType is the CUDA element type a kernel reads a small float operand
// (gain, bias, sink, broadcast factor) as: f32 as float, f16 as its bits
// (f16, an unsigned short), converted by the overloaded ldf.
func operandType(what string, v *ir.Value) (string, error) {
	switch v.Type.DType {
	case ir.F32:
		return "float", nil
	case ir.F16:
		return "f16", nil
	}
	return "", fmt.Errorf("%s must be f32 or f16 for CUDA, got %s", what, v.Type)
}

// dotCall passes a row expression and an accumulator name to the "dot"
// sub-template along with the kernel's params.
type dotCall struct {
	*params
	Row, Acc string
}

var funcs = template.FuncMap{
	"dotArgs": func(p *params, row, acc string) dotCall { return dotCall{p, row, acc} },
}

var compiled = func() map[string]*template.Template {
	m := map[string]*template.Template{}
	for name, src := range familyTemplates {
		m[name] = template.Must(template.New(name).Funcs(funcs).Parse(src))
	}
	return m
}()

func renderFamily(family string, p *params) (string, error) {
	t, ok := compiled[family]
	if !ok {
		return "", fmt.Errorf("no template for kernel family %q", family)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, p); err != nil {
		return "", fmt.Errorf("rendering %s: %w", family, err)
	}
	return b.String(), nil
}

// rowsOf returns the rows of a [..., W] value as a grid dimension.
func rowsOf(t ir.Type) (GridDim, error) {
	n, perToken, err := kernsrc.Rows(t)
	return GridDim{N: n, PerToken: perToken}, err
}

func val(v *ir.Value) Arg { return Arg{Value: v.ID} }

func (e *emitter) node(v *ir.Value) error {
	switch v.Op {
	case ir.OpEmbed:
		return e.embed(v)
	case ir.OpMatMul, ir.OpFusedMatMul, ir.OpSwiGLU, ir.OpQKVRoPE:
		return e.matmul(v)
	case ir.OpAttention, ir.OpFlashAttention:
		return e.attention(v)
	case ir.OpRMSNorm:
		return e.rmsnorm(v)
	case ir.OpSoftmax:
		return e.softmax(v)
	case ir.OpAdd, ir.OpMul, ir.OpSiLU, ir.OpGELU:
		return e.eltwise(v)
	}
	return fmt.Errorf("no CUDA kernel for op %s yet", v.Op)
}

// weightRender checks that w is a [N, K] matrix of a dtype the emitter
// decodes and returns its decoder and row size.
func (e *emitter) weightRender(w *ir.Value) (dtypeRender, int64, int64, int64, error) {
	r, ok := dtypeTable[w.Type.DType]
	if !ok {
		return r, 0, 0, 0, fmt.Errorf("weight dtype %s has no CUDA decoder", w.Type.DType)
	}
	if len(w.Type.Shape) != 2 || !w.Type.Shape[0].IsConst() || !w.Type.Shape[1].IsConst() {
		return r, 0, 0, 0, fmt.Errorf("weight must be a constant [N, K] matrix, got %s", w.Type)
	}
	n, k := w.Type.Shape[0].N, w.Type.Shape[1].N
	rb, err := w.Type.DType.RowBytes(k)
	if err != nil {
		return r, 0, 0, 0, err
	}
	if k%int64(r.unit) != 0 {
		return r, 0, 0, 0, fmt.Errorf("row length %d is not a multiple of the %s unit %d", k, w.Type.DType, r.unit)
	}
	e.dtypes[w.Type.DType] = true
	return r, n, k, rb, nil
}

func (e *emitter) embed(v *ir.Value) error {
	table := v.Args[0]
	r, n, d, rb, err := e.weightRender(table)
	if err != nil {
		return err
	}
	p := &params{
		Name: fmt.Sprintf("embed_%s_%dx%d", r.name, n, d), DT: r.name,
		Unit: int64(r.unit), NU: d / int64(r.unit), RowBytes: rb, V: n, D: d, Threads: 32,
	}
	name, err := e.add("embed", table.Type.DType.String(), p)
	if err != nil {
		return err
	}
	rows, err := rowsOf(v.Type)
	if err != nil {
		return err
	}
	e.launches = append(e.launches, Launch{Value: v.ID, Kernel: name, Threads: 32,
		Args: []Arg{val(table), val(v.Args[1]), val(v)},
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(p.NU, 32)}, rows, {N: 1}}})
	return nil
}

func flags(p *params) string {
	var s string
	for _, f := range []struct {
		on   bool
		name string
	}{{p.Norm, "_norm"}, {p.Gain, "_gain"}, {p.Bias, "_bias"}, {p.Residual, "_res"}} {
		if f.on {
			s += f.name
		}
	}
	return s
}

// matmul covers the matmul family: matmul, fused_matmul, swiglu, qkv_rope,
// as matrix-vector kernels (one warp per output feature, each a row of the
// step), plus for prefill the tiled tensor-core kernels (tiled.go).
func (e *emitter) matmul(v *ir.Value) error {
	var parts ir.Parts
	if v.Op == ir.OpMatMul {
		parts = ir.Parts{X: v.Args[0], W: v.Args[1]}
		if len(v.Args) == 3 {
			parts.Bias = v.Args[2]
		}
	} else {
		var err error
		if parts, err = ir.MatMulParts(v); err != nil {
			return err
		}
	}
	r, n, k, rb, err := e.weightRender(parts.W)
	if err != nil {
		return err
	}
	p := &params{
		DT: r.name, Unit: int64(r.unit), NU: k / int64(r.unit), RowBytes: rb, N: n, K: k,
		Norm: parts.Norm, Gain: parts.Gain != nil, Bias: parts.Bias != nil, Residual: parts.Residual != nil,
		NW: nwarps, Threads: 32 * nwarps,
		Vec: planVecLoad(parts.W.Type.DType, int64(r.unit), k/int64(r.unit), rb),
	}
	if p.Norm {
		if p.Eps, err = kernsrc.FloatLiteral(parts.Eps); err != nil {
			return err
		}
	}
	args := []Arg{val(parts.X), val(parts.W)}
	if v.Op == ir.OpQKVRoPE {
		args = append(args, val(parts.Pos), val(parts.KCache), val(parts.VCache))
	}
	for _, x := range []struct {
		v    *ir.Value
		name string
	}{{parts.Gain, "gain"}, {parts.Bias, "bias"}, {parts.Residual, "res"}} {
		if x.v != nil {
			t, err := operandType(x.name, x.v)
			if err != nil {
				return err
			}
			if x.name == "res" && t != "float" {
				return fmt.Errorf("residual must be f32, got %s", x.v.Type)
			}
			p.Extra = append(p.Extra, slotName{x.name, t})
			args = append(args, val(x.v))
		}
	}
	args = append(args, val(v))
	rows, err := rowsOf(v.Type)
	if err != nil {
		return err
	}
	family, width := "matvec", n
	switch v.Op {
	case ir.OpSwiGLU:
		family, p.F = "swiglu", n/2
		width = p.F
		p.UpRow = fmt.Sprintf("j + %du", p.F)
	case ir.OpQKVRoPE:
		family = "qkv_rope"
		if width, err = e.qkvParams(v, p); err != nil {
			return err
		}
	}
	p.Name = fmt.Sprintf("%s%s_%s_%dx%d", v.Op, flags(p), r.name, n, k)
	for _, x := range p.Extra {
		if x.T == "f16" {
			p.Name += "_" + x.Name + "f16"
		}
	}
	if v.Op == ir.OpQKVRoPE {
		p.Name += "_" + p.CacheT
	}
	name, err := e.add(family, parts.W.Type.DType.String(), p)
	if err != nil {
		return err
	}
	mv := Launch{Value: v.ID, Kernel: name, Threads: p.Threads, Args: args,
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(width, nwarps)}, rows, {N: 1}}}
	return e.prefill(family, p, parts.W.Type.DType, rows, width, args, mv)
}

// qkvParams fills the RoPE and cache fields and returns the number of
// column pairs, one per warp.
func (e *emitter) qkvParams(v *ir.Value, p *params) (int64, error) {
	a := v.Attrs
	nh, nkv, hd, nrot := a.Int("n_head", 0), a.Int("n_kv_head", 0), a.Int("head_dim", 0), a.Int("n_rot", 0)
	if hd%2 != 0 {
		return 0, fmt.Errorf("head_dim %d is odd", hd)
	}
	kc, vc := v.Args[3], v.Args[4]
	if kc.Type.DType != vc.Type.DType {
		return 0, fmt.Errorf("K and V caches differ in dtype: %s, %s", kc.Type.DType, vc.Type.DType)
	}
	var err error
	if p.CacheT, err = cacheType(kc.Type.DType); err != nil {
		return 0, err
	}
	p.HD, p.NRot, p.Half, p.HalfHD = hd, nrot, nrot/2, hd/2
	p.QD, p.KVD = nh*hd, nkv*hd
	p.QKD = p.QD + p.KVD
	p.Pairs = (p.QD + 2*p.KVD) / 2
	p.Mode = a.Str("mode", "normal")
	p.Neox = p.Mode == "neox"
	if a.Float("ext_factor", 0) != 0 {
		return 0, fmt.Errorf("YaRN RoPE (ext_factor ≠ 0) has no CUDA kernel yet")
	}
	base, fs := a.Float("base", 10000), a.Float("freq_scale", 1)
	var fr []string
	for i := int64(0); i < nrot/2; i++ {
		f := fs * math.Pow(base, -2*float64(i)/float64(nrot))
		hi := float32(f)
		lo := float32(f - float64(hi))
		h, err1 := kernsrc.FloatLiteral(float64(hi))
		l, err2 := kernsrc.FloatLiteral(float64(lo))
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("rope frequency %d is not finite (base %v, freq_scale %v)", i, base, fs)
		}
		fr = append(fr, fmt.Sprintf("{%s, %s}", h, l))
	}
	p.Freqs = strings.Join(fr, ", ")
	if ms := a.Float("attn_factor", 1); ms != 1 {
		s, err := kernsrc.FloatLiteral(ms)
		if err != nil {
			return 0, err
		}
		p.MScale = " * " + s
	}
	return p.Pairs, nil
}

// cacheType is the element type of a KV cache: float, or f16 (the bits of
// an IEEE half, converted by ldf and sth).
func cacheType(dt ir.DType) (string, error) {
	switch dt {
	case ir.F32:
		return "float", nil
	case ir.F16:
		return "f16", nil
	}
	return "", fmt.Errorf("KV cache dtype %s has no CUDA kernel (f32 or f16)", dt)
}

// attention lowers attention and flash_attention to a split pass and a
// merge pass through the step's scratch buffer (kv_splits partials per
// query and head); plain attention is one split.
func (e *emitter) attention(v *ir.Value) error {
	a := v.Attrs
	q, k, vv := v.Args[0], v.Args[1], v.Args[2]
	nh, nkv, hd := a.Int("n_head", 0), a.Int("n_kv_head", 0), a.Int("head_dim", 0)
	splits := a.Int("kv_splits", 1)
	if k.Type.DType != vv.Type.DType {
		return fmt.Errorf("K and V differ in dtype: %s, %s", k.Type.DType, vv.Type.DType)
	}
	ct, err := cacheType(k.Type.DType)
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
	p := &params{
		CacheT: ct, H: nh, HD: hd, DV: dv, Group: nh / nkv, Splits: splits, Window: a.Int("window", 0),
		QW: nh * hd, KW: kw, VW: vw, OW: nh * dv, PartW: dv + 2, Scale: scale, Sinks: len(v.Args) == 5,
	}
	p.Name = fmt.Sprintf("attn_split_%s_h%dkv%dd%dv%d_s%d", ct, nh, nkv, hd, dv, splits)
	if p.Window > 0 {
		p.Name += fmt.Sprintf("_w%d", p.Window)
	}
	split, err := e.add("attn_split", k.Type.DType.String(), p)
	if err != nil {
		return err
	}
	scratch := Arg{Value: -1, ScratchPerToken: 4 * nh * splits * p.PartW}
	e.launches = append(e.launches, Launch{Value: v.ID, Kernel: split, Threads: 32,
		Args: []Arg{val(q), val(k), val(vv), val(v.Args[3]), scratch},
		Grid: [3]GridDim{{N: nh}, {N: splits}, {N: 1, PerToken: true}}})

	m := &params{H: nh, DV: dv, Splits: splits, PartW: dv + 2, OW: nh * dv, Sinks: p.Sinks}
	args := []Arg{scratch}
	if m.Sinks {
		if m.SinkT, err = operandType("sinks", v.Args[4]); err != nil {
			return err
		}
		args = append(args, val(v.Args[4]))
	}
	args = append(args, val(v))
	m.Name = fmt.Sprintf("attn_merge_h%dv%d_s%d", nh, dv, splits)
	if m.Sinks {
		m.Name += "_sinks"
		if m.SinkT == "f16" {
			m.Name += "_f16"
		}
	}
	merge, err := e.add("attn_merge", "", m)
	if err != nil {
		return err
	}
	e.launches = append(e.launches, Launch{Value: v.ID, Kernel: merge, Threads: int(32 * kernsrc.CeilDiv(dv, 32)), Args: args,
		Grid: [3]GridDim{{N: nh}, {N: 1, PerToken: true}, {N: 1}}})
	return nil
}

func (e *emitter) rmsnorm(v *ir.Value) error {
	k, err := kernsrc.LastConst(v.Type)
	if err != nil {
		return err
	}
	p := &params{K: k, Gain: len(v.Args) == 2}
	if p.Eps, err = kernsrc.FloatLiteral(v.Attrs.Float("eps", 0)); err != nil {
		return err
	}
	args := []Arg{val(v.Args[0])}
	p.GainT = "float"
	if p.Gain {
		if p.GainT, err = operandType("gain", v.Args[1]); err != nil {
			return err
		}
		args = append(args, val(v.Args[1]))
	}
	p.Name = fmt.Sprintf("rmsnorm%s_%d", map[bool]string{true: "_gain"}[p.Gain], k)
	if p.GainT == "f16" {
		p.Name += "_f16"
	}
	return e.rowKernel(v, "rmsnorm", p, append(args, val(v)))
}

func (e *emitter) softmax(v *ir.Value) error {
	k, err := kernsrc.LastConst(v.Type)
	if err != nil {
		return err
	}
	p := &params{Name: fmt.Sprintf("softmax_%d", k), K: k}
	return e.rowKernel(v, "softmax", p, []Arg{val(v.Args[0]), val(v)})
}

// rowKernel adds a one-warp-per-row kernel and its launch.
func (e *emitter) rowKernel(v *ir.Value, family string, p *params, args []Arg) error {
	rows, err := rowsOf(v.Type)
	if err != nil {
		return err
	}
	name, err := e.add(family, "", p)
	if err != nil {
		return err
	}
	e.launches = append(e.launches, Launch{Value: v.ID, Kernel: name, Threads: 32, Args: args,
		Grid: [3]GridDim{{N: 1}, rows, {N: 1}}})
	return nil
}

// eltwise: add and mul broadcast b over a's leading dims (b is a's trailing
// shape); silu and gelu are unary.
func (e *emitter) eltwise(v *ir.Value) error {
	k, err := kernsrc.LastConst(v.Type)
	if err != nil {
		return err
	}
	p := &params{K: k, Threads: 32}
	args := []Arg{val(v.Args[0])}
	switch v.Op {
	case ir.OpAdd, ir.OpMul:
		b := v.Args[1]
		if p.BT, err = operandType("right operand", b); err != nil {
			return err
		}
		p.Binary = true
		args = append(args, val(b))
		op := map[ir.Op]string{ir.OpAdd: "+", ir.OpMul: "*"}[v.Op]
		p.Expr = "x " + op + " y"
		switch {
		case b.Type.Shape.Equal(v.Args[0].Type.Shape):
			p.BIndex = "at"
			p.Name = fmt.Sprintf("%s_%d", v.Op, k)
		default:
			bn := int64(1)
			for _, d := range b.Type.Shape {
				if !d.IsConst() {
					return fmt.Errorf("broadcast operand %s has a symbolic dimension", b.Type)
				}
				bn *= d.N
			}
			p.BIndex = fmt.Sprintf("at %% %du", bn)
			p.Name = fmt.Sprintf("%s_%d_b%d", v.Op, k, bn)
		}
	case ir.OpSiLU:
		p.Expr, p.Name = "x / (1.0f + expf(-x))", fmt.Sprintf("silu_%d", k)
	case ir.OpGELU:
		p.Expr = "0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)))"
		p.Name = fmt.Sprintf("gelu_%d", k)
	}
	if p.BT == "f16" {
		p.Name += "_f16"
	}
	rows, err := rowsOf(v.Type)
	if err != nil {
		return err
	}
	name, err := e.add("eltwise", "", p)
	if err != nil {
		return err
	}
	e.launches = append(e.launches, Launch{Value: v.ID, Kernel: name, Threads: 32, Args: append(args, val(v)),
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(k, 32)}, rows, {N: 1}}})
	return nil
}
