package cuda

import (
	"bytes"
	"fmt"
	"text/template"

	"github.com/minerva-llm/minerva/codegen/internal/kernsrc"
	"github.com/minerva-llm/minerva/ir"
)

// tiledParams are the fields the tiled templates (templates_tiled.go) read:
// the matrix-vector kernel's params plus the tiling.
type tiledParams struct {
	*params
	TileT, TileN, TileK int64
	Stride, Half        int64 // shared row stride and words per chunk row, in f16x2 words
	Mats                int64 // weight matrices per tile: 1, or 2 for swiglu (gate and up rows)
	Width               int64 // output features: N, or F for swiglu
	SplitW              bool  // weights as f16 hi + lo (a third mma per tile)
}

// mmaCall passes one accumulator tile (weight tile prefix M: "w" or "u",
// accumulator Acc) to the "mmas" sub-template.
type mmaCall struct {
	*tiledParams
	M, Acc string
}

var tiledCompiled = template.Must(template.New("tiled").Funcs(template.FuncMap{
	"tiledMMA": func(p *tiledParams, m, acc string) mmaCall { return mmaCall{p, m, acc} },
}).Parse(tiledParts + tiledTemplate))

// splitWeights reports whether a dtype's dequantized weights need the hi/lo
// split to be exact to 2^-22: all but F16 (exact in f16) and BF16 (8
// significant bits, exact in f16's normal range).
func splitWeights(dt ir.DType) bool {
	return dt != ir.F16 && dt != ir.BF16
}

// prefill appends a product's launches: mv, the matrix-vector launch, and
// for fused_matmul/matmul and swiglu over [T, K] activations a tiled
// tensor-core launch for steps of T ≥ 2 (mv then runs only at T = 1). The
// tiled kernel takes the same arguments. qkv_rope, and weights whose unit
// does not divide the K chunk, keep the matrix-vector kernel for every step.
func (e *emitter) prefill(family string, p *params, wdt ir.DType, rows GridDim, width int64, args []Arg, mv Launch) error {
	tiled := map[string]string{"matvec": "matmul_tiled", "swiglu": "swiglu_tiled"}[family]
	if tiled == "" || !rows.PerToken || rows.N != 1 || (p.Unit != 1 && p.Unit != tileK) {
		e.launches = append(e.launches, mv)
		return nil
	}
	mv.MaxT = 1
	e.launches = append(e.launches, mv)
	cp := *p
	cp.Name = p.Name + "_mm"
	tp := &tiledParams{params: &cp, TileT: tileT, TileN: tileN, TileK: tileK, Stride: tileStride, Half: tileK / 2,
		Mats: 1, Width: width, SplitW: splitWeights(wdt)}
	if tiled == "swiglu_tiled" {
		tp.Mats = 2
	}
	name, err := e.addTiled(tiled, wdt.String(), tp)
	if err != nil {
		return err
	}
	e.launches = append(e.launches, Launch{Value: mv.Value, Kernel: name, Threads: p.Threads, Args: args, MinT: 2,
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(width, tileN)}, {N: 1, PerToken: true, Tile: tileT}, {N: 1}}})
	return nil
}

// addTiled is emitter.add for the tiled templates: it registers the kernel,
// reuses an identical one of the same name and renames one that differs.
func (e *emitter) addTiled(family, dtype string, tp *tiledParams) (string, error) {
	base := tp.Name
	for i := 2; ; i++ {
		var b bytes.Buffer
		if err := tiledCompiled.Execute(&b, tp); err != nil {
			return "", fmt.Errorf("rendering %s: %w", family, err)
		}
		src := b.String()
		old, ok := e.sources[tp.Name]
		if !ok {
			e.sources[tp.Name] = src
			e.order = append(e.order, tp.Name)
			e.kernels = append(e.kernels, Kernel{Name: tp.Name, Family: family, DType: dtype})
			return tp.Name, nil
		}
		if old == src {
			return tp.Name, nil
		}
		tp.Name = fmt.Sprintf("%s_v%d", base, i)
	}
}
