package gpu

import (
	"fmt"

	"github.com/minerva-llm/minerva/codegen/internal/kernsrc"
	"github.com/minerva-llm/minerva/codegen/sched"
	"github.com/minerva-llm/minerva/ir"
)

// weight checks that w is a [N, K] matrix of a dtype the language decodes
// and returns its decoder and row size.
func (e *Emitter) weight(w *ir.Value) (Decoder, int64, int64, int64, error) {
	r, ok := e.Lang.Decoders[w.Type.DType]
	if !ok {
		return r, 0, 0, 0, fmt.Errorf("weight dtype %s has no %s decoder", w.Type.DType, e.Lang.Name)
	}
	if len(w.Type.Shape) != 2 || !w.Type.Shape[0].IsConst() || !w.Type.Shape[1].IsConst() {
		return r, 0, 0, 0, fmt.Errorf("weight must be a constant [N, K] matrix, got %s", w.Type)
	}
	n, k := w.Type.Shape[0].N, w.Type.Shape[1].N
	rb, err := w.Type.DType.RowBytes(k)
	if err != nil {
		return r, 0, 0, 0, err
	}
	if k%int64(r.Unit) != 0 {
		return r, 0, 0, 0, fmt.Errorf("row length %d is not a multiple of the %s unit %d", k, w.Type.DType, r.Unit)
	}
	e.dtypes[w.Type.DType] = true
	return r, n, k, rb, nil
}

func (e *Emitter) embed(v *ir.Value) error {
	table := v.Args[0]
	r, n, d, rb, err := e.weight(table)
	if err != nil {
		return err
	}
	p := &Params{
		Name: fmt.Sprintf("embed_%s_%dx%d", r.Name, n, d), DT: r.Name,
		Unit: int64(r.Unit), NU: d / int64(r.Unit), RowBytes: rb, V: n, D: d, Threads: 32,
	}
	args := []Arg{val(table), val(v.Args[1]), val(v)}
	p.bind(args)
	name, err := e.Add("embed", table.Type.DType.String(), p)
	if err != nil {
		return err
	}
	rows, err := RowsOf(v.Type)
	if err != nil {
		return err
	}
	e.Launch(Launch{Value: v.ID, Kernel: name, Threads: 32, Args: args,
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(p.NU, 32)}, rows, {N: 1}}})
	return nil
}

func flags(p *Params) string {
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
// as matrix-vector kernels (one warp or simdgroup per output feature, each
// a row of the step), plus whatever prefill kernels the language adds
// (Language.Prefill).
func (e *Emitter) matmul(v *ir.Value) error {
	parts, err := matmulParts(v)
	if err != nil {
		return err
	}
	if parts.QNorm != nil {
		return e.qkvHeadNorm(v, parts)
	}
	return e.product(v, v.Op, parts, val(v))
}

func matmulParts(v *ir.Value) (ir.Parts, error) {
	if v.Op == ir.OpMatMul {
		parts := ir.Parts{X: v.Args[0], W: v.Args[1]}
		if len(v.Args) == 3 {
			parts.Bias = v.Args[2]
		}
		return parts, nil
	}
	return ir.MatMulParts(v)
}

// qkvHeadNorm lowers a qkv_rope whose q and k heads are normalised before
// the rotation (Qwen3): the merged product into the step's scratch (the
// matrix-vector kernel, and the language's prefill kernels), then rope_kv,
// which normalises each head as it rotates and stores. A head's norm needs
// the whole head, which one warp of the fused kernel does not hold.
func (e *Emitter) qkvHeadNorm(v *ir.Value, parts ir.Parts) error {
	n := parts.W.Type.Shape[0].N
	h := Arg{Value: sched.Scratch, ScratchPerToken: 4 * n}
	prod := ir.Parts{X: parts.X, W: parts.W, Gain: parts.Gain, Bias: parts.Bias, Norm: parts.Norm, Eps: parts.Eps}
	if err := e.product(v, ir.OpFusedMatMul, prod, h); err != nil {
		return err
	}
	p := &Params{N: n}
	if _, err := e.qkvParams(v, p); err != nil {
		return err
	}
	p.QKNorm = true
	var err error
	if p.QKEps, err = kernsrc.FloatLiteral(parts.QKEps); err != nil {
		return err
	}
	if p.QNT, err = e.operandType("qk_norm gain", parts.QNorm); err != nil {
		return err
	}
	if t, err := e.operandType("qk_norm gain", parts.KNorm); err != nil || t != p.QNT {
		return fmt.Errorf("the q and k norm gains differ in dtype: %s, %s", parts.QNorm.Type, parts.KNorm.Type)
	}
	rows, err := RowsOf(v.Type)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("rope_kv_qkn_%s_h%dkv%dd%d_%s", p.Mode, p.QD/p.HD, p.KVD/p.HD, p.HD, p.CacheT)
	if p.QNT == e.Lang.F16 {
		name += "_f16"
	}
	return e.RopeKV(p, name, rows, v.ID, h, val(parts.Pos), val(parts.KCache), val(parts.VCache), val(v),
		[]Arg{val(parts.QNorm), val(parts.KNorm)}, 0)
}

// ropeThreads is the block size of rope_kv: one thread per rotated pair.
const ropeThreads = 128

// RopeKV appends a rope_kv launch: it reads h [T, N] (p.N) from a scratch
// argument, normalises each q and k head when p.QKNorm (norms: the q and k
// gains), rotates the pairs, stores q into out and k, v into the caches at
// row base[t] + pos[t] (KVBaseArg). It runs from step size minT on (CUDA
// runs it after its tiled prefill only; the head-norm lowering at every
// step).
func (e *Emitter) RopeKV(p *Params, name string, rows GridDim, value int, h, pos, kc, vc, out Arg, norms []Arg, minT int) error {
	rp := *p
	rp.Name = name
	rp.Threads, rp.NW, rp.XS = ropeThreads, ropeThreads/32, XStage{}
	args := append(append([]Arg{h, pos, KVBaseArg, kc, vc}, norms...), out)
	rp.bind(args)
	kname, err := e.Add("rope_kv", "", &rp)
	if err != nil {
		return err
	}
	e.Launch(Launch{Value: value, Kernel: kname, Threads: ropeThreads, MinT: minT, Args: args,
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(p.Pairs, ropeThreads)}, rows, {N: 1}}})
	return nil
}

// product lowers one matrix product of the matmul family whose result goes
// to out (the value's buffer, or a scratch): op names the kernel and picks
// its family.
func (e *Emitter) product(v *ir.Value, op ir.Op, parts ir.Parts, out Arg) error {
	r, n, k, rb, err := e.weight(parts.W)
	if err != nil {
		return err
	}
	p := &Params{
		DT: r.Name, Unit: int64(r.Unit), NU: k / int64(r.Unit), RowBytes: rb, N: n, K: k,
		Norm: parts.Norm, Gain: parts.Gain != nil, Bias: parts.Bias != nil, Residual: parts.Residual != nil,
		ScratchOut: out.Value == sched.Scratch,
	}
	e.Lang.MatVec(p, parts.W.Type.DType, false)
	if p.Norm {
		if p.Eps, err = kernsrc.FloatLiteral(parts.Eps); err != nil {
			return err
		}
	}
	args := []Arg{val(parts.X), val(parts.W)}
	if op == ir.OpQKVRoPE {
		args = append(args, val(parts.Pos), KVBaseArg, val(parts.KCache), val(parts.VCache))
	}
	for _, x := range []struct {
		v    *ir.Value
		name string
	}{{parts.Gain, "gain"}, {parts.Bias, "bias"}, {parts.Residual, "res"}} {
		if x.v != nil {
			t, err := e.operandType(x.name, x.v)
			if err != nil {
				return err
			}
			if x.name == "res" && t != "float" {
				return fmt.Errorf("residual must be f32, got %s", x.v.Type)
			}
			p.Extra = append(p.Extra, Slot{x.name, len(args), t})
			args = append(args, val(x.v))
		}
	}
	args = append(args, out)
	p.bind(args)
	rows, err := RowsOf(v.Type)
	if err != nil {
		return err
	}
	family, width := "matvec", n
	switch op {
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
	p.Name = fmt.Sprintf("%s%s_%s_%dx%d", op, flags(p), r.Name, n, k)
	for _, x := range p.Extra {
		if x.T == e.Lang.F16 {
			p.Name += "_" + x.Name + "f16"
		}
	}
	if op == ir.OpQKVRoPE {
		p.Name += "_" + p.CacheT
	}
	name, err := e.Add(family, parts.W.Type.DType.String(), p)
	if err != nil {
		return err
	}
	mv := Launch{Value: v.ID, Kernel: name, Threads: p.Threads, Args: args,
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(width, int64(p.NW))}, rows, {N: 1}}}
	return e.Lang.Prefill(e, family, p, parts.W.Type.DType, rows, width, mv)
}

// qkvParams fills the RoPE and cache fields and returns the number of
// column pairs, one per warp.
func (e *Emitter) qkvParams(v *ir.Value, p *Params) (int64, error) {
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
	if p.CacheT, err = e.cacheType(kc.Type.DType); err != nil {
		return 0, err
	}
	p.HD, p.NRot, p.Half, p.HalfHD = hd, nrot, nrot/2, hd/2
	p.QD, p.KVD = nh*hd, nkv*hd
	p.QKD = p.QD + p.KVD
	p.Pairs = (p.QD + 2*p.KVD) / 2
	p.Mode = a.Str("mode", "normal")
	p.Neox = p.Mode == "neox"
	// The frequencies (YaRN's blend included) and the magnitude scale are
	// ir/rope's, as literals.
	if err := e.ropeFreqs(a, p); err != nil {
		return 0, err
	}
	return p.Pairs, nil
}
