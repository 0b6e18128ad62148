// Package metal lowers a fused ir.Graph to Metal Shading Language: one
// library (one MSL source) holding a kernel per distinct (op kind, flags,
// dtype, shape) of the graph, with the shapes baked in as constants and the
// step sizes (T; cache positions through the pos buffer) as arguments, plus
// the launch schedule that runs one step.
//
// The renderer is a table (templates.go: family → template; dtypes.go:
// weight dtype → in-register decoder) in tinygrad's style. Nothing here
// runs a kernel: runtime/metal does that on Apple hardware, and the tests
// type-check every emitted source with clang against testdata/mslshim.h and
// execute the kernels on the CPU through the same header (one std::thread
// per Metal thread, real barriers) against ir/eval.
package metal

import (
	"bytes"
	"fmt"
	"github.com/minerva-llm/minerva/codegen/internal/kernsrc"
	"strings"
	"text/template"

	"github.com/minerva-llm/minerva/ir"
)

// Library is the emitted MSL source of one graph and how to launch it.
type Library struct {
	Source   string   `json:"source"`
	Kernels  []Kernel `json:"kernels"`  // in source order
	Launches []Launch `json:"launches"` // in execution order
}

// Kernel describes one emitted kernel function.
type Kernel struct {
	Name   string `json:"name"`
	Family string `json:"family"`          // embed, matvec, matmul_tiled, swiglu, swiglu_tiled, qkv_rope, attn_split, attn_merge, rmsnorm, softmax, eltwise, topk_softmax, moe_up, moe_down
	DType  string `json:"dtype,omitempty"` // weight (or KV cache) dtype the kernel decodes
}

// GridDim is a threadgroup count along one grid axis: N, times the step's
// token count T when PerToken is set, or times ceil(T / Tile) when Tile > 1
// as well (a threadgroup per tile of Tile tokens).
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

// Arg is one buffer bound to a kernel: a graph value by ID (a weight, a
// weight-only value folded at load, an input, a state or an activation),
// or the step's split-KV scratch of ScratchPerToken bytes per token. The
// constant T follows the buffers and is not listed.
type Arg struct {
	Value           int   `json:"value"` // -1 for scratch
	ScratchPerToken int64 `json:"scratch_per_token,omitempty"`
}

// Launch is one kernel dispatch of the step. MinT and MaxT (0: no bound)
// limit it to steps of that many tokens: a matrix product has a
// matrix-vector launch for T = 1 (MaxT 1) and a tiled matrix-matrix launch
// for prefill (MinT 2), and a step runs exactly one of them.
type Launch struct {
	Value   int        `json:"value"` // the graph value this dispatch (helps) compute
	Kernel  string     `json:"kernel"`
	Args    []Arg      `json:"args"`
	Grid    [3]GridDim `json:"grid"`
	Threads int        `json:"threads"` // per threadgroup, a multiple of 32
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

// nsg is the simdgroups per threadgroup of the matrix-vector kernels: four
// rows per threadgroup keeps 128 threads in flight per group, the size
// llama.cpp's Metal mat-vec kernels use too.
const nsg = 4

// The tiled matrix-matrix kernels (prefill): a threadgroup of nsg
// simdgroups computes a tileN-feature × tileT-token output tile, simdgroup s
// owning features 8s..8s+7 as tileT/8 simdgroup_float8x8 accumulators, over
// K in chunks of tileK (one quantized block per weight row).
const (
	tileN = 8 * nsg
	tileT = 32
	tileK = 32
)

// emitter collects kernels (deduplicated by name) while walking a graph.
type emitter struct {
	kernels  []Kernel
	sources  map[string]string // kernel name → its source
	order    []string
	dtypes   map[ir.DType]bool
	launches []Launch
	matrix   bool // a kernel uses simdgroup_matrix
}

// Emit lowers g, a graph after the pass pipeline, to one MSL library.
// Values computed from weights alone (merged or rescaled weights) get no
// kernel: the runtime folds them at load, as the CPU backend does.
func Emit(g *ir.Graph) (*Library, error) {
	if err := ir.Verify(g); err != nil {
		return nil, fmt.Errorf("metal: invalid graph: %w", err)
	}
	e := &emitter{sources: map[string]string{}, dtypes: map[ir.DType]bool{}}
	consts := ir.ConstValues(g)
	for _, v := range g.Values {
		if v.Op.IsLeaf() || consts[v] || v.Op == ir.OpReshape {
			continue
		}
		if err := e.node(v); err != nil {
			return nil, fmt.Errorf("metal: %v (%s): %w", v, v.Op, err)
		}
	}
	return e.library(), nil
}

func (e *emitter) library() *Library {
	var b strings.Builder
	b.WriteString("// Code generated by minervac (codegen/metal). DO NOT EDIT.\n")
	b.WriteString(preludeSource)
	if e.matrix {
		b.WriteString("#include <metal_simdgroup_matrix>\n")
	}
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
	OutSlot, TSlot   int
	NSG, Threads     int
	UpRow            string
	TileN, TileT     int64 // tiled kernels: tile sizes, K chunk, weight units per chunk
	TileK, UPC       int64

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

	// topk_softmax, moe_up, moe_down
	E, TopK, Slots, ExpBytes int64
	Act, ActBody             string

	// element types ("float" or "half") of small weight operands
	GainT, SinkT, BT, BiasT string
}

// slotName is an optional operand of the matrix-vector kernels: its
// parameter name, buffer slot and element type (float or half).
type slotName struct {
	Name string
	Slot int
	T    string
}

// operandType is the MSL element type a kernel reads a small float operand
// (gain, bias, sink, broadcast factor) as: f32 and f16 are read as stored,
// so f16 operands need no conversion at load.
func operandType(what string, v *ir.Value) (string, error) {
	switch v.Type.DType {
	case ir.F32:
		return "float", nil
	case ir.F16:
		return "half", nil
	}
	return "", fmt.Errorf("%s must be f32 or f16 for Metal, got %s", what, v.Type)
}

// dotArgs passes a row expression and an accumulator name to the "dot"
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
	case ir.OpTopKSoftmax:
		return e.topkSoftmax(v)
	case ir.OpMoE:
		return e.moe(v)
	}
	return fmt.Errorf("no Metal kernel for op %s yet", v.Op)
}

// weightRender checks that w is a [N, K] matrix of a dtype the emitter
// decodes and returns its decoder and row size.
func (e *emitter) weightRender(w *ir.Value) (dtypeRender, int64, int64, int64, error) {
	r, ok := dtypeTable[w.Type.DType]
	if !ok {
		return r, 0, 0, 0, fmt.Errorf("weight dtype %s has no Metal decoder", w.Type.DType)
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
		Unit: int64(r.unit), NU: d / int64(r.unit), RowBytes: rb, V: n, D: d, Threads: 32, TSlot: 3,
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

// matmul covers the matmul family: matmul, fused_matmul, swiglu, qkv_rope.
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
		NSG: nsg, Threads: 32 * nsg,
	}
	if p.Norm {
		if p.Eps, err = kernsrc.FloatLiteral(parts.Eps); err != nil {
			return err
		}
	}
	fixed := []Arg{val(parts.X), val(parts.W)}
	if v.Op == ir.OpQKVRoPE {
		fixed = append(fixed, val(parts.Pos), val(parts.KCache), val(parts.VCache))
	}
	args := fixed
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
			p.Extra = append(p.Extra, slotName{x.name, len(args), t})
			args = append(args, val(x.v))
		}
	}
	p.OutSlot, p.TSlot = len(args), len(args)+1
	args = append(args, val(v))
	rows, err := rowsOf(v.Type)
	if err != nil {
		return err
	}
	family, width := "matvec", n
	kind := string(v.Op)
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
	p.Name = fmt.Sprintf("%s%s_%s_%dx%d", kind, flags(p), r.name, n, k)
	for _, x := range p.Extra {
		if x.T == "half" {
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
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(width, nsg)}, rows, {N: 1}}}
	// Prefill: a [T, N] product of more than one token runs the tiled
	// matrix-matrix kernel instead, which reads each weight tile once per
	// tileT tokens rather than once per token.
	tiled := map[string]string{"matvec": "matmul_tiled", "swiglu": "swiglu_tiled"}[family]
	if tiled == "" || !rows.PerToken || rows.N != 1 || tileK%p.Unit != 0 {
		e.launches = append(e.launches, mv)
		return nil
	}
	mv.MaxT = 1
	e.launches = append(e.launches, mv)
	tp := *p
	tp.TileN, tp.TileT, tp.TileK, tp.UPC = tileN, tileT, tileK, tileK/p.Unit
	tp.Name = p.Name + "_mm"
	tname, err := e.add(tiled, parts.W.Type.DType.String(), &tp)
	if err != nil {
		return err
	}
	e.matrix = true
	e.launches = append(e.launches, Launch{Value: v.ID, Kernel: tname, Threads: p.Threads, Args: args, MinT: 2,
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(width, tileN)}, {N: 1, PerToken: true, Tile: tileT}, {N: 1}}})
	return nil
}

// qkvParams fills the RoPE and cache fields and returns the number of
// column pairs, one per simdgroup.
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
	// The frequencies (YaRN's blend included) and the magnitude scale are
	// shared with codegen/cuda.
	freqs, mscale, err := kernsrc.RopeFreqs(a)
	if err != nil {
		return 0, err
	}
	var fr []string
	for _, f := range freqs {
		fr = append(fr, fmt.Sprintf("float2(%s, %s)", f[0], f[1]))
	}
	p.Freqs = strings.Join(fr, ", ")
	if mscale != 1 {
		s, err := kernsrc.FloatLiteral(mscale)
		if err != nil {
			return 0, err
		}
		p.MScale = " * " + s
	}
	return p.Pairs, nil
}

func cacheType(dt ir.DType) (string, error) {
	switch dt {
	case ir.F32:
		return "float", nil
	case ir.F16:
		return "half", nil
	}
	return "", fmt.Errorf("KV cache dtype %s has no Metal kernel (f32 or f16)", dt)
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
		QW: nh * hd, KW: kw, VW: vw, OW: nh * dv, PartW: dv + 2, Scale: scale, Sinks: len(v.Args) == 5, TSlot: 5,
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

	m := &params{H: nh, DV: dv, Splits: splits, PartW: dv + 2, OW: nh * dv, Sinks: p.Sinks, OutSlot: 1}
	args := []Arg{scratch}
	if m.Sinks {
		if m.SinkT, err = operandType("sinks", v.Args[4]); err != nil {
			return err
		}
		m.OutSlot = 2
		args = append(args, val(v.Args[4]))
	}
	m.TSlot = m.OutSlot + 1
	args = append(args, val(v))
	m.Name = fmt.Sprintf("attn_merge_h%dv%d_s%d", nh, dv, splits)
	if m.Sinks {
		m.Name += "_sinks"
		if m.SinkT == "half" {
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
	p := &params{K: k, Gain: len(v.Args) == 2, OutSlot: 1}
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
		p.OutSlot = 2
	}
	p.TSlot = p.OutSlot + 1
	p.Name = fmt.Sprintf("rmsnorm%s_%d", map[bool]string{true: "_gain"}[p.Gain], k)
	if p.GainT == "half" {
		p.Name += "_f16"
	}
	return e.rowKernel(v, "rmsnorm", p, append(args, val(v)))
}

func (e *emitter) softmax(v *ir.Value) error {
	k, err := kernsrc.LastConst(v.Type)
	if err != nil {
		return err
	}
	p := &params{Name: fmt.Sprintf("softmax_%d", k), K: k, OutSlot: 1, TSlot: 2}
	return e.rowKernel(v, "softmax", p, []Arg{val(v.Args[0]), val(v)})
}

// rowKernel adds a one-simdgroup-per-row kernel and its launch.
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
	p := &params{K: k, Threads: 32, OutSlot: 1, TSlot: 2}
	args := []Arg{val(v.Args[0])}
	switch v.Op {
	case ir.OpAdd, ir.OpMul:
		b := v.Args[1]
		if p.BT, err = operandType("right operand", b); err != nil {
			return err
		}
		p.Binary, p.OutSlot, p.TSlot = true, 2, 3
		args = append(args, val(b))
		op := map[ir.Op]string{ir.OpAdd: "+", ir.OpMul: "*"}[v.Op]
		p.Expr = "x " + op + " y"
		// b is a's trailing shape: the whole of a (index at), one row (i),
		// or several rows, which cycle.
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
		p.Expr, p.Name = "x / (1.0f + exp(-x))", fmt.Sprintf("silu_%d", k)
	case ir.OpGELU:
		p.Expr = "0.5f * x * (1.0f + tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)))"
		p.Name = fmt.Sprintf("gelu_%d", k)
	}
	if p.BT == "half" {
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

// topkSoftmax: one simdgroup per row (kernel topk_softmax).
func (e *emitter) topkSoftmax(v *ir.Value) error {
	n, err := kernsrc.LastConst(v.Type)
	if err != nil {
		return err
	}
	if n >= 1<<24 {
		return fmt.Errorf("%d experts: indices must stay below 2^24", n)
	}
	k := v.Attrs.Int("k", 0)
	if k <= 0 || k > n {
		return fmt.Errorf("k = %d is outside 1..%d", k, n)
	}
	p := &params{Name: fmt.Sprintf("topk_softmax_%d_k%d", n, k), E: n, TopK: k, OutSlot: 1, TSlot: 2}
	return e.rowKernel(v, "topk_softmax", p, []Arg{val(v.Args[0]), val(v)})
}

// moeWeights checks a [E, rows, cols] expert tensor and returns its
// decoder, the bytes of one row and of one expert.
func (e *emitter) moeWeights(w *ir.Value) (dtypeRender, int64, int64, error) {
	r, ok := dtypeTable[w.Type.DType]
	if !ok {
		return r, 0, 0, fmt.Errorf("expert dtype %s has no Metal decoder", w.Type.DType)
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

// moeActBody renders the gated activation of moe's act attribute as MSL
// statements that set h from g and up (ir/eval's moeAct).
func moeActBody(a ir.Attrs) (string, error) {
	switch act := a.Str("act", ""); act {
	case ir.MoEActSiLU:
		return `
        const float h = g / (1.0f + exp(-g)) * up;`, nil
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
        g = min(g, %[2]s);
        up = max(-%[2]s, min(up, %[2]s));
        const float h = g / (1.0f + exp(-%[1]s * g)) * (up + 1.0f);`, alpha, limit), nil
	}
	return "", fmt.Errorf("moe act %q has no Metal kernel", a.Str("act", ""))
}

// moe lowers a mixture-of-experts block to two dispatches through the
// step's scratch: moe_up (gate and up products and the activation of each
// selected expert, grid (column blocks, slots, T)) and moe_down (the down
// products, weighted by the route and summed, grid (column blocks, T)). A
// threadgroup finds its expert from the route row, so only the selected
// experts' rows are read. The slots are k when the route is a
// topk_softmax's output (at most k non-zero weights per row), else E.
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
		if biasT == "half" {
			bsuf += "f16"
		}
	}
	scratch := Arg{Value: -1, ScratchPerToken: 4 * slots * F}

	pu := &params{DT: ru.name, Unit: int64(ru.unit), NU: D / int64(ru.unit), RowBytes: rbu, ExpBytes: ebu,
		K: D, F: F, E: E, Slots: slots, Bias: bias, BiasT: biasT, Act: act, ActBody: actBody,
		NSG: nsg, Threads: 32 * nsg, OutSlot: 4}
	args := []Arg{val(x), val(route), val(gate), val(up)}
	if bias {
		pu.OutSlot = 6
		args = append(args, val(v.Args[5]), val(v.Args[6]))
	}
	pu.TSlot = pu.OutSlot + 1
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
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(F, nsg)}, {N: slots}, {N: 1, PerToken: true}}})

	pd := &params{DT: rd.name, Unit: int64(rd.unit), NU: F / int64(rd.unit), RowBytes: rbd, ExpBytes: ebd,
		K: F, D: D, E: E, Slots: slots, Bias: bias, BiasT: biasT, NSG: nsg, Threads: 32 * nsg, OutSlot: 3}
	args = []Arg{scratch, val(route), val(down)}
	if bias {
		pd.OutSlot = 4
		args = append(args, val(v.Args[7]))
	}
	pd.TSlot = pd.OutSlot + 1
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
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(D, nsg)}, rows, {N: 1}}})
	return nil
}
