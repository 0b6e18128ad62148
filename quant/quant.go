// Package quant converts tensor data between ggml's storage formats and float32.
//
// Dequantization is bit-exact with ggml (llama.cpp's ggml-quants.c): every
// dequantize_row_* function is reproduced with the same float32 operations in
// the same order, so a weight decoded here equals, bit for bit, the weight the
// reference engine computes with. That is what lets the reference interpreter
// and the generated kernels be compared with the golden outputs exactly.
//
// Two things make that hold in Go:
//
//   - every product that is later added to something is wrapped in an explicit
//     float32(...) conversion. The Go spec lets the compiler fuse x*y+z into a
//     fused multiply-add (and it does on arm64, ppc64, s390x and amd64 with
//     GOAMD64=v3), which rounds once instead of twice; an explicit conversion
//     forces the product to be rounded, as ggml's scalar C code does.
//   - integer quants are converted to float32 before they meet a float32 scale,
//     as C's usual arithmetic conversions do, and the multiplication order of
//     the C expression is kept (d*sc*q is (d*sc)*q, not d*(sc*q)).
//
// Quantization follows ggml's quantize_row_*_ref functions, the ones that
// llama-quantize uses when no importance matrix is given, so files written with
// this package hold the same bytes the reference tools would write.
//
// Element order is GGUF's: a tensor is a sequence of blocks along ne[0], and a
// block's elements are in natural order once decoded (the interleaving inside
// a block is the format's business and is undone here).
package quant

import (
	"fmt"

	"github.com/minerva-llm/minerva/ir"
)

// codec holds the block functions of one dtype. Both work on whole slices whose
// lengths the caller has already checked: dequant gets exactly
// len(dst)/BlockSize blocks in src, quant the same the other way round.
type codec struct {
	dequant func(src []byte, dst []float32)
	quant   func(src []float32, dst []byte) // nil: no quantizer for this dtype
}

// codecs is indexed by dtype. The table is filled by each family's file in
// its init function, so adding a format touches one file only.
var codecs = map[ir.DType]codec{}

func register(d ir.DType, c codec) {
	if _, dup := codecs[d]; dup {
		panic("quant: dtype registered twice: " + d.String())
	}
	codecs[d] = c
}

// Supported reports whether Dequantize can decode dtype d.
func Supported(d ir.DType) bool {
	c, ok := codecs[d]
	return ok && c.dequant != nil
}

// CanQuantize reports whether Quantize can encode dtype d.
func CanQuantize(d ir.DType) bool {
	c, ok := codecs[d]
	return ok && c.quant != nil
}

// Dequantize decodes len(dst) elements of dtype d from src into dst. src must
// hold exactly d.RowBytes(len(dst)) bytes, and len(dst) must be a whole number
// of blocks. Unsupported dtypes and bad lengths are errors; Dequantize never
// panics on malformed input, because the bytes usually come straight from a
// model file.
func Dequantize(d ir.DType, src []byte, dst []float32) error {
	c, ok := codecs[d]
	if !ok || c.dequant == nil {
		return fmt.Errorf("quant: cannot dequantize %s", d)
	}
	if err := checkLen(d, len(src), len(dst)); err != nil {
		return err
	}
	c.dequant(src, dst)
	return nil
}

// Quantize encodes the float32 values of src as dtype d into dst, which must be
// exactly d.RowBytes(len(src)) bytes long. The encoding is the one of ggml's
// reference quantizers (quantize_row_*_ref), so it is deterministic and equal
// to what llama-quantize writes without an importance matrix.
func Quantize(d ir.DType, src []float32, dst []byte) error {
	c, ok := codecs[d]
	if !ok || c.quant == nil {
		return fmt.Errorf("quant: cannot quantize to %s", d)
	}
	if err := checkLen(d, len(dst), len(src)); err != nil {
		return err
	}
	c.quant(src, dst)
	return nil
}

// checkLen verifies that nbytes bytes of d hold exactly n elements.
func checkLen(d ir.DType, nbytes, n int) error {
	want, err := d.RowBytes(int64(n))
	if err != nil {
		return fmt.Errorf("quant: %w", err)
	}
	if int64(nbytes) != want {
		return fmt.Errorf("quant: %s: %d elements take %d bytes, got %d", d, n, want, nbytes)
	}
	return nil
}
