package eval

import (
	"fmt"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// roundQ8 returns x with every row rounded to Q8_0 blocks and decoded
// again (ggml's quantize_row_q8_0: a scale amax/127 stored as f16, values
// roundf(x/scale)): what a kernel that multiplies 8-bit activations sees of
// a row. The rows' length must be a multiple of 32.
func roundQ8(x Tensor) (Tensor, error) {
	r, k := rows(x)
	n, err := ir.Q8_0.RowBytes(int64(k))
	if err != nil {
		return Tensor{}, fmt.Errorf("rounding activations to q8_0: %w", err)
	}
	out := Tensor{Shape: x.Shape, F32: make([]float32, len(x.F32))}
	blocks := make([]byte, n)
	for i := 0; i < r; i++ {
		src, dst := x.F32[i*k:(i+1)*k], out.F32[i*k:(i+1)*k]
		if err := quant.Quantize(ir.Q8_0, src, blocks); err != nil {
			return Tensor{}, err
		}
		if err := quant.Dequantize(ir.Q8_0, blocks, dst); err != nil {
			return Tensor{}, err
		}
	}
	return out, nil
}

// weightDType is the dtype of a matrix product's weight operand.
func weightDType(v *ir.Value) (ir.DType, bool) {
	if v.Op == ir.OpMatMul {
		return v.Args[1].Type.DType, true
	}
	p, err := ir.MatMulParts(v)
	if err != nil || p.W == nil {
		return 0, false
	}
	return p.W.Type.DType, true
}
