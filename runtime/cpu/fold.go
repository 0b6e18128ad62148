package cpu

import (
	"fmt"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// ensureF32 computes the float32 form of a constant (once).
func (c *cval) ensureF32() error {
	if c.f32 != nil || numel(c.shape) == 0 {
		return nil
	}
	if c.dt == ir.F32 {
		c.f32 = f32View(c.data)
		return nil
	}
	c.f32 = make([]float32, numel(c.shape))
	return quant.Dequantize(c.dt, c.data, c.f32)
}

func f32Const(shape []int64, f []float32) *cval {
	return &cval{dt: ir.F32, shape: shape, data: bytesOfF32(f), f32: f}
}

// fold computes a value that depends on weights only, at load time:
// concatenations of one dtype are byte concatenations (whole rows are whole
// blocks), reshapes share the bytes, and arithmetic (folded norm gains)
// happens in float32 exactly as the interpreter does it.
func (p *program) fold(v *ir.Value) (*cval, error) {
	shape, err := v.Type.Shape.Bind(nil)
	if err != nil {
		return nil, err
	}
	args := make([]*cval, len(v.Args))
	for i, a := range v.Args {
		args[i] = p.consts[p.index[a]]
		if args[i] == nil {
			return nil, fmt.Errorf("operand %v is not constant", a)
		}
	}
	switch v.Op {
	case ir.OpReshape:
		c := *args[0]
		c.shape = shape
		return &c, nil
	case ir.OpConcat:
		n := 0
		for _, a := range args {
			n += len(a.data)
		}
		buf := alignedBytes(n)
		off := 0
		for _, a := range args {
			off += copy(buf[off:], a.data)
		}
		return &cval{dt: args[0].dt, shape: shape, data: buf}, nil
	case ir.OpMul, ir.OpAdd:
		for _, a := range args {
			if err := a.ensureF32(); err != nil {
				return nil, err
			}
		}
		a, b := args[0].f32, args[1].f32
		out := make([]float32, len(a))
		nb := len(b)
		if v.Op == ir.OpMul {
			for i, x := range a {
				out[i] = x * b[i%nb]
			}
		} else {
			for i, x := range a {
				out[i] = x + b[i%nb]
			}
		}
		return f32Const(shape, out), nil
	}
	return nil, fmt.Errorf("op %s on weights is not supported", v.Op)
}
