package gguf

import (
	"fmt"

	"github.com/minerva-llm/minerva/ir"
)

// Magic opens every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the data alignment of a file without general.alignment.
const DefaultAlignment = 32

// KV is one metadata key/value pair.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name   string
	Dims   []uint64 // ne, GGUF order: Dims[0] is the row length (fastest varying)
	Type   ir.DType
	Offset uint64 // relative to the data section
	Size   uint64 // bytes, computed from Dims and Type
}

// Elements returns the number of elements (the product of Dims). Parse has
// checked that it fits in an int64.
func (t *TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// File is a parsed GGUF file. Its metadata is copied out of the file's bytes;
// tensor data is not: TensorData returns slices of the mapping (or of the
// slice given to Parse), which stay valid until Close. A File is read-only
// after parsing, so any number of goroutines may use it at once, as long as
// none of them calls Close.
type File struct {
	Version    uint32
	Alignment  uint64
	KV         []KV         // file order
	Tensors    []TensorInfo // file order
	DataOffset uint64       // absolute offset of the data section

	data     []byte
	keys     map[string]int
	names    map[string]int
	closeFn  func() error // unmaps the file; nil after Close or for Parse
	fileSize int64
}

// Close releases the file's mapping. Metadata stays usable; TensorData
// returns nil afterwards, and slices it returned before must not be used.
// Closing twice is harmless.
func (f *File) Close() error {
	fn := f.closeFn
	f.closeFn = nil
	f.data = nil
	if fn == nil {
		return nil
	}
	return fn()
}

// Get returns the value of key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.keys[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	v, _ := f.Get(key)
	return v.Str()
}

// Uint returns a non-negative integer value of any integer type.
func (f *File) Uint(key string) (uint64, bool) {
	v, _ := f.Get(key)
	return v.Uint()
}

// Int returns an integer value of any integer type.
func (f *File) Int(key string) (int64, bool) {
	v, _ := f.Get(key)
	return v.Int()
}

// Float returns a float (or integer, converted) value.
func (f *File) Float(key string) (float64, bool) {
	v, _ := f.Get(key)
	return v.Float()
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	v, _ := f.Get(key)
	return v.Bool()
}

// Tensor returns the description of the named tensor (a pointer into Tensors).
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.names[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorData returns t's bytes, a slice of the file's bytes (read-only when
// mapped: writing to it faults). Parse checked every tensor's bounds; the
// check is repeated here because t may have been edited or come from another
// file, and then the result is nil rather than a panic. Nil after Close.
func (f *File) TensorData(t *TensorInfo) []byte {
	if t == nil {
		return nil
	}
	n := uint64(len(f.data))
	if f.DataOffset > n || t.Offset > n-f.DataOffset || t.Size > n-f.DataOffset-t.Offset {
		return nil
	}
	start := f.DataOffset + t.Offset
	end := start + t.Size
	return f.data[start:end:end]
}

// WeightBytes returns the bytes of the named tensor (TensorData by name),
// so that a File serves its tensors to the interpreter and the backends
// (ir/eval.Weights).
func (f *File) WeightBytes(name string) ([]byte, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("tensor %q is not in the model file", name)
	}
	b := f.TensorData(t)
	if b == nil {
		return nil, fmt.Errorf("tensor %q: the model file was closed", name)
	}
	return b, nil
}

// Header returns the file's bytes before the tensor data: the header,
// metadata and tensor table, which identify a model (a plan records their
// SHA-256). Nil after Close.
func (f *File) Header() []byte {
	if f.DataOffset > uint64(len(f.data)) {
		return nil
	}
	return f.data[:f.DataOffset:f.DataOffset]
}

// Architecture returns general.architecture, or "" if absent.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

// Size returns the size of the file in bytes.
func (f *File) Size() int64 { return f.fileSize }
