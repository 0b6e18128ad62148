package gpu

import (
	"text/template"

	"github.com/minerva-llm/minerva/ir"
)

// Language is what one GPU language's source differs in. The lowering
// (emit.go and the files beside it) reads nothing else about the target.
type Language struct {
	// Name names the language in errors ("CUDA", "Metal"); Package is the
	// emitting package's last path element, for the banner and error
	// prefixes ("cuda").
	Name, Package string
	// Prelude follows the banner: types, conversions, reductions.
	Prelude string
	// Features are optional prelude parts by name, written after the
	// prelude when a kernel asks for them (Emitter.Use).
	Features map[string]string
	// F16 is the element type of an f16 operand or cache ("f16", "half").
	F16 string
	// Vec2 is the format of a float pair literal, two %s verbs.
	Vec2 string
	// Math maps C's float math function names (expf, tanhf, fminf, fmaxf)
	// to the language's; a name it lacks is written as C spells it.
	Math map[string]string
	// Decoders hold a decoder per weight dtype the language reads;
	// Helpers are the decoders' helper functions by name, HelperOrder the
	// order they appear in, and DQTemplate renders a decoder's function
	// from its Decoder.
	Decoders    map[ir.DType]Decoder
	Helpers     map[string]string
	HelperOrder []string
	DQTemplate  string
	// Templates render each kernel family from a *Params (Compile).
	Templates map[string]*template.Template
	// MatVec sets the block shape of a matrix-vector kernel (p.NW,
	// p.Threads) and anything else it alone decides (CUDA: the weight read
	// path and the activation stage); moe says the kernel is an expert
	// block's.
	MatVec func(p *Params, wdt ir.DType, moe bool)
	// Prefill appends the launches of a product of family (matvec, swiglu
	// or qkv_rope) whose matrix-vector launch is mv: mv alone, or mv for one
	// token and tiled kernels for prefill steps.
	Prefill func(e *Emitter, family string, p *Params, wdt ir.DType, rows GridDim, width int64, mv Launch) error
	// AttnDecodeWarps, when above 1, gives one-token steps an attn_split
	// kernel of their own with that many warps (simdgroups) per (head,
	// split); longer steps, and every step when it is 0 or 1, run
	// attn_split with one.
	AttnDecodeWarps int
}

// Decoder renders one weight dtype as a function dq_<Name>(row, u, w) that
// decodes unit u of a weight row into the thread array w: the kernels never
// materialise a dequantized row. A unit is one 32-element block of the
// legacy and K-quant types (a K-quant super-block holds eight, each with
// its own scale) and one element of the float types, so that the 32 lanes
// of a warp or simdgroup read consecutive elements of float rows and
// consecutive blocks of quantized ones. The formulas follow the quant
// package (ggml's dequantize_row_*), which ir/eval multiplies with.
type Decoder struct {
	Name    string   // suffix of dq_<name> and of kernel names
	Unit    int      // elements per unit
	Helpers []string // helpers the decoder calls (besides ld_f16)
	Body    string   // the function body; row, u and w are in scope
}

// WeightDTypes lists the weight dtypes the lowering knows, in the fixed
// order their decoders appear in a library.
func WeightDTypes() []ir.DType {
	return []ir.DType{ir.F32, ir.F16, ir.BF16, ir.Q4_0, ir.Q4_1, ir.Q5_0, ir.Q5_1, ir.Q8_0,
		ir.Q2_K, ir.Q3_K, ir.Q4_K, ir.Q5_K, ir.Q6_K, ir.MXFP4,
		ir.MLXQ4G32, ir.MLXQ4G64, ir.MLXQ4G128, ir.MLXQ8G32, ir.MLXQ8G64, ir.MLXQ8G128}
}

// WeightDTypes lists the weight dtypes l decodes, in library order.
func (l *Language) WeightDTypes() []ir.DType {
	var out []ir.DType
	for _, dt := range WeightDTypes() {
		if _, ok := l.Decoders[dt]; ok {
			out = append(out, dt)
		}
	}
	return out
}

func (l *Language) math(fn string) string {
	if s, ok := l.Math[fn]; ok {
		return s
	}
	return fn
}

// Compile parses kernel family templates with the functions every family
// may call (dotArgs).
func Compile(sets ...map[string]string) map[string]*template.Template {
	m := map[string]*template.Template{}
	for _, set := range sets {
		for name, src := range set {
			m[name] = template.Must(template.New(name).Funcs(funcs).Parse(src))
		}
	}
	return m
}

// DotCall passes a row expression and an accumulator name to a "dot"
// sub-template along with the kernel's params.
type DotCall struct {
	*Params
	Row, Acc string
	First    bool // the kernel's first dot (CUDA: where a late grid_dep_sync goes)
}

var funcs = template.FuncMap{
	"dotArgs": func(p *Params, row, acc string, first ...bool) DotCall {
		return DotCall{p, row, acc, len(first) > 0 && first[0]}
	},
}

// AffineUnit is the geometry of one 32-element unit of an MLX affine
// block (quant/mlx.go: one group of f32 scale, f32 bias, then the packed
// values, least significant bits first): unit u is part u % Per of block
// u / Per, blocks are BlockBytes apart, and a unit's values start at
// 8 + (u % Per)·UnitBytes.
type AffineUnit struct {
	Bits, Per, BlockBytes, UnitBytes int
}

// AddAffineDecoders adds a decoder for every MLX affine dtype to decoders,
// its body rendered by the language from the unit's geometry. Every
// decoder decodes scale·q + bias rounded once (an fma), as quant does, so
// the weights are bit for bit ir/eval's.
func AddAffineDecoders(decoders map[ir.DType]Decoder, body func(AffineUnit) string) {
	for _, dt := range WeightDTypes() {
		if bits, group, ok := dt.MLXAffineParams(); ok {
			g := AffineUnit{Bits: bits, Per: group / 32, BlockBytes: 8 + group*bits/8, UnitBytes: 32 * bits / 8}
			decoders[dt] = Decoder{Name: dt.String(), Unit: 32, Helpers: []string{"ld_u32"}, Body: body(g)}
		}
	}
}
