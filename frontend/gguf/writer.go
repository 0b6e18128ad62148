package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/minerva-llm/minerva/ir"
)

// Writer builds a GGUF file: add metadata and tensors, then WriteTo. Mistakes
// (a duplicate key, a bad alignment, data of the wrong size) are remembered
// and reported by WriteTo, or at once by AddTensor, so that the Writer never
// produces a file its own reader would reject.
type Writer struct {
	version   uint32
	alignment uint64
	kvs       []KV
	keys      map[string]int
	tensors   []wtensor
	names     map[string]bool
	err       error
}

type wtensor struct {
	info TensorInfo
	data []byte
	// produce, when set instead of data, writes the tensor's bytes at
	// WriteTo time (AddTensorFunc).
	produce func(io.Writer) error
}

// NewWriter starts a file of the given version (2 or 3; anything else makes
// WriteTo fail). The two versions have the same layout; 3 only promises that
// the file is little endian.
func NewWriter(version uint32) *Writer {
	w := &Writer{version: version, alignment: DefaultAlignment, keys: map[string]int{}, names: map[string]bool{}}
	if version != 2 && version != 3 {
		w.fail(fmt.Errorf("gguf: cannot write version %d (only 2 and 3)", version))
	}
	return w
}

func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// SetAlignment sets the data alignment (a nonzero power of two that fits in
// uint32). It is recorded as general.alignment when it is not the default,
// or when the key is already present.
func (w *Writer) SetAlignment(a uint64) {
	if a == 0 || a&(a-1) != 0 || a > math.MaxUint32 {
		w.fail(fmt.Errorf("gguf: alignment %d is not a nonzero power of two that fits in uint32", a))
		return
	}
	w.alignment = a
	if i, ok := w.keys["general.alignment"]; ok {
		w.kvs[i].Value = Uint32(uint32(a))
	} else if a != DefaultAlignment {
		w.add("general.alignment", Uint32(uint32(a)))
	}
}

// AddKV appends a metadata pair. Adding general.alignment sets the alignment
// too, so copying every KV of a parsed file keeps its layout.
func (w *Writer) AddKV(key string, v Value) {
	if _, dup := w.keys[key]; dup {
		w.fail(fmt.Errorf("gguf: duplicate key %q", key))
		return
	}
	if err := checkValue(v, 0); err != "" {
		w.fail(fmt.Errorf("gguf: key %q: %s", key, err))
		return
	}
	if key == "general.alignment" {
		a, ok := v.Uint()
		if v.Type() != TypeUint32 || !ok {
			w.fail(fmt.Errorf("gguf: general.alignment has type %s, want uint32", v.Type()))
			return
		}
		w.add(key, v)
		w.SetAlignment(a)
		return
	}
	w.add(key, v)
}

func (w *Writer) add(key string, v Value) {
	w.keys[key] = len(w.kvs)
	w.kvs = append(w.kvs, KV{Key: key, Value: v})
}

// checkValue returns why v cannot be written, or "".
func checkValue(v Value, depth int) string {
	if !v.ok {
		return "invalid (zero) Value"
	}
	if v.typ != TypeArray {
		return ""
	}
	if depth >= maxNesting {
		return fmt.Sprintf("arrays nested deeper than %d", maxNesting)
	}
	if v.arr.err != "" {
		return v.arr.err
	}
	for i, e := range v.arr.vals {
		if msg := checkValue(e, depth+1); msg != "" {
			return fmt.Sprintf("element %d: %s", i, msg)
		}
	}
	return ""
}

// AddTensor appends a tensor. data must hold exactly the bytes that dims and
// typ call for; it is not copied, so it must not change before WriteTo.
func (w *Writer) AddTensor(name string, typ ir.DType, dims []uint64, data []byte) error {
	err := w.addTensor(name, typ, dims, data)
	if err != nil {
		w.fail(err)
	}
	return err
}

// AddTensorFunc appends a tensor whose bytes produce writes during WriteTo,
// so that a file larger than memory (a synthetic 20B model) can be written
// one tensor, or one slice of a tensor, at a time. produce must write
// exactly the bytes dims and typ call for; WriteTo fails otherwise.
func (w *Writer) AddTensorFunc(name string, typ ir.DType, dims []uint64, produce func(io.Writer) error) error {
	if produce == nil {
		err := fmt.Errorf("gguf: tensor %q: nil producer", name)
		w.fail(err)
		return err
	}
	size, err := w.checkTensor(name, typ, dims)
	if err != nil {
		w.fail(err)
		return err
	}
	w.names[name] = true
	w.tensors = append(w.tensors, wtensor{
		info:    TensorInfo{Name: name, Dims: append([]uint64(nil), dims...), Type: typ, Size: size},
		produce: produce,
	})
	return nil
}

func (w *Writer) addTensor(name string, typ ir.DType, dims []uint64, data []byte) error {
	size, err := w.checkTensor(name, typ, dims)
	if err != nil {
		return err
	}
	if uint64(len(data)) != size {
		return fmt.Errorf("gguf: tensor %q: %d bytes of data, want %d for %s %v", name, len(data), size, typ, dims)
	}
	w.names[name] = true
	w.tensors = append(w.tensors, wtensor{
		info: TensorInfo{Name: name, Dims: append([]uint64(nil), dims...), Type: typ, Size: size},
		data: data,
	})
	return nil
}

// checkTensor validates a new tensor's name, type and dims and returns its
// size in bytes.
func (w *Writer) checkTensor(name string, typ ir.DType, dims []uint64) (uint64, error) {
	if w.names[name] {
		return 0, fmt.Errorf("gguf: duplicate tensor name %q", name)
	}
	if !typ.Known() {
		return 0, fmt.Errorf("gguf: tensor %q: unknown type %d", name, uint32(typ))
	}
	if len(dims) == 0 || len(dims) > maxDims {
		return 0, fmt.Errorf("gguf: tensor %q: %d dims, want 1..%d", name, len(dims), maxDims)
	}
	elements := uint64(1)
	for j, ne := range dims {
		if ne == 0 || ne > math.MaxInt64 || elements > math.MaxInt64/ne {
			return 0, fmt.Errorf("gguf: tensor %q: dim %d = %d is zero or overflows the element count", name, j, ne)
		}
		elements *= ne
	}
	if dims[0]%uint64(typ.BlockSize()) != 0 {
		return 0, fmt.Errorf("gguf: tensor %q: row length %d is not a multiple of the %s block size %d", name, dims[0], typ, typ.BlockSize())
	}
	rowBytes, err := typ.RowBytes(int64(dims[0]))
	if err != nil {
		return 0, fmt.Errorf("gguf: tensor %q: %v", name, err)
	}
	rows := elements / dims[0]
	if rows > math.MaxInt64/uint64(rowBytes) {
		return 0, fmt.Errorf("gguf: tensor %q: size overflows", name)
	}
	return rows * uint64(rowBytes), nil
}

// WriteTo writes the file: header, metadata, tensor infos, padding, then each
// tensor's data padded to the alignment (the last one too, as llama.cpp and
// gguf-py do, so the file size is a multiple of the alignment). A file
// without tensors ends right after its header, as llama.cpp's vocab-only
// files do, so that those round-trip byte for byte too.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	align := w.alignment
	offset := uint64(0)
	for i := range w.tensors {
		t := &w.tensors[i].info
		t.Offset = offset
		offset = alignUp(offset+t.Size, align)
	}

	// The header is built in memory: it is small next to the tensor data
	// (a few MB for a 150k-token vocabulary at most).
	h := []byte(Magic)
	h = binary.LittleEndian.AppendUint32(h, w.version)
	h = binary.LittleEndian.AppendUint64(h, uint64(len(w.tensors)))
	h = binary.LittleEndian.AppendUint64(h, uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		h = appendString(h, kv.Key)
		h = binary.LittleEndian.AppendUint32(h, uint32(kv.Value.typ))
		h = appendValue(h, kv.Value)
	}
	for i := range w.tensors {
		t := &w.tensors[i].info
		h = appendString(h, t.Name)
		h = binary.LittleEndian.AppendUint32(h, uint32(len(t.Dims)))
		for _, ne := range t.Dims {
			h = binary.LittleEndian.AppendUint64(h, ne)
		}
		h = binary.LittleEndian.AppendUint32(h, uint32(t.Type))
		h = binary.LittleEndian.AppendUint64(h, t.Offset)
	}

	if s, ok := out.(Sizer); ok {
		size := uint64(len(h))
		if len(w.tensors) > 0 {
			size = alignUp(size, align) + offset
		}
		s.SetSize(int64(size))
	}
	cw := &countingWriter{w: out}
	bw := bufio.NewWriterSize(cw, 1<<20)
	if _, err := bw.Write(h); err != nil {
		return cw.n, err
	}
	if len(w.tensors) > 0 {
		if err := writeZeros(bw, alignUp(uint64(len(h)), align)-uint64(len(h))); err != nil {
			return cw.n, err
		}
	}
	for i := range w.tensors {
		t := &w.tensors[i]
		if t.produce != nil {
			pw := &countingWriter{w: bw}
			if err := t.produce(pw); err != nil {
				return cw.n, fmt.Errorf("gguf: tensor %q: %w", t.info.Name, err)
			}
			if uint64(pw.n) != t.info.Size {
				return cw.n, fmt.Errorf("gguf: tensor %q: producer wrote %d bytes, want %d", t.info.Name, pw.n, t.info.Size)
			}
		} else if _, err := bw.Write(t.data); err != nil {
			return cw.n, err
		}
		end := t.info.Offset + t.info.Size
		if err := writeZeros(bw, alignUp(end, align)-end); err != nil {
			return cw.n, err
		}
	}
	err := bw.Flush()
	return cw.n, err
}

// Sizer is a destination that WriteTo tells the file's size before writing
// it (a progress bar's total).
type Sizer interface{ SetSize(n int64) }

// countingWriter counts the bytes that reached the destination, so WriteTo
// reports what was really written even when buffering hides a failure.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeZeros writes n zero bytes from a small buffer: an alignment may be
// as large as 2^31, and padding must not cost that much memory.
func writeZeros(w io.Writer, n uint64) error {
	var zeros [4096]byte
	for n > 0 {
		k := min(n, uint64(len(zeros)))
		if _, err := w.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

func alignUp(x, a uint64) uint64 { return (x + a - 1) &^ (a - 1) }

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendValue appends v's encoding without its type tag (which a kv has
// before the value and an array once for all its elements).
func appendValue(b []byte, v Value) []byte {
	switch v.typ {
	case TypeString:
		return appendString(b, v.str)
	case TypeArray:
		a := v.arr
		b = binary.LittleEndian.AppendUint32(b, uint32(a.elem))
		b = binary.LittleEndian.AppendUint64(b, uint64(a.n))
		switch a.elem {
		case TypeString:
			for _, s := range a.strs {
				b = appendString(b, s)
			}
		case TypeArray:
			for _, e := range a.vals {
				b = appendValue(b, e)
			}
		default:
			b = append(b, a.raw...)
		}
		return b
	}
	return appendScalar(b, v.typ, v.bits)
}
