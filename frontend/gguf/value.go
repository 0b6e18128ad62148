package gguf

import (
	"encoding/binary"
	"math"
)

// Value is one metadata value: a scalar, a string, or an array (whose elements
// may themselves be arrays). Values are immutable; the zero Value is invalid
// and reports TypeInvalid.
type Value struct {
	typ  ValueType
	ok   bool
	bits uint64     // scalars: unsigned value, sign-extended signed value, float bits, or 0/1
	str  string     // TypeString
	arr  *arrayData // TypeArray
}

// arrayData keeps arrays compact: a 32k-entry score table is one []byte, not
// 32k Values, so memory stays a small multiple of the file even for hostile
// arrays of millions of one-byte elements.
type arrayData struct {
	elem ValueType
	n    int
	raw  []byte   // fixed-size elements, little endian, n*elem.fixedSize() bytes
	strs []string // TypeString elements
	vals []Value  // TypeArray elements
	err  string   // why Array could not build this array; reported by the Writer
}

func scalar(t ValueType, bits uint64) Value { return Value{typ: t, ok: true, bits: bits} }

// Uint8 makes a uint8 value.
func Uint8(x uint8) Value { return scalar(TypeUint8, uint64(x)) }

// Int8 makes an int8 value.
func Int8(x int8) Value { return scalar(TypeInt8, uint64(int64(x))) }

// Uint16 makes a uint16 value.
func Uint16(x uint16) Value { return scalar(TypeUint16, uint64(x)) }

// Int16 makes an int16 value.
func Int16(x int16) Value { return scalar(TypeInt16, uint64(int64(x))) }

// Uint32 makes a uint32 value.
func Uint32(x uint32) Value { return scalar(TypeUint32, uint64(x)) }

// Int32 makes an int32 value.
func Int32(x int32) Value { return scalar(TypeInt32, uint64(int64(x))) }

// Uint64 makes a uint64 value.
func Uint64(x uint64) Value { return scalar(TypeUint64, x) }

// Int64 makes an int64 value.
func Int64(x int64) Value { return scalar(TypeInt64, uint64(x)) }

// Float32 makes a float32 value.
func Float32(x float32) Value { return scalar(TypeFloat32, uint64(math.Float32bits(x))) }

// Float64 makes a float64 value.
func Float64(x float64) Value { return scalar(TypeFloat64, math.Float64bits(x)) }

// Bool makes a bool value.
func Bool(x bool) Value {
	if x {
		return scalar(TypeBool, 1)
	}
	return scalar(TypeBool, 0)
}

// String makes a string value.
func String(s string) Value { return Value{typ: TypeString, ok: true, str: s} }

// Array makes an array of elem-typed values. Every value must have type elem;
// if one does not (or elem is not a valid type), the result is an array that
// the Writer refuses with an error naming the first bad element.
func Array(elem ValueType, vals []Value) Value {
	a := &arrayData{elem: elem, n: len(vals)}
	switch {
	case !elem.Valid():
		a.err = "array element type " + elem.String() + " is not a GGUF value type"
	case elem == TypeString:
		a.strs = make([]string, len(vals))
		for i, v := range vals {
			if v.Type() != TypeString {
				a.err = mismatch(i, v, elem)
				break
			}
			a.strs[i] = v.str
		}
	case elem == TypeArray:
		a.vals = make([]Value, len(vals))
		for i, v := range vals {
			if v.Type() != TypeArray {
				a.err = mismatch(i, v, elem)
				break
			}
			a.vals[i] = v
		}
	default:
		size := elem.fixedSize()
		a.raw = make([]byte, 0, size*len(vals))
		for i, v := range vals {
			if v.Type() != elem {
				a.err = mismatch(i, v, elem)
				break
			}
			a.raw = appendScalar(a.raw, elem, v.bits)
		}
	}
	return a.value()
}

func mismatch(i int, v Value, elem ValueType) string {
	return "array element " + itoa(i) + " has type " + v.Type().String() + ", want " + elem.String()
}

// value wraps a, normalising empty arrays so that constructed and parsed
// arrays compare equal.
func (a *arrayData) value() Value {
	if a.n == 0 {
		a.raw, a.strs, a.vals = nil, nil, nil
	}
	return Value{typ: TypeArray, ok: true, arr: a}
}

// StringArray makes an array of strings.
func StringArray(ss []string) Value {
	return (&arrayData{elem: TypeString, n: len(ss), strs: append([]string(nil), ss...)}).value()
}

// Float32Array makes an array of float32.
func Float32Array(xs []float32) Value {
	raw := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	return (&arrayData{elem: TypeFloat32, n: len(xs), raw: raw}).value()
}

// Int32Array makes an array of int32.
func Int32Array(xs []int32) Value {
	raw := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(x))
	}
	return (&arrayData{elem: TypeInt32, n: len(xs), raw: raw}).value()
}

// Type returns the value's type, or TypeInvalid for the zero Value.
func (v Value) Type() ValueType {
	if !v.ok {
		return TypeInvalid
	}
	return v.typ
}

// ElemType returns the element type of an array, or TypeInvalid for non-arrays.
func (v Value) ElemType() ValueType {
	if v.arr == nil {
		return TypeInvalid
	}
	return v.arr.elem
}

// Len returns the number of elements of an array (0 for non-arrays).
func (v Value) Len() int {
	if v.arr == nil {
		return 0
	}
	return v.arr.n
}

// Index returns element i of an array, or the zero Value when v is not an
// array or i is out of range.
func (v Value) Index(i int) Value {
	a := v.arr
	if a == nil || i < 0 || i >= a.n || a.err != "" {
		return Value{}
	}
	switch a.elem {
	case TypeString:
		return String(a.strs[i])
	case TypeArray:
		return a.vals[i]
	}
	size := a.elem.fixedSize()
	return scalar(a.elem, decodeScalar(a.elem, a.raw[i*size:(i+1)*size]))
}

// Int returns an integer value of any integer type as int64; false for
// non-integers and uint64 values above MaxInt64.
func (v Value) Int() (int64, bool) {
	if !v.ok || !v.typ.isInteger() {
		return 0, false
	}
	if !v.typ.isSigned() && v.bits > math.MaxInt64 {
		return 0, false
	}
	return int64(v.bits), true
}

// Uint returns a non-negative integer value of any integer type as uint64.
func (v Value) Uint() (uint64, bool) {
	if !v.ok || !v.typ.isInteger() {
		return 0, false
	}
	if v.typ.isSigned() && int64(v.bits) < 0 {
		return 0, false
	}
	return v.bits, true
}

// Float returns a float32 or float64 value as float64; integers are converted
// too (large 64-bit integers lose precision), since GGUF writers are not
// consistent about storing e.g. rope scales as floats.
func (v Value) Float() (float64, bool) {
	if !v.ok {
		return 0, false
	}
	switch {
	case v.typ == TypeFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), true
	case v.typ == TypeFloat64:
		return math.Float64frombits(v.bits), true
	case v.typ.isSigned():
		return float64(int64(v.bits)), true
	case v.typ.isInteger():
		return float64(v.bits), true
	}
	return 0, false
}

// Bool returns a bool value.
func (v Value) Bool() (bool, bool) {
	if !v.ok || v.typ != TypeBool {
		return false, false
	}
	return v.bits != 0, true
}

// Str returns a string value.
func (v Value) Str() (string, bool) {
	if !v.ok || v.typ != TypeString {
		return "", false
	}
	return v.str, true
}

// Strings returns a copy of an array of strings.
func (v Value) Strings() ([]string, bool) {
	if v.arr == nil || v.arr.elem != TypeString || v.arr.err != "" {
		return nil, false
	}
	return append([]string{}, v.arr.strs...), true
}

// Float32s returns an array of float32 as a new slice.
func (v Value) Float32s() ([]float32, bool) {
	if v.arr == nil || v.arr.elem != TypeFloat32 || v.arr.err != "" {
		return nil, false
	}
	out := make([]float32, v.arr.n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(v.arr.raw[4*i:]))
	}
	return out, true
}

// Int32s returns an array of any integer type as int32s; false if an element
// does not fit (token type tables are int32 in some files and uint8 in others).
func (v Value) Int32s() ([]int32, bool) {
	a := v.arr
	if a == nil || !a.elem.isInteger() || a.err != "" {
		return nil, false
	}
	size := a.elem.fixedSize()
	out := make([]int32, a.n)
	for i := range out {
		bits := decodeScalar(a.elem, a.raw[i*size:(i+1)*size])
		if a.elem.isSigned() {
			x := int64(bits)
			if x < math.MinInt32 || x > math.MaxInt32 {
				return nil, false
			}
			out[i] = int32(x)
		} else {
			if bits > math.MaxInt32 {
				return nil, false
			}
			out[i] = int32(bits)
		}
	}
	return out, true
}

// Equal reports whether v and w have the same type and contents. Floats are
// compared bit for bit, so a NaN equals itself and 0 differs from -0.
func (v Value) Equal(w Value) bool {
	if v.ok != w.ok || v.typ != w.typ || v.bits != w.bits || v.str != w.str {
		return false
	}
	if (v.arr == nil) != (w.arr == nil) {
		return false
	}
	if v.arr == nil {
		return true
	}
	a, b := v.arr, w.arr
	if a.elem != b.elem || a.n != b.n || a.err != b.err || string(a.raw) != string(b.raw) {
		return false
	}
	for i := range a.strs {
		if a.strs[i] != b.strs[i] {
			return false
		}
	}
	for i := range a.vals {
		if !a.vals[i].Equal(b.vals[i]) {
			return false
		}
	}
	return true
}

// decodeScalar reads one little-endian value of fixed-size type t from b,
// sign-extending signed integers so that Int works on the stored bits.
func decodeScalar(t ValueType, b []byte) uint64 {
	switch t {
	case TypeUint8, TypeBool:
		return uint64(b[0])
	case TypeInt8:
		return uint64(int64(int8(b[0])))
	case TypeUint16:
		return uint64(binary.LittleEndian.Uint16(b))
	case TypeInt16:
		return uint64(int64(int16(binary.LittleEndian.Uint16(b))))
	case TypeUint32, TypeFloat32:
		return uint64(binary.LittleEndian.Uint32(b))
	case TypeInt32:
		return uint64(int64(int32(binary.LittleEndian.Uint32(b))))
	default: // 8-byte types
		return binary.LittleEndian.Uint64(b)
	}
}

// appendScalar appends the encoding of a fixed-size value of type t.
func appendScalar(b []byte, t ValueType, bits uint64) []byte {
	switch t.fixedSize() {
	case 1:
		return append(b, byte(bits))
	case 2:
		return binary.LittleEndian.AppendUint16(b, uint16(bits))
	case 4:
		return binary.LittleEndian.AppendUint32(b, uint32(bits))
	default:
		return binary.LittleEndian.AppendUint64(b, bits)
	}
}
