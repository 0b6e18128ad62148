package gguf

import "strconv"

// ValueType is the type tag of a metadata value, as numbered in the GGUF spec.
type ValueType uint32

const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12

	// TypeInvalid is what the zero Value (and an out-of-range Index) reports.
	// It is never read from or written to a file.
	TypeInvalid ValueType = 0xFFFFFFFF
)

var valueTypeNames = [...]string{
	TypeUint8:   "uint8",
	TypeInt8:    "int8",
	TypeUint16:  "uint16",
	TypeInt16:   "int16",
	TypeUint32:  "uint32",
	TypeInt32:   "int32",
	TypeFloat32: "float32",
	TypeBool:    "bool",
	TypeString:  "string",
	TypeArray:   "array",
	TypeUint64:  "uint64",
	TypeInt64:   "int64",
	TypeFloat64: "float64",
}

// String returns the spec's name for t ("uint32", "array"), or "type(N)".
func (t ValueType) String() string {
	if t.Valid() {
		return valueTypeNames[t]
	}
	if t == TypeInvalid {
		return "invalid"
	}
	return "type(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// Valid reports whether t is one of the thirteen types a file may contain.
func (t ValueType) Valid() bool { return t <= TypeFloat64 }

// fixedSize is the encoded size of one value of a fixed-size type, or 0 for
// strings, arrays and unknown types.
func (t ValueType) fixedSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes one encoded value of type t can take. Counts
// read from a file are checked against remaining/minSize before anything is
// allocated, so a forged count can never cost more memory than a small
// multiple of the file's own size.
func (t ValueType) minSize() int {
	switch t {
	case TypeString:
		return 8 // uint64 length, empty body
	case TypeArray:
		return 12 // uint32 element type + uint64 count, no elements
	}
	return t.fixedSize()
}

func (t ValueType) isInteger() bool {
	switch t {
	case TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeUint64, TypeInt64:
		return true
	}
	return false
}

func (t ValueType) isSigned() bool {
	return t == TypeInt8 || t == TypeInt16 || t == TypeInt32 || t == TypeInt64
}
