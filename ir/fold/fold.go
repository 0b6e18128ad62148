// Package fold defines once what it means to compute, at load, a value
// that depends on weights alone (ir.ConstValues: merged q/k/v rows, norm
// gains folded into a matrix). The CPU backend and the GPU runtimes both
// fold through it, so a folded weight has the same bytes everywhere; the
// reference interpreter computes the same values with its own f32 kernels.
//
//   - reshape shares its operand's bytes;
//   - concat of operands of one dtype concatenates their bytes (whole rows
//     are whole blocks of any quantized type);
//   - mul and add compute in float32 into an f32 result, the right operand
//     cycling over the left one's leading rows (a gain broadcast over a
//     matrix's rows).
package fold

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// Supports reports whether op can be folded at load.
func Supports(op ir.Op) bool {
	switch op {
	case ir.OpReshape, ir.OpConcat, ir.OpMul, ir.OpAdd:
		return true
	}
	return false
}

// Concat checks that v's operands share one dtype and returns the bytes
// of their concatenation, written into alloc(n) (nil: make).
func Concat(v *ir.Value, args [][]byte, alloc func(n int) []byte) ([]byte, error) {
	n := 0
	for i, a := range v.Args {
		if a.Type.DType != v.Args[0].Type.DType {
			return nil, fmt.Errorf("concat of %s and %s cannot be folded at load", v.Args[0].Type.DType, a.Type.DType)
		}
		n += len(args[i])
	}
	var out []byte
	if alloc != nil {
		out = alloc(n)[:0]
	} else {
		out = make([]byte, 0, n)
	}
	for _, a := range args {
		out = append(out, a...)
	}
	return out, nil
}

// Elementwise is mul or add of a by b, b cycling over a, in float32.
func Elementwise(op ir.Op, a, b []float32) ([]float32, error) {
	if len(b) == 0 || len(a)%len(b) != 0 {
		return nil, fmt.Errorf("folding %s: %d elements by %d", op, len(a), len(b))
	}
	out := make([]float32, len(a))
	switch op {
	case ir.OpMul:
		for i, x := range a {
			out[i] = x * b[i%len(b)]
		}
	case ir.OpAdd:
		for i, x := range a {
			out[i] = x + b[i%len(b)]
		}
	default:
		return nil, fmt.Errorf("cannot fold %s elementwise", op)
	}
	return out, nil
}

// Bytes folds v from its operands' bytes: the bytes of the result, f32
// for mul and add.
func Bytes(v *ir.Value, args [][]byte) ([]byte, error) {
	switch v.Op {
	case ir.OpReshape:
		return args[0], nil
	case ir.OpConcat:
		return Concat(v, args, nil)
	case ir.OpMul, ir.OpAdd:
		fs := make([][]float32, 2)
		for i, a := range v.Args[:2] {
			shape, err := a.Type.Shape.Bind(nil)
			if err != nil {
				return nil, err
			}
			n := int64(1)
			for _, d := range shape {
				n *= d
			}
			fs[i] = make([]float32, n)
			if err := quant.Dequantize(a.Type.DType, args[i], fs[i]); err != nil {
				return nil, fmt.Errorf("folding %v: %w", v, err)
			}
		}
		r, err := Elementwise(v.Op, fs[0], fs[1])
		if err != nil {
			return nil, err
		}
		out := make([]byte, 4*len(r))
		for i, x := range r {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot fold %s at load", v.Op)
}
