package safetensors

import "github.com/minerva-llm/minerva/ir"

// DType is a tensor's element type, as the header names it.
type DType string

// The dtypes of the format. Sub-byte types (F4, F6) are not listed: a file
// with one is refused as having an unknown dtype.
const (
	BOOL    DType = "BOOL"
	U8      DType = "U8"
	I8      DType = "I8"
	F8E4M3  DType = "F8_E4M3"
	F8E5M2  DType = "F8_E5M2"
	F8E8M0  DType = "F8_E8M0"
	U16     DType = "U16"
	I16     DType = "I16"
	F16     DType = "F16"
	BF16    DType = "BF16"
	U32     DType = "U32"
	I32     DType = "I32"
	F32     DType = "F32"
	U64     DType = "U64"
	I64     DType = "I64"
	F64     DType = "F64"
	unknown DType = ""
)

var dtypeSizes = map[DType]uint64{
	BOOL: 1, U8: 1, I8: 1, F8E4M3: 1, F8E5M2: 1, F8E8M0: 1,
	U16: 2, I16: 2, F16: 2, BF16: 2,
	U32: 4, I32: 4, F32: 4,
	U64: 8, I64: 8, F64: 8,
}

// Size is the bytes of one element; 0 for a dtype the format does not
// define.
func (d DType) Size() uint64 { return dtypeSizes[d] }

// Float returns the ir dtype of a float weight type the graph can read as
// stored (F32, F16, BF16); false for any other.
func (d DType) Float() (ir.DType, bool) {
	switch d {
	case F32:
		return ir.F32, true
	case F16:
		return ir.F16, true
	case BF16:
		return ir.BF16, true
	}
	return 0, false
}
