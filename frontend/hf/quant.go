package hf

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/frontend/safetensors"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// quantParams is one quantization setting of config.json.
type quantParams struct {
	Bits  int    `json:"bits"`
	Group int    `json:"group_size"`
	Mode  string `json:"mode"` // "affine" (also when absent) or "mxfp4"
}

func (p *quantParams) String() string {
	return fmt.Sprintf("%s, %d bits, group %d", p.Mode, p.Bits, p.Group)
}

// quantSpec is config.json's quantization: mlx-lm writes "quantization"
// (and an identical "quantization_config") with the global setting and
// per-module overrides, each an object or false.
type quantSpec struct {
	key     string // the config key it was read from
	global  *quantParams
	modules map[string]*quantParams // nil value: the module is left float
	// method is a transformers quantization_config's quant_method: "" for
	// mlx-lm's form, "mxfp4" for openai's gpt-oss (MXFP4 experts as
	// _blocks and _scales, every module it lists in modules_to_not_convert
	// float; the experts are the only quantized tensors of that layout).
	method      string
	notConverts []string
}

// parseQuant reads the quantization block, if any. A transformers
// quantization_config (quant_method gptq, awq, bitsandbytes, fp8, …) is a
// layout this reader does not know, refused by name.
func parseQuant(c *config) (*quantSpec, error) {
	key := "quantization"
	if !c.has(key) {
		key = "quantization_config"
		if !c.has(key) {
			return nil, nil
		}
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(c.raw[key], &raw) != nil {
		return nil, fmt.Errorf("%s: %s is %s, not an object", c.path, key, describe(c.raw[key]))
	}
	if m, ok := raw["quant_method"]; ok {
		var method string
		_ = json.Unmarshal(m, &method)
		if method != "mxfp4" {
			return nil, fmt.Errorf("%s: %s quant_method %q is not supported (model directories are read in F32, F16 and BF16, MLX affine and MXFP4)", c.path, key, method)
		}
		q := &quantSpec{key: key, method: method}
		for k, v := range raw {
			switch k {
			case "quant_method":
			case "modules_to_not_convert":
				if json.Unmarshal(v, &q.notConverts) != nil {
					return nil, fmt.Errorf("%s: %s modules_to_not_convert is %s, not a list of module names", c.path, key, describe(v))
				}
			default:
				return nil, fmt.Errorf("%s: %s key %q is not supported with quant_method mxfp4", c.path, key, k)
			}
		}
		return q, nil
	}
	q := &quantSpec{key: key, modules: map[string]*quantParams{}}
	params := func(what string, b []byte) (*quantParams, error) {
		p := &quantParams{Mode: "affine"}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(p); err != nil {
			return nil, fmt.Errorf("%s: %s %s: %v", c.path, key, what, oneLine(err))
		}
		if p.Bits <= 0 || p.Bits > 8 || p.Group <= 0 || p.Group > 1<<16 {
			return nil, fmt.Errorf("%s: %s %s: bits %d, group_size %d out of range", c.path, key, what, p.Bits, p.Group)
		}
		return p, nil
	}
	global := map[string]json.RawMessage{}
	for k, v := range raw {
		switch k {
		case "bits", "group_size", "mode":
			global[k] = v
		default:
			if string(v) == "false" {
				q.modules[k] = nil
				continue
			}
			p, err := params("entry "+k, v)
			if err != nil {
				return nil, err
			}
			q.modules[k] = p
		}
	}
	if len(global) > 0 {
		b, _ := json.Marshal(global)
		p, err := params("(global)", b)
		if err != nil {
			return nil, err
		}
		q.global = p
	}
	return q, nil
}

// lookup is the setting for a module ("model.layers.0.self_attn.q_proj"):
// its override, else the global one; nil for a float module.
func (q *quantSpec) lookup(module string) *quantParams {
	if q == nil || q.method != "" {
		return nil
	}
	if p, ok := q.modules[module]; ok {
		return p
	}
	return q.global
}

// decision is how the graph reads one weight: the per-tensor dtype
// decision. A float weight (F32, F16, BF16) is used as stored; a 1-D one
// (norm gains, biases) is widened once to F32, the type every backend
// reads gains and biases in (a few kilobytes: never a copy of the model).
// A quantized layout is repacked once, on first use, into the ir dtype
// the backends run (quant.PackMLXAffine, quant.MXFP4FromHF): MLX affine
// (module.scales and module.biases beside a U32 module.weight) into the
// MLX dtypes, MXFP4 (mlx-lm's U32 words with U8 scales, openai's _blocks
// and _scales) into ggml's block_mxfp4. The repacked bytes are about the
// size of the stored ones (6 % more), so the model is never held as float;
// the stored pages are then dropped from the resident set (release), so it
// is not held twice either.
type decision struct {
	hf   string // the HF tensor the graph weight comes from
	file *safetensors.File
	t    *safetensors.Tensor
	info gguf.TensorInfo // the weight as the graph sees it (GGUF name, dims, type)
	// shape is the weight's logical shape, outermost first (a packed
	// tensor's element count, not its words'), held to config.json's.
	shape []uint64
	// data is bytes made at load (1-D tensors widened to F32, tensors made
	// from config.json); nil: served from the mapping, or by build.
	data []byte
	// build makes a repacked weight on first use, once.
	build func() ([]byte, error)
	once  sync.Once
	err   error
	parts []string // HF tensors the decision consumed (hf and companions)
	// stored describes the layout on disk, for inspect ("BF16", "MLX
	// affine 4-bit g64", "MXFP4").
	stored string
}

// bytes serves the weight: made at load, repacked on first use, or a slice
// of the mapped shard.
func (d *decision) bytes() ([]byte, error) {
	if d.build != nil {
		d.once.Do(func() { d.data, d.err = d.build() })
		return d.data, d.err
	}
	if d.data != nil {
		return d.data, nil
	}
	return d.file.Data(d.t), nil
}

// decide makes the dtype decision for the HF tensor name (a module's
// weight or a 1-D gain/bias) found in file at t, for graph weight gg, whose
// shape config.json makes want.
func (m *Model) decide(name, gg string, want []dim, file *safetensors.File, t *safetensors.Tensor) (*decision, error) {
	fail := func(format string, args ...any) error {
		return &safetensors.Error{Path: file.Path, Tensor: name, Offset: t.At, Msg: fmt.Sprintf(format, args...)}
	}
	module, isWeight := strings.CutSuffix(name, ".weight")
	q := m.quant.lookup(module)
	if isWeight {
		_, _, hasScales := m.Tensors.Tensor(module + ".scales")
		switch {
		case hasScales && q == nil:
			return nil, fail("has %s.scales beside it but config.json has no quantization for it: the weights and the config disagree", module)
		case hasScales:
			return m.decideQuantized(name, module, gg, want, file, t, q)
		}
		if n := len(t.Shape); q != nil && n >= 2 && t.Shape[n-1]%uint64(q.Group) == 0 {
			// mlx-lm quantizes every Linear and Embedding whose input
			// dimension the group divides; one stored as float means the
			// config describes another model.
			return nil, fail("is %s %v without .scales, but config.json %s quantizes it (%s)", t.DType, t.Shape, m.quant.key, q)
		}
	}
	typ, ok := t.DType.Float()
	if !ok {
		return nil, fail("has dtype %s: a weight must be F32, F16 or BF16 (or a quantized layout with its .scales)", t.DType)
	}
	d := &decision{hf: name, file: file, t: t, shape: t.Shape, parts: []string{name}, stored: string(t.DType)}
	d.info = gguf.TensorInfo{Name: gg, Dims: ggufDims(t.Shape), Type: typ, Size: t.Bytes()}
	if (len(t.Shape) == 1 || strings.HasSuffix(name, ".bias")) && typ != ir.F32 {
		// Gains and biases (gpt-oss's expert biases are [E, out]): widened
		// to F32 once (exact), as llama.cpp's converter stores every 1-D
		// tensor and the expert biases, so that the graph is the one a
		// GGUF conversion gives, and every backend reads biases in F32.
		d.data = widen(file.Data(t), typ)
		d.info.Type, d.info.Size = ir.F32, uint64(len(d.data))
	}
	return d, nil
}

// ggufDims lists a shape innermost first, as GGUF does.
func ggufDims(shape []uint64) []uint64 {
	dims := make([]uint64, len(shape))
	for i, n := range shape {
		dims[len(dims)-1-i] = n
	}
	return dims
}

// decideQuantized decides a module stored quantized by mlx-lm: a U32
// weight of packed values beside .scales (and, for affine, .biases), each
// of the weight's leading shape with one value per group. Bits and group
// size follow from the shapes and the input dimension config.json gives;
// they must be the ones config.json states for the module.
func (m *Model) decideQuantized(name, module, gg string, want []dim, file *safetensors.File, t *safetensors.Tensor, q *quantParams) (*decision, error) {
	fail := func(format string, args ...any) error {
		return &safetensors.Error{Path: file.Path, Tensor: name, Offset: t.At, Msg: fmt.Sprintf(format, args...)}
	}
	sc, sf, _ := m.Tensors.Tensor(module + ".scales")
	bi, bf, hasBiases := m.Tensors.Tensor(module + ".biases")
	r := len(t.Shape)
	switch {
	case t.DType != safetensors.U32:
		return nil, fail("is %s %v beside %s.scales: a quantized weight is U32 words of packed values", t.DType, t.Shape, module)
	case len(want) < 2 || r != len(want):
		return nil, fail("is U32 %v beside %s.scales, but config.json makes it %d-D", t.Shape, module, len(want))
	case len(sc.Shape) != r || !equalDims(sc.Shape[:r-1], t.Shape[:r-1]):
		return nil, &safetensors.Error{Path: sf.Path, Tensor: sc.Name, Offset: sc.At,
			Msg: fmt.Sprintf("is %s %v, but %s is U32 %v: not one scale per group of each row", sc.DType, sc.Shape, name, t.Shape)}
	}
	in := uint64(want[r-1].n)
	words, groups := t.Shape[r-1], sc.Shape[r-1]
	if groups == 0 || in%groups != 0 || words*32%in != 0 {
		return nil, fail("is U32 %v with scales %v: not a quantization of rows of %s", t.Shape, sc.Shape, want[r-1])
	}
	bits, group := int(words*32/in), int(in/groups)
	if bits != q.Bits || group != q.Group {
		return nil, fail("is quantized with %d bits in groups of %d (U32 %v, scales %v, rows of %s), but config.json %s gives %s", bits, group, t.Shape, sc.Shape, want[r-1], m.quant.key, q)
	}
	shape := append(append([]uint64{}, t.Shape[:r-1]...), in)
	elems := uint64(1)
	for _, n := range shape {
		elems *= n
	}
	rows := int(elems / in)
	d := &decision{hf: name, file: file, t: t, shape: shape, parts: []string{name, module + ".scales"}}
	switch q.Mode {
	case "affine":
		if !hasBiases {
			return nil, fail("has %s.scales but no %s.biases, which MLX affine quantization (config.json %s: %s) needs", module, module, m.quant.key, q)
		}
		if !equalDims(bi.Shape, sc.Shape) {
			return nil, &safetensors.Error{Path: bf.Path, Tensor: bi.Name, Offset: bi.At, Msg: fmt.Sprintf("is %v, but its scales are %v", bi.Shape, sc.Shape)}
		}
		st, err := scaleType(sf, sc)
		if err != nil {
			return nil, err
		}
		bt, err := scaleType(bf, bi)
		if err != nil {
			return nil, err
		}
		dt, ok := ir.MLXAffine(bits, group)
		if !ok {
			return nil, fail("MLX affine quantization with %d bits in groups of %d is not supported (4 or 8 bits, groups of 32, 64 or 128)", bits, group)
		}
		d.parts = append(d.parts, module+".biases")
		d.stored = fmt.Sprintf("MLX affine %d-bit g%d (U32, %s scales and biases)", bits, group, sc.DType)
		d.build = func() ([]byte, error) {
			// A slice of rows at a time, each slice's stored pages released
			// once repacked: the whole tensor is never resident twice.
			w, s, b := file.Data(t), sf.Data(sc), bf.Data(bi)
			gpr, qb := int(in)/group, group*bits/8
			ss, bs := int(sc.DType.Size()), int(bi.DType.Size())
			out := make([]byte, rows*gpr*(8+qb))
			if len(w) != rows*gpr*qb || len(s) != rows*gpr*ss || len(b) != rows*gpr*bs {
				return nil, quant.PackMLXAffineInto(out, dt, rows, int(in), w, s, st, b, bt) // the error
			}
			err := inSlices(rows, gpr*qb, func(lo, hi int) error {
				g0, g1 := lo*gpr, hi*gpr
				if err := quant.PackMLXAffineInto(out[g0*(8+qb):g1*(8+qb)], dt, hi-lo, int(in), w[g0*qb:g1*qb], s[g0*ss:g1*ss], st, b[g0*bs:g1*bs], bt); err != nil {
					return err
				}
				file.ReleaseRange(t, g0*qb, g1*qb)
				sf.ReleaseRange(sc, g0*ss, g1*ss)
				bf.ReleaseRange(bi, g0*bs, g1*bs)
				return nil
			})
			if err != nil {
				return nil, err
			}
			release(stored{file, t}, stored{sf, sc}, stored{bf, bi})
			return out, nil
		}
		d.info.Type = dt
	case "mxfp4":
		switch {
		case hasBiases:
			return nil, &safetensors.Error{Path: bf.Path, Tensor: bi.Name, Offset: bi.At, Msg: fmt.Sprintf("is not part of MXFP4 quantization (config.json %s: %s), which has no biases", m.quant.key, q)}
		case bits != 4 || group != 32:
			return nil, fail("is MXFP4 with %d bits in groups of %d: MXFP4 is 4 bits in groups of 32", bits, group)
		case sc.DType != safetensors.U8 && sc.DType != safetensors.F8E8M0:
			return nil, &safetensors.Error{Path: sf.Path, Tensor: sc.Name, Offset: sc.At, Msg: fmt.Sprintf("has dtype %s: MXFP4 scales are U8 (E8M0) exponents", sc.DType)}
		}
		d.stored = "MXFP4 (U32 words, U8 scales)"
		d.build = func() ([]byte, error) {
			out := make([]byte, 17*elems/32)
			w, s := file.Data(t), sf.Data(sc)
			nb := int(elems / 32)
			if len(w) != 16*nb || len(s) != nb {
				return nil, quant.MXFP4FromHF(out, w, s) // the error
			}
			err := inSlices(nb, 16, func(lo, hi int) error {
				if err := quant.MXFP4FromHF(out[17*lo:17*hi], w[16*lo:16*hi], s[lo:hi]); err != nil {
					return err
				}
				file.ReleaseRange(t, 16*lo, 16*hi)
				sf.ReleaseRange(sc, lo, hi)
				return nil
			})
			if err != nil {
				return nil, err
			}
			release(stored{file, t}, stored{sf, sc})
			return out, nil
		}
		d.info.Type = ir.MXFP4
	default:
		return nil, fail("config.json %s gives quantization mode %q, which is not supported (affine, mxfp4)", m.quant.key, q.Mode)
	}
	size, err := d.info.Type.RowBytes(int64(elems))
	if err != nil {
		return nil, fail("%v", err)
	}
	d.info.Name, d.info.Dims, d.info.Size = gg, ggufDims(shape), uint64(size)
	return d, nil
}

// release drops the mapped pages of tensors just repacked from the resident set: the repacked copy is what the graph
// reads from now on, and the model is not held twice (safetensors
// File.Release).
func release(ts ...stored) {
	for _, s := range ts {
		s.f.Release(s.t)
	}
}

// repackSlice is about how many stored bytes a repack reads before it
// releases them: the most of a tensor resident twice at once.
var repackSlice = 16 << 20

// inSlices calls do on [lo, hi) slices of n units of unit stored bytes,
// each about repackSlice bytes.
func inSlices(n, unit int, do func(lo, hi int) error) error {
	step := max(1, repackSlice/max(unit, 1))
	for lo := 0; lo < n; lo += step {
		if err := do(lo, min(n, lo+step)); err != nil {
			return err
		}
	}
	return nil
}

// stored is a tensor and the file holding it.
type stored struct {
	f *safetensors.File
	t *safetensors.Tensor
}

// scaleType is the type of an MLX scales or biases tensor.
func scaleType(f *safetensors.File, t *safetensors.Tensor) (quant.MLXScaleType, error) {
	switch t.DType {
	case safetensors.F32:
		return quant.MLXScaleF32, nil
	case safetensors.F16:
		return quant.MLXScaleF16, nil
	case safetensors.BF16:
		return quant.MLXScaleBF16, nil
	}
	return 0, &safetensors.Error{Path: f.Path, Tensor: t.Name, Offset: t.At, Msg: fmt.Sprintf("has dtype %s: MLX scales and biases are F32, F16 or BF16", t.DType)}
}

func equalDims(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// widen converts little-endian F16 or BF16 bytes to F32, bytewise (the
// source may be unaligned).
func widen(b []byte, typ ir.DType) []byte {
	n := len(b) / 2
	out := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		h := binary.LittleEndian.Uint16(b[2*i:])
		f := quant.F16ToF32(h)
		if typ == ir.BF16 {
			f = quant.BF16ToF32(h)
		}
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
	}
	return out
}
