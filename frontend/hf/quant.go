package hf

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"

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
		return nil, fmt.Errorf("%s: %s quant_method %q is not supported (model directories are read in F32, F16 and BF16)", c.path, key, method)
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
	if q == nil {
		return nil
	}
	if p, ok := q.modules[module]; ok {
		return p
	}
	return q.global
}

// decision is how the graph reads one weight: the per-tensor dtype
// decision. Today a weight is a float tensor used as stored (F32, F16,
// BF16), or, when 1-D (norm gains, biases), the same values widened once
// to F32, the type every backend reads gains and biases in (a few
// kilobytes: never a copy of the model).
//
// This is where the quantized layouts of issue 16 items 3-4 plug in:
// decide sees a module's companion tensors (MLX affine: module.scales and
// module.biases beside a U32 module.weight; openai MXFP4: *_blocks and
// *_scales) and refuses them today; an implementation returns a decision
// whose info.Type is the new ir dtype and whose bytes are the packed
// weight (used in place, or repacked once into a layout a backend runs),
// and lists the companions in parts so that they count as consumed.
type decision struct {
	hf    string // the HF tensor the graph weight comes from
	file  *safetensors.File
	t     *safetensors.Tensor
	info  gguf.TensorInfo // the weight as the graph sees it (GGUF name, dims, type)
	f32   []byte          // 1-D tensors widened to F32; nil: served from the mapping
	parts []string        // HF tensors the decision consumed (hf and companions)
	// stored describes the layout on disk, for inspect ("BF16", later
	// "MLX affine 4-bit g64").
	stored string
}

// decide makes the dtype decision for the HF tensor name (a module's
// weight or a 1-D gain/bias) found in file at t, for graph weight gg of the
// given expected shape.
func (m *Model) decide(name, gg string, file *safetensors.File, t *safetensors.Tensor) (*decision, error) {
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
			// Issue 16 item 3 plugs in here: MLX affine, U32 weight packed
			// LSB first, BF16/F32 scales and biases per group.
			return nil, fail("MLX quantization (%s, from config.json %s) is not supported yet: use an unquantized (F32, F16, BF16) directory or a GGUF file", q, m.quant.key)
		}
		if q != nil && len(t.Shape) == 2 && t.Shape[1]%uint64(q.Group) == 0 {
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
	d := &decision{hf: name, file: file, t: t, parts: []string{name}, stored: string(t.DType)}
	dims := make([]uint64, len(t.Shape))
	for i, n := range t.Shape {
		dims[len(dims)-1-i] = n // GGUF lists the row length first
	}
	d.info = gguf.TensorInfo{Name: gg, Dims: dims, Type: typ, Size: t.Bytes()}
	if len(t.Shape) == 1 && typ != ir.F32 {
		// Gains and biases: widened to F32 once (exact), as llama.cpp's
		// converter stores every 1-D tensor, so that the graph is the
		// one a GGUF conversion gives.
		d.f32 = widen(file.Data(t), typ)
		d.info.Type, d.info.Size = ir.F32, uint64(len(d.f32))
	}
	return d, nil
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
