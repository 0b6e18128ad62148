// Package eval is the reference interpreter: it executes any ir.Graph op by
// op in plain Go, float32 storage with float64 accumulation in reductions.
// It is the oracle every pass and every generated kernel is compared with,
// so it is written to be obviously right, not fast.
package eval

import (
	"fmt"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// Tensor is a concrete value: a shape and either float32 or int32 data.
type Tensor struct {
	Shape []int64
	F32   []float32
	I32   []int32
}

// Len is the number of elements the shape holds.
func (t Tensor) Len() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Weights supplies the raw bytes of a model tensor by name, in the dtype and
// shape its weight value declares (GGUF element order).
type Weights interface {
	WeightBytes(name string) ([]byte, error)
}

// Machine runs one graph repeatedly, keeping the state buffers (KV caches)
// between steps. Weights are dequantized to float32 on first use and kept.
type Machine struct {
	g       *ir.Graph
	src     Weights
	ctx     int64
	weights map[*ir.Value][]float32
	states  map[string]*Tensor
	consts  map[*ir.Value]bool // values computed from weights alone

	// RoundActivations, when set, names the weight dtypes whose products
	// round their activation rows to Q8_0 blocks (after the fused RMSNorm
	// and gain) before multiplying, as a backend kernel that multiplies
	// 8-bit activations does (CUDA's decode kernels for Q4_0 and Q8_0
	// weights). Unset, products multiply the float rows.
	RoundActivations func(w ir.DType) bool
}

// New prepares a machine for g whose state buffers have ctx rows (symbol C).
func New(g *ir.Graph, src Weights, ctx int64) (*Machine, error) {
	if err := ir.Verify(g); err != nil {
		return nil, fmt.Errorf("eval: invalid graph: %w", err)
	}
	if ctx <= 0 {
		return nil, fmt.Errorf("eval: context length %d must be positive", ctx)
	}
	m := &Machine{g: g, src: src, ctx: ctx, weights: map[*ir.Value][]float32{}, states: map[string]*Tensor{}, consts: ir.ConstValues(g)}
	for _, v := range g.Values {
		if v.Op != ir.OpState {
			continue
		}
		shape, err := v.Type.Shape.Bind(map[string]int64{"C": ctx})
		if err != nil {
			return nil, fmt.Errorf("eval: state %q: %w", v.Name(), err)
		}
		t := &Tensor{Shape: shape}
		t.F32 = make([]float32, t.Len())
		m.states[v.Name()] = t
	}
	return m, nil
}

// Context returns the number of cache rows.
func (m *Machine) Context() int64 { return m.ctx }

// Reset clears every state buffer, starting a new sequence.
func (m *Machine) Reset() {
	for _, t := range m.states {
		clear(t.F32)
	}
}

// State returns the named state buffer (for tests and inspection).
func (m *Machine) State(name string) *Tensor { return m.states[name] }

// Run executes one step. inputs maps input names to tensors; symbols in the
// inputs' declared shapes (T) are bound from the tensors given. It returns
// every graph output; state outputs alias the machine's buffers.
func (m *Machine) Run(inputs map[string]Tensor) (map[string]Tensor, error) {
	env := map[string]int64{"C": m.ctx}
	vals := make(map[*ir.Value]Tensor, len(m.g.Values))
	for _, v := range m.g.Values {
		var out Tensor
		var err error
		switch v.Op {
		case ir.OpInput:
			in, ok := inputs[v.Name()]
			if !ok {
				return nil, fmt.Errorf("eval: input %q not given", v.Name())
			}
			if err := bindShape(v.Type.Shape, in.Shape, env); err != nil {
				return nil, fmt.Errorf("eval: input %q: %w", v.Name(), err)
			}
			if err := checkData(v.Type.DType, in); err != nil {
				return nil, fmt.Errorf("eval: input %q: %w", v.Name(), err)
			}
			out = in
		case ir.OpWeight:
			out, err = m.weight(v)
		case ir.OpState:
			out = *m.states[v.Name()]
		case ir.OpConcat, ir.OpMul, ir.OpAdd, ir.OpReshape:
			if m.consts[v] {
				out, err = m.folded(v, vals)
				break
			}
			fallthrough
		default:
			args := make([]Tensor, len(v.Args))
			for i, a := range v.Args {
				args[i] = vals[a]
			}
			var shape []int64
			shape, err = v.Type.Shape.Bind(env)
			if err == nil {
				out, err = m.kernel(v)(v, args, shape)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("eval: %v (%s): %w", v, v.Op, err)
		}
		vals[v] = out
	}
	res := make(map[string]Tensor, len(m.g.Outputs))
	for _, o := range m.g.Outputs {
		res[o.Name] = vals[o.Value]
	}
	return res, nil
}

// kernel is v's kernel: the rounding one for a product whose weight dtype
// RoundActivations names.
func (m *Machine) kernel(v *ir.Value) kernel {
	if k, ok := roundedProducts[v.Op]; ok && m.RoundActivations != nil {
		if dt, ok := weightDType(v); ok && m.RoundActivations(dt) {
			return k
		}
	}
	return kernels[v.Op]
}

// bindShape unifies a declared shape with a concrete one, binding symbols.
func bindShape(decl ir.Shape, got []int64, env map[string]int64) error {
	if len(decl) != len(got) {
		return fmt.Errorf("shape %v does not match declared %s", got, decl)
	}
	for i, d := range decl {
		if d.Sym == "" {
			if d.N != got[i] {
				return fmt.Errorf("shape %v does not match declared %s", got, decl)
			}
			continue
		}
		if prev, ok := env[d.Sym]; ok && prev != got[i] {
			return fmt.Errorf("symbol %s is %d here but %d elsewhere", d.Sym, got[i], prev)
		}
		env[d.Sym] = got[i]
	}
	return nil
}

// checkData verifies that a tensor holds exactly its shape's worth of
// values, in the slice of the declared dtype (f32 or i32) and only there:
// data in the other slice would be silently read as empty.
func checkData(dt ir.DType, t Tensor) error {
	var have, other int
	switch dt {
	case ir.F32:
		have, other = len(t.F32), len(t.I32)
	case ir.I32:
		have, other = len(t.I32), len(t.F32)
	default:
		return fmt.Errorf("inputs of type %s are not supported (f32 or i32)", dt)
	}
	if other != 0 || int64(have) != t.Len() {
		return fmt.Errorf("has %d %s values (and %d of the other type) for shape %v", have, dt, other, t.Shape)
	}
	return nil
}

// weight loads and dequantizes a weight once.
func (m *Machine) weight(v *ir.Value) (Tensor, error) {
	shape, err := v.Type.Shape.Bind(nil)
	if err != nil {
		return Tensor{}, fmt.Errorf("weight %q has a symbolic shape", v.Name())
	}
	t := Tensor{Shape: shape}
	if data, ok := m.weights[v]; ok {
		t.F32 = data
		return t, nil
	}
	if m.src == nil {
		return Tensor{}, fmt.Errorf("no weight source for %q", v.Name())
	}
	raw, err := m.src.WeightBytes(v.Name())
	if err != nil {
		return Tensor{}, err
	}
	n := t.Len()
	want, err := v.Type.DType.RowBytes(n)
	if err != nil {
		return Tensor{}, fmt.Errorf("weight %q: %w", v.Name(), err)
	}
	if int64(len(raw)) != want {
		return Tensor{}, fmt.Errorf("weight %q has %d bytes, %s%s needs %d", v.Name(), len(raw), v.Type.DType, v.Type.Shape, want)
	}
	t.F32 = make([]float32, n)
	if err := quant.Dequantize(v.Type.DType, raw, t.F32); err != nil {
		return Tensor{}, fmt.Errorf("weight %q: %w", v.Name(), err)
	}
	m.weights[v] = t.F32
	return t, nil
}

// folded computes a value that depends only on weights (a merged or rescaled
// weight) on first use and keeps it, as a backend would at load time.
func (m *Machine) folded(v *ir.Value, vals map[*ir.Value]Tensor) (Tensor, error) {
	shape, err := v.Type.Shape.Bind(nil)
	if err != nil {
		return Tensor{}, err
	}
	if data, ok := m.weights[v]; ok {
		return Tensor{Shape: shape, F32: data}, nil
	}
	args := make([]Tensor, len(v.Args))
	for i, a := range v.Args {
		args[i] = vals[a]
	}
	t, err := kernels[v.Op](v, args, shape)
	if err != nil {
		return Tensor{}, err
	}
	m.weights[v] = t.F32
	return t, nil
}
