package eval

import (
	"fmt"
	"math"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// kernel computes one op. args are the operand tensors; shape is the result
// shape with symbols bound.
type kernel func(v *ir.Value, args []Tensor, shape []int64) (Tensor, error)

var kernels map[ir.Op]kernel

// Supports reports whether the interpreter gives op a meaning (leaf ops are
// the graph's inputs, weights and states).
func Supports(op ir.Op) bool {
	_, ok := kernels[op]
	return ok || op.IsLeaf()
}

func init() {
	kernels = map[ir.Op]kernel{
		ir.OpEmbed:     embed,
		ir.OpRMSNorm:   rmsnorm,
		ir.OpAdd:       binary(func(a, b float32) float32 { return a + b }),
		ir.OpMul:       binary(func(a, b float32) float32 { return a * b }),
		ir.OpSiLU:      unary(silu),
		ir.OpGELU:      unary(gelu),
		ir.OpSoftmax:   softmax,
		ir.OpRoPE:      ropeOp,
		ir.OpKVWrite:   kvwrite,
		ir.OpAttention: attention,
		ir.OpReshape:   reshape,
	}
	registerFused()
	registerMoE()
}

func newF32(shape []int64) Tensor {
	t := Tensor{Shape: shape}
	t.F32 = make([]float32, t.Len())
	return t
}

// rows views a tensor as [rows, last dim].
func rows(t Tensor) (int, int) {
	if len(t.Shape) == 0 {
		return 1, 1
	}
	w := int(t.Shape[len(t.Shape)-1])
	if w == 0 {
		return 0, 0
	}
	return len(t.F32) / w, w
}

func embed(_ *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
	table, ids := args[0], args[1]
	n, d := int(table.Shape[0]), int(table.Shape[1])
	out := newF32(shape)
	for i, id := range ids.I32 {
		if id < 0 || int(id) >= n {
			return Tensor{}, fmt.Errorf("token id %d at position %d is outside the vocabulary (%d)", id, i, n)
		}
		copy(out.F32[i*d:(i+1)*d], table.F32[int(id)*d:(int(id)+1)*d])
	}
	return out, nil
}

func rmsnorm(v *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
	x := args[0]
	eps := v.Attrs.Float("eps", 0)
	out := newF32(shape)
	r, w := rows(x)
	for i := 0; i < r; i++ {
		row := x.F32[i*w : (i+1)*w]
		var sum float64
		for _, e := range row {
			sum += float64(e) * float64(e)
		}
		scale := 1 / math.Sqrt(sum/float64(w)+eps)
		o := out.F32[i*w : (i+1)*w]
		for j, e := range row {
			o[j] = float32(float64(e) * scale)
			if len(args) == 2 {
				o[j] *= args[1].F32[j]
			}
		}
	}
	return out, nil
}

// matmulOp is the matmul kernel, rounding x to Q8_0 first when round is set.
func matmulOp(round bool) kernel {
	if !round {
		return matmul
	}
	return func(v *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
		x, err := roundQ8(args[0])
		if err != nil {
			return Tensor{}, err
		}
		return matmul(v, append([]Tensor{x}, args[1:]...), shape)
	}
}

func matmul(_ *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
	x, w := args[0], args[1]
	n, k := int(w.Shape[0]), int(w.Shape[1])
	out := newF32(shape)
	r, _ := rows(x)
	for i := 0; i < r; i++ {
		xr := x.F32[i*k : (i+1)*k]
		for j := 0; j < n; j++ {
			wr := w.F32[j*k : (j+1)*k]
			var acc float64
			for t, e := range xr {
				acc += float64(e) * float64(wr[t])
			}
			if len(args) == 3 {
				acc += float64(args[2].F32[j])
			}
			out.F32[i*n+j] = float32(acc)
		}
	}
	return out, nil
}

func binary(f func(a, b float32) float32) kernel {
	return func(_ *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
		a, b := args[0], args[1]
		out := newF32(shape)
		nb := len(b.F32)
		for i, e := range a.F32 {
			out.F32[i] = f(e, b.F32[i%nb])
		}
		return out, nil
	}
}

func unary(f func(float64) float64) kernel {
	return func(_ *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
		out := newF32(shape)
		for i, e := range args[0].F32 {
			out.F32[i] = float32(f(float64(e)))
		}
		return out, nil
	}
}

func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

func gelu(x float64) float64 {
	const c = 0.7978845608028654 // sqrt(2/π)
	return 0.5 * x * (1 + math.Tanh(c*(x+0.044715*x*x*x)))
}

func softmax(_ *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
	x := args[0]
	out := newF32(shape)
	r, w := rows(x)
	for i := 0; i < r; i++ {
		softmaxRow(x.F32[i*w:(i+1)*w], out.F32[i*w:(i+1)*w])
	}
	return out, nil
}

func softmaxRow(in, out []float32) {
	m := math.Inf(-1)
	for _, e := range in {
		m = math.Max(m, float64(e))
	}
	var sum float64
	for _, e := range in {
		sum += math.Exp(float64(e) - m)
	}
	for j, e := range in {
		out[j] = float32(math.Exp(float64(e)-m) / sum)
	}
}

func reshape(_ *ir.Value, args []Tensor, shape []int64) (Tensor, error) {
	t := args[0]
	t.Shape = shape
	return t, nil
}

func kvwrite(v *ir.Value, args []Tensor, _ []int64) (Tensor, error) {
	cache, x, pos := args[0], args[1], args[2]
	c, w := int(cache.Shape[0]), int(cache.Shape[1])
	dt := v.Args[0].Type.DType
	var blocks []byte
	if dt == ir.Q8_0 {
		n, err := dt.RowBytes(int64(w))
		if err != nil {
			return Tensor{}, err
		}
		blocks = make([]byte, n)
	}
	for i, p := range pos.I32 {
		if p < 0 || int(p) >= c {
			return Tensor{}, fmt.Errorf("position %d is outside the KV cache (context %d)", p, c)
		}
		dst := cache.F32[int(p)*w : (int(p)+1)*w]
		copy(dst, x.F32[i*w:(i+1)*w])
		switch dt {
		case ir.F16:
			// The cache stores f16: keep exactly what a real f16 buffer would hold.
			for j := range dst {
				dst[j] = quant.F16ToF32(quant.F32ToF16(dst[j]))
			}
		case ir.Q8_0:
			// The row quantized as it is written (ggml's quantize_row_q8_0),
			// kept as its decoded values.
			if err := quant.Quantize(dt, dst, blocks); err != nil {
				return Tensor{}, err
			}
			if err := quant.Dequantize(dt, blocks, dst); err != nil {
				return Tensor{}, err
			}
		}
	}
	return cache, nil
}
