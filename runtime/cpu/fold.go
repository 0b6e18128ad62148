package cpu

import (
	"fmt"

	"github.com/minerva-llm/minerva/internal/mmap"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/fold"
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
	return &cval{dt: ir.F32, shape: shape, data: asBytes(f), f32: f}
}

// fold computes a value that depends on weights only, at load time, as
// ir/fold defines it; a reshape keeps its operand's decoded floats too.
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
		c.mem = nil // the operand owns the bytes
		return &c, nil
	case ir.OpConcat:
		raw := make([][]byte, len(args))
		for i, a := range args {
			raw[i] = a.data
		}
		var mem *offHeap
		buf, err := fold.Concat(v, raw, func(n int) []byte {
			// Off the heap: a third of a llama's weights pass through
			// these copies, each freed once packed (offheap.go).
			b, m, err := offHeapSlice[byte](n, false)
			if err != nil {
				return alignedBytes(n)
			}
			mem = m
			p.mem.add(m)
			return b
		})
		if err != nil {
			return nil, err
		}
		for i, a := range v.Args {
			if p.readBy[p.index[a]] == foldedOnly {
				// Copied; another fold that reads it faults it in again.
				mmap.ReleaseMapped(args[i].data)
			}
		}
		return &cval{dt: args[0].dt, shape: shape, data: buf, mem: mem}, nil
	case ir.OpMul, ir.OpAdd:
		for _, a := range args {
			if err := a.ensureF32(); err != nil {
				return nil, err
			}
		}
		out, err := fold.Elementwise(v.Op, args[0].f32, args[1].f32)
		if err != nil {
			return nil, err
		}
		return f32Const(shape, out), nil
	}
	return nil, fmt.Errorf("op %s on weights is not supported", v.Op)
}
