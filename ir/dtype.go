package ir

import "fmt"

// DType is the element type of a value. The numbering follows ggml's type ids,
// which are stable and shared by GGUF files, so a weight's dtype needs no
// translation table anywhere in the project. Types that only the IR uses
// are numbered from 1000 (the MLX affine types below).
type DType uint32

const (
	F32   DType = 0
	F16   DType = 1
	Q4_0  DType = 2
	Q4_1  DType = 3
	Q5_0  DType = 6
	Q5_1  DType = 7
	Q8_0  DType = 8
	Q8_1  DType = 9
	Q2_K  DType = 10
	Q3_K  DType = 11
	Q4_K  DType = 12
	Q5_K  DType = 13
	Q6_K  DType = 14
	Q8_K  DType = 15
	I8    DType = 24
	I16   DType = 25
	I32   DType = 26
	I64   DType = 27
	F64   DType = 28
	BF16  DType = 30
	MXFP4 DType = 39
)

// MLX affine quantization (mlx.core.quantize, mode "affine"), as this
// project stores it: one dtype per (bits, group size), because the group
// size fixes the block geometry every backend walks. A block is one group
// of G elements,
//
//	block_mlx_qB_gG {f32 scale; f32 bias; u8 q[G·B/8]}
//
// with q exactly MLX's packed bytes: element k of each little-endian u32
// word at bits [k·B, (k+1)·B), least significant first (for 4 bits, byte j
// holds element 2j in its low nibble and 2j+1 in its high one). The value
// is w = scale·q + bias, computed exactly and rounded once to float32 (the
// FMA MLX's kernels compile to; with a 16-bit scale, as mlx-lm writes,
// scale·q is exact and it is float32(scale·q) + bias). MLX keeps the
// scales and biases in tensors of their own (f16, bf16 or f32); a
// directory's weight is repacked into these blocks once at load, the
// scales and biases widened to f32 exactly. These ids are the project's
// own: no GGUF file has them.
const (
	MLXQ4G32  DType = 1000
	MLXQ4G64  DType = 1001
	MLXQ4G128 DType = 1002
	MLXQ8G32  DType = 1003
	MLXQ8G64  DType = 1004
	MLXQ8G128 DType = 1005
)

// mlxAffine lists the MLX affine dtypes with their bits and group size.
var mlxAffine = []struct {
	d           DType
	bits, group int
}{
	{MLXQ4G32, 4, 32}, {MLXQ4G64, 4, 64}, {MLXQ4G128, 4, 128},
	{MLXQ8G32, 8, 32}, {MLXQ8G64, 8, 64}, {MLXQ8G128, 8, 128},
}

// MLXAffine returns the dtype of MLX affine quantization with the given
// bits and group size; ok is false for a combination without one.
func MLXAffine(bits, group int) (d DType, ok bool) {
	for _, m := range mlxAffine {
		if m.bits == bits && m.group == group {
			return m.d, true
		}
	}
	return 0, false
}

// MLXAffineParams returns the bits and group size of an MLX affine dtype;
// ok is false for any other dtype.
func (d DType) MLXAffineParams() (bits, group int, ok bool) {
	for _, m := range mlxAffine {
		if m.d == d {
			return m.bits, m.group, true
		}
	}
	return 0, 0, false
}

// dtypeInfo describes the storage of one dtype: values come in blocks of
// BlockSize elements taking BlockBytes bytes (1 element per block for plain types).
type dtypeInfo struct {
	name       string
	blockSize  int
	blockBytes int
	quantized  bool
}

var dtypes = map[DType]dtypeInfo{
	F32:   {"f32", 1, 4, false},
	F16:   {"f16", 1, 2, false},
	BF16:  {"bf16", 1, 2, false},
	F64:   {"f64", 1, 8, false},
	I8:    {"i8", 1, 1, false},
	I16:   {"i16", 1, 2, false},
	I32:   {"i32", 1, 4, false},
	I64:   {"i64", 1, 8, false},
	Q4_0:  {"q4_0", 32, 18, true},
	Q4_1:  {"q4_1", 32, 20, true},
	Q5_0:  {"q5_0", 32, 22, true},
	Q5_1:  {"q5_1", 32, 24, true},
	Q8_0:  {"q8_0", 32, 34, true},
	Q8_1:  {"q8_1", 32, 36, true},
	Q2_K:  {"q2_k", 256, 84, true},
	Q3_K:  {"q3_k", 256, 110, true},
	Q4_K:  {"q4_k", 256, 144, true},
	Q5_K:  {"q5_k", 256, 176, true},
	Q6_K:  {"q6_k", 256, 210, true},
	Q8_K:  {"q8_k", 256, 292, true},
	MXFP4: {"mxfp4", 32, 17, true},
}

func init() {
	for _, m := range mlxAffine {
		dtypes[m.d] = dtypeInfo{fmt.Sprintf("mlx_q%d_g%d", m.bits, m.group), m.group, 8 + m.group*m.bits/8, true}
	}
}

// Known reports whether d is a dtype this project understands.
func (d DType) Known() bool { _, ok := dtypes[d]; return ok }

// String returns the lower-case name used in the IR text form ("f32", "q4_k").
func (d DType) String() string {
	if info, ok := dtypes[d]; ok {
		return info.name
	}
	return fmt.Sprintf("dtype(%d)", uint32(d))
}

// BlockSize is the number of elements in one storage block (1 for plain types).
func (d DType) BlockSize() int { return dtypes[d].blockSize }

// BlockBytes is the number of bytes one storage block takes.
func (d DType) BlockBytes() int { return dtypes[d].blockBytes }

// Quantized reports whether d stores values in scaled blocks.
func (d DType) Quantized() bool { return dtypes[d].quantized }

// IsCacheType reports whether d is a KV cache element type: f32, f16 or
// q8_0 (blocks of 32, a row quantized as it is written).
func IsCacheType(d DType) bool { return d == F32 || d == F16 || d == Q8_0 }

// IsFloat reports whether d is a plain (unquantized) floating-point type.
func (d DType) IsFloat() bool { return d == F32 || d == F16 || d == BF16 || d == F64 }

// RowBytes returns the bytes taken by n elements of d, or an error when n is
// not a whole number of blocks or the size overflows.
func (d DType) RowBytes(n int64) (int64, error) {
	info, ok := dtypes[d]
	if !ok {
		return 0, fmt.Errorf("unknown dtype %d", uint32(d))
	}
	if n < 0 {
		return 0, fmt.Errorf("negative element count %d", n)
	}
	if n%int64(info.blockSize) != 0 {
		return 0, fmt.Errorf("%s: %d elements is not a multiple of the block size %d", info.name, n, info.blockSize)
	}
	blocks := n / int64(info.blockSize)
	if blocks > (1<<62)/int64(info.blockBytes) {
		return 0, fmt.Errorf("%s: %d elements overflow", info.name, n)
	}
	return blocks * int64(info.blockBytes), nil
}

// ParseDType maps a name from the IR text form back to its DType. It accepts
// upper-case names too ("Q4_K", "F32"), as GGUF tools print them.
func ParseDType(name string) (DType, bool) {
	for d, info := range dtypes {
		if info.name == name || equalFold(info.name, name) {
			return d, true
		}
	}
	return 0, false
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
