package cuda

import (
	"bytes"
	"fmt"
	"text/template"

	"github.com/minerva-llm/minerva/codegen/gpu"
	"github.com/minerva-llm/minerva/codegen/internal/kernsrc"
	"github.com/minerva-llm/minerva/codegen/sched"
	"github.com/minerva-llm/minerva/ir"
)

// tiledParams are the fields the tiled templates (templates_tiled.go) read:
// the matrix-vector kernel's params plus the tiling.
type tiledParams struct {
	*gpu.Params
	TileT, TileN, TileK int64
	Stride, Half        int64 // shared row stride and words per chunk row, in f16x2 words
	Mats                int64 // weight matrices per tile: 1, or 2 for swiglu (gate and up rows)
	Width               int64 // output features: N, or F for swiglu
	SplitW              bool  // weights as f16 hi + lo (a third mma per tile)
	// RoundQ8 rounds each activation block to Q8_0 (after the RMSNorm and
	// gain) before the product, as q8_quant does for the matrix-vector
	// kernels: one rounding for every step size (RoundsActivations).
	RoundQ8 bool
	// The epilogue's (tileEpilogue): n8 tiles per warp, the accumulators,
	// and the row scale.
	NI       int64
	Gate, Up string
	RowScale bool
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
// split to be exact to 2^-22: all but F16 (exact in f16), BF16 (8
// significant bits) and MXFP4 (a code of at most 2 significant bits times a
// power of two), which f16 holds exactly inside its range — where it does
// not, a lo part would underflow or overflow just the same. Without the
// split the quantized dtypes measure 1.5e-4 to 3e-4 of max |ref| in the
// emulation tests, against a few 1e-7 with it.
func splitWeights(dt ir.DType) bool {
	return dt != ir.F16 && dt != ir.BF16 && dt != ir.MXFP4
}

// prefill appends a product's launches: mv, the matrix-vector launch, and
// for fused_matmul/matmul and swiglu over [T, K] activations a tiled
// tensor-core launch for steps of T ≥ 2 (mv then runs only at T = 1). The
// tiled kernel takes the same arguments. For qkv_rope the tiled product
// writes h into the scratch and a rope_kv launch rotates and stores it.
// Weights whose unit is neither one element nor the K chunk keep the
// matrix-vector kernel for every step.
func prefill(e *gpu.Emitter, family string, p *gpu.Params, wdt ir.DType, rows GridDim, width int64, mv Launch) error {
	tiled := map[string]string{"matvec": "matmul_tiled", "swiglu": "swiglu_tiled", "qkv_rope": "matmul_tiled"}[family]
	if tiled == "" || !rows.PerToken || rows.N != 1 || (p.Unit != 1 && p.Unit != tileK) {
		return launchMatVec(e, p, mv)
	}
	mv.MaxT = 1
	if err := launchMatVec(e, p, mv); err != nil {
		return err
	}
	cp := *p
	cp.Name = p.Name + "_mm"
	cp.NW, cp.Threads, cp.XS = nwarps, 32*nwarps, gpu.XStage{} // the tile's own block shape
	args := mv.Args
	var h Arg // qkv_rope: the scratch the tiled product writes h into and rope_kv reads
	if family == "qkv_rope" {
		// The matrix-vector launch takes (x, w, pos, base, kcache,
		// vcache, extras…, out); the product takes (x, w, extras…, h).
		h = Arg{Value: sched.Scratch, ScratchPerToken: 4 * p.N}
		width = p.N
		args = append(append([]Arg{mv.Args[0], mv.Args[1]}, mv.Args[6:len(mv.Args)-1]...), h)
	}
	name, tileH, tileW, err := addPrefillTiles(e, tiled, wdt, p, &cp, width, mv, &args)
	if err != nil {
		return err
	}
	e.Launch(Launch{Value: mv.Value, Kernel: name, Threads: cp.Threads, Args: args, MinT: 2,
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(width, tileW)}, {N: 1, PerToken: true, Tile: tileH}, {N: 1}}})
	if family == "qkv_rope" {
		return ropeKV(e, p, rows, mv, h)
	}
	return nil
}

// addPrefillTiles registers the tiled kernel of product p (cp: its copy
// with the tile's block shape) over width output features and returns its
// name and tile (tokens, features). The integer kernel (useMMQ) reads rows
// a q8_quant launch, appended here, rounded into the scratch after what the
// product itself writes there (qkv_rope's h, a head-norm product's
// result): args' x becomes that scratch.
func addPrefillTiles(e *gpu.Emitter, tiled string, wdt ir.DType, p, cp *gpu.Params, width int64, mv Launch, args *[]Arg) (name string, tileH, tileW int64, err error) {
	if useMMQ(wdt, p.K) {
		var off int64
		for _, a := range *args {
			if a.Value == sched.Scratch {
				off = max(off, (a.ScratchPerToken+15)/16*16) // 16-byte aligned rows
			}
		}
		cp.Q8 = q8Layout(p.K, off)
		xq, err := launchQ8Quant(e, p, cp.Q8, Launch{Value: mv.Value, Args: mv.Args, MinT: 2, Grid: [3]GridDim{{}, {N: 1, PerToken: true}, {}}})
		if err != nil {
			return "", 0, 0, err
		}
		*args = append([]Arg{xq}, (*args)[1:]...)
		return addMMQ(e, tiled, wdt, cp, width)
	}
	tp := &tiledParams{Params: cp, TileT: tileT, TileN: tileN, TileK: tileK, Stride: tileStride, Half: tileK / 2,
		Mats: 1, Width: width, SplitW: splitWeights(wdt),
		// Rounding in the load stage needs no scratch, so a product into
		// the scratch (head norms) rounds here too, unlike at T = 1.
		RoundQ8: q8Dots[wdt] && p.K%tileK == 0,
		NI:      4, Gate: "acc", Up: "accu", RowScale: true}
	if tiled == "swiglu_tiled" {
		tp.Mats = 2
	}
	name, err = addTiled(e, tiled, wdt.String(), tp)
	return name, tileT, tileN, err
}

// ropeKV appends the rope_kv launch of a qkv_rope prefill step: it reads h
// from the scratch the tiled product wrote and takes the matrix-vector
// launch's pos, caches and output (RopeKV adds the cache bases).
func ropeKV(e *gpu.Emitter, p *gpu.Params, rows GridDim, mv Launch, h Arg) error {
	n := len(mv.Args)
	return e.RopeKV(p, p.Name+"_rope", rows, mv.Value, h, mv.Args[2], mv.Args[4], mv.Args[5], mv.Args[n-1], nil, 2)
}

// addTiled is Emitter.Add for the tiled templates, which read tiledParams.
func addTiled(e *gpu.Emitter, family, dtype string, tp *tiledParams) (string, error) {
	return e.Register(family, dtype, tp.Name, func(name string) (string, error) {
		tp.Name = name
		var b bytes.Buffer
		if err := tiledCompiled.Execute(&b, tp); err != nil {
			return "", fmt.Errorf("rendering %s: %w", family, err)
		}
		return b.String(), nil
	})
}
