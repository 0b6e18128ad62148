package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/minerva-llm/minerva/ir"
)

// MLX affine quantization (ir.MLXQ4G32 … ir.MLXQ8G128): a block is one
// group, {f32 scale; f32 bias; u8 q[G·bits/8]}, q packed as MLX packs it
// (least significant bits first). The value is scale·q + bias computed
// exactly and rounded once to float32, which is what MLX's kernels give
// (they compile it to an FMA) and what the reference's GGUF twins hold: for
// the 16-bit scales mlx-lm writes, scale·q is exact in float32 anyway.

func init() {
	for _, bits := range []int{4, 8} {
		for _, group := range []int{32, 64, 128} {
			d, _ := ir.MLXAffine(bits, group)
			bits, group := bits, group
			register(d, codec{
				dequant: func(src []byte, dst []float32) { dequantMLX(bits, group, src, dst) },
				quant:   func(src []float32, dst []byte) { quantMLX(bits, group, src, dst) },
			})
		}
	}
}

// MLXDequantGroup decodes one block of an MLX affine dtype of the given bits
// into dst (its group's length). It is the one decoder the CPU kernels and
// Dequantize share.
func MLXDequantGroup(bits int, b []byte, dst []float32) {
	scale := math.Float32frombits(binary.LittleEndian.Uint32(b))
	bias := math.Float32frombits(binary.LittleEndian.Uint32(b[4:]))
	q := b[8:]
	// With at most 16 significant bits in the scale (f16 or bf16, as
	// mlx-lm stores them) scale·q, q < 256, is exact in float32, so one
	// rounded addition is the FMA; a full f32 scale takes the exact path.
	exact := math.Float32bits(scale)&0xff == 0
	switch bits {
	case 4:
		q = q[:len(dst)/2]
		for j, c := range q {
			lo, hi := float32(c&15), float32(c>>4)
			if exact {
				dst[2*j] = float32(scale*lo) + bias
				dst[2*j+1] = float32(scale*hi) + bias
			} else {
				dst[2*j] = FMA32(scale, lo, bias)
				dst[2*j+1] = FMA32(scale, hi, bias)
			}
		}
	case 8:
		q = q[:len(dst)]
		for j, c := range q {
			if exact {
				dst[j] = float32(scale*float32(c)) + bias
			} else {
				dst[j] = FMA32(scale, float32(c), bias)
			}
		}
	}
}

func dequantMLX(bits, group int, src []byte, dst []float32) {
	bb := 8 + group*bits/8
	for i := 0; i < len(dst)/group; i++ {
		MLXDequantGroup(bits, src[i*bb:(i+1)*bb], dst[i*group:(i+1)*group])
	}
}

// FMA32 is a·b + c computed exactly and rounded once to float32 (C's
// fmaf). The product is exact in float64; the sum is rounded to odd
// (TwoSum gives its error), from which the rounding to float32, 29 bits
// shorter, is correct.
func FMA32(a, b, c float32) float32 {
	p := float64(float64(a) * float64(b))
	z := float64(c)
	s := p + z
	bb := s - p
	e := (p - (s - bb)) + (z - bb)
	if e != 0 && math.Float64bits(s)&1 == 0 {
		if e > 0 {
			s = math.Nextafter(s, math.Inf(1))
		} else {
			s = math.Nextafter(s, math.Inf(-1))
		}
	}
	return float32(s)
}

// quantMLX is mlx.core.quantize (mode affine) as mlx-lm runs it on a bf16
// model (mlx/backend/cpu/quantized.cpp, README-hf.md): per group in
// float32, the edge of larger magnitude maps to q = 0 exactly, the quants
// are rounded half to even with the float32 scale and bias, and those are
// then stored rounded to bf16, as mlx-lm writes them. So Quantize gives the
// blocks an MLX directory of the same values holds.
func quantMLX(bits, group int, src []float32, dst []byte) {
	bb := 8 + group*bits/8
	bins := float32(int(1)<<bits - 1)
	for i := 0; i < len(src)/group; i++ {
		w := src[i*group : (i+1)*group]
		b := dst[i*bb : (i+1)*bb]
		wmin, wmax := float32(math.Inf(1)), float32(math.Inf(-1))
		for _, x := range w {
			wmin, wmax = min(wmin, x), max(wmax, x)
		}
		mask := abs32(wmin) > abs32(wmax)
		scale := max(float32(wmax-wmin)/bins, 1e-7)
		edge := wmax
		if mask {
			edge = wmin
		} else {
			scale = -scale
		}
		q0 := float32(math.RoundToEven(float64(edge / scale)))
		var bias float32
		if q0 != 0 {
			scale, bias = edge/q0, edge
		}
		clear(b[8:])
		for j, x := range w {
			q := float32(math.RoundToEven(float64(float32(x-bias) / scale)))
			v := uint8(max(0, min(bins, q)))
			b[8+j*bits/8] |= v << (j * bits % 8)
		}
		binary.LittleEndian.PutUint32(b, math.Float32bits(BF16ToF32(F32ToBF16(scale))))
		binary.LittleEndian.PutUint32(b[4:], math.Float32bits(BF16ToF32(F32ToBF16(bias))))
	}
}

// MLXScaleType is the dtype of an MLX directory's scales or biases tensor.
type MLXScaleType int

const (
	MLXScaleF32 MLXScaleType = iota
	MLXScaleF16
	MLXScaleBF16
)

func (t MLXScaleType) size() int {
	if t == MLXScaleF32 {
		return 4
	}
	return 2
}

func (t MLXScaleType) read(b []byte, i int) float32 {
	switch t {
	case MLXScaleF16:
		return F16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
	case MLXScaleBF16:
		return BF16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

// PackMLXAffine repacks MLX affine tensors as mlx-lm stores them, for rows
// of n elements, into blocks of dtype d (an MLX affine dtype): weight is
// the U32 tensor's bytes ([rows, n·bits/32] words, little-endian), scales
// and biases the [rows, n/group] tensors in the given types. The bytes are
// read as bytes: MLX writes shards without alignment. It checks every
// length and returns an error naming what disagrees.
func PackMLXAffine(d ir.DType, rows, n int, weight []byte, scales []byte, st MLXScaleType, biases []byte, bt MLXScaleType) ([]byte, error) {
	bits, group, ok := d.MLXAffineParams()
	if !ok || rows < 0 || n <= 0 || n%group != 0 {
		return nil, PackMLXAffineInto(nil, d, rows, n, weight, scales, st, biases, bt) // the error
	}
	out := make([]byte, rows*(n/group)*(8+group*bits/8))
	if err := PackMLXAffineInto(out, d, rows, n, weight, scales, st, biases, bt); err != nil {
		return nil, err
	}
	return out, nil
}

// PackMLXAffineInto is PackMLXAffine into dst, which must hold the rows'
// blocks exactly: a caller repacks a large tensor a slice of rows at a
// time into one buffer.
func PackMLXAffineInto(out []byte, d ir.DType, rows, n int, weight []byte, scales []byte, st MLXScaleType, biases []byte, bt MLXScaleType) error {
	bits, group, ok := d.MLXAffineParams()
	if !ok {
		return fmt.Errorf("quant: %s is not an MLX affine dtype", d)
	}
	if rows < 0 || n <= 0 || n%group != 0 {
		return fmt.Errorf("quant: %s: a row of %d elements is not a whole number of groups of %d", d, n, group)
	}
	groups := rows * (n / group)
	qb := group * bits / 8
	bb := 8 + qb
	switch {
	case len(weight) != groups*qb:
		return fmt.Errorf("quant: %s: weight is %d bytes, %d rows of %d take %d", d, len(weight), rows, n, groups*qb)
	case len(scales) != groups*st.size():
		return fmt.Errorf("quant: %s: scales are %d bytes, want %d", d, len(scales), groups*st.size())
	case len(biases) != groups*bt.size():
		return fmt.Errorf("quant: %s: biases are %d bytes, want %d", d, len(biases), groups*bt.size())
	case len(out) != groups*bb:
		return fmt.Errorf("quant: %s: the output is %d bytes, %d rows of %d take %d", d, len(out), rows, n, groups*bb)
	}
	for g := 0; g < groups; g++ {
		b := out[g*bb : (g+1)*bb]
		binary.LittleEndian.PutUint32(b, math.Float32bits(st.read(scales, g)))
		binary.LittleEndian.PutUint32(b[4:], math.Float32bits(bt.read(biases, g)))
		copy(b[8:], weight[g*qb:(g+1)*qb])
	}
	return nil
}
