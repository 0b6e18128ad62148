package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/minerva-llm/minerva/internal/mmap"
)

const (
	// MaxHeader is the largest header length accepted: the limit the
	// safetensors library itself sets (100 MB). Real headers are a few
	// kilobytes to a few megabytes.
	MaxHeader = 100_000_000
	// MaxRank is the most dims a tensor may have. Model weights have at
	// most 3 (stacked experts); the bound keeps a hostile shape list from
	// costing anything.
	MaxRank = 8
	// metadataKey is the header entry that is not a tensor.
	metadataKey = "__metadata__"
)

// Tensor describes one tensor of a file.
type Tensor struct {
	Name  string
	DType DType
	// Shape is outermost first (row-major): a [out, in] matrix has rows of
	// in elements, which GGUF would list as dims [in, out].
	Shape []uint64
	// Begin and End are the data_offsets: the tensor's bytes are
	// [Begin, End) relative to the data section (File.DataOffset).
	Begin, End uint64
	// At is the byte offset in the file of the tensor's header entry.
	At int64
}

// Elements is the product of Shape (1 for a scalar). Parse checked that
// it, times the dtype's size, is the span of the data_offsets.
func (t *Tensor) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Bytes is the size of the tensor's data.
func (t *Tensor) Bytes() uint64 { return t.End - t.Begin }

// File is a parsed safetensors file. Tensor bytes are slices of the mapping
// (or of the slice given to Parse), valid until Close; a File is read-only
// after parsing, so goroutines may share it.
type File struct {
	// Path names the file in errors.
	Path string
	// Metadata is the "__metadata__" entry (nil when there is none).
	Metadata map[string]string
	// Tensors in header order.
	Tensors []Tensor
	// HeaderLen is N, the JSON header's length; the data starts at 8+N.
	HeaderLen uint64

	data    []byte
	names   map[string]int
	closeFn func() error
	size    int64
}

// DataOffset is the absolute offset of the data section.
func (f *File) DataOffset() uint64 { return 8 + f.HeaderLen }

// Size is the file's size in bytes.
func (f *File) Size() int64 { return f.size }

// Tensor returns the named tensor (a pointer into Tensors).
func (f *File) Tensor(name string) (*Tensor, bool) {
	i, ok := f.names[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Data returns t's bytes, a read-only slice of the mapping: writing to it
// faults. Parse checked every tensor's bounds; they are checked again here
// because t may come from elsewhere, and then the result is nil, not a
// panic. Nil after Close. The slice has whatever alignment the file gives
// it (none, for an MLX file): read it bytewise.
func (f *File) Data(t *Tensor) []byte {
	if t == nil {
		return nil
	}
	n := uint64(len(f.data))
	start := f.DataOffset()
	if start > n || t.Begin > t.End || t.End > n-start {
		return nil
	}
	return f.data[start+t.Begin : start+t.End : start+t.End]
}

// Header returns the file's first 8+N bytes, the length and the JSON
// header: what identifies the file's contents short of hashing the
// weights. Nil after Close.
func (f *File) Header() []byte {
	end := f.DataOffset()
	if end > uint64(len(f.data)) {
		return nil
	}
	return f.data[:end:end]
}

// Release drops t's pages from the process's resident set when the file
// is mapped (OpenFile; a File parsed from a slice keeps its bytes), for a
// tensor that was read once to be repacked: its bytes stay readable, from
// the page cache. See mmap.Release.
func (f *File) Release(t *Tensor) {
	if f.closeFn != nil {
		mmap.Release(f.Data(t))
	}
}

// ReleaseRange is Release of bytes [from, to) of t's data, for a tensor
// repacked a slice at a time (out-of-range bounds release nothing).
func (f *File) ReleaseRange(t *Tensor, from, to int) {
	if b := f.Data(t); f.closeFn != nil && 0 <= from && from <= to && to <= len(b) {
		mmap.Release(b[from:to])
	}
}

// Close releases the mapping. The header's contents stay usable; Data
// returns nil afterwards. Closing twice is harmless.
func (f *File) Close() error {
	fn := f.closeFn
	f.closeFn, f.data = nil, nil
	if fn == nil {
		return nil
	}
	return fn()
}

// OpenFile maps the file the caller opened (fh.Name() names it in errors)
// and parses it. The mapping outlives fh, which the caller closes.
func OpenFile(fh *os.File) (*File, error) {
	path := fh.Name()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, errorf(path, "", -1, "not a regular file")
	}
	size := st.Size()
	if size < 8 {
		return nil, errorf(path, "", 0, "the file is %d bytes, shorter than the 8-byte header length", size)
	}
	if size > math.MaxInt {
		return nil, errorf(path, "", -1, "the file is too large to map (%d bytes)", size)
	}
	data, unmap, err := mmap.File(fh, int(size))
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	f, err := Parse(path, data)
	if err != nil {
		_ = unmap()
		return nil, err
	}
	f.closeFn = unmap
	return f, nil
}

// Parse parses a whole safetensors file held in data (named path in
// errors). The File's tensors are slices of data.
func Parse(path string, data []byte) (*File, error) {
	size := uint64(len(data))
	if size < 8 {
		return nil, errorf(path, "", 0, "the file is %d bytes, shorter than the 8-byte header length", size)
	}
	n := binary.LittleEndian.Uint64(data)
	switch {
	case n > size-8:
		return nil, errorf(path, "", 0, "header length %d runs past the end of the file (%d bytes: at most %d)", n, size, size-8)
	case n > MaxHeader:
		return nil, errorf(path, "", 0, "header length %d exceeds the format's limit of %d bytes", n, MaxHeader)
	case n < 2:
		return nil, errorf(path, "", 0, "header length %d is too short for a JSON object", n)
	}
	header := data[8 : 8+n]
	if !utf8.Valid(header) {
		return nil, errorf(path, "", 8+int64(firstInvalidUTF8(header)), "the header is not valid UTF-8")
	}
	if header[0] != '{' {
		return nil, errorf(path, "", 8, "the header does not start with '{': not a safetensors file (or a corrupt one)")
	}
	f := &File{Path: path, HeaderLen: n, data: data, names: map[string]int{}, size: int64(size)}
	err := walkObject(path, header, 8, true, func(key string, val []byte, at int64) error {
		if key == metadataKey {
			return f.parseMetadata(val, at)
		}
		t, err := parseEntry(path, key, val, at)
		if err != nil {
			return err
		}
		f.names[key] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := f.checkLayout(size - 8 - n); err != nil {
		return nil, err
	}
	return f, nil
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, w := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && w <= 1 {
			return i
		}
		i += w
	}
	return len(b)
}

// parseMetadata reads "__metadata__": an object of strings, as the format
// defines it.
func (f *File) parseMetadata(val []byte, at int64) error {
	if describe(val) == "null" {
		return nil // mlx writes null for no metadata
	}
	if describe(val) != "an object" {
		return errorf(f.Path, "", at, "__metadata__ is %s, not an object", describe(val))
	}
	f.Metadata = map[string]string{}
	return walkObject(f.Path, val, at, false, func(key string, v []byte, vat int64) error {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return errorf(f.Path, "", vat, "__metadata__ %s is %s, not a string", quote(key), describe(v))
		}
		f.Metadata[key] = s
		return nil
	})
}

// parseEntry reads one tensor entry: exactly the keys dtype, shape and
// data_offsets. An unknown key is refused rather than ignored: it would
// mean a layout this reader does not know.
func parseEntry(path, name string, val []byte, at int64) (Tensor, error) {
	t := Tensor{Name: name, At: at}
	fail := func(off int64, format string, args ...any) error {
		return errorf(path, name, off, format, args...)
	}
	if name == "" {
		return t, fail(at, "the tensor name is empty")
	}
	var dtype, shape, offsets []byte
	var dtypeAt, shapeAt, offsetsAt int64
	if len(val) == 0 || val[0] != '{' {
		return t, fail(at, "the entry is %s, not an object", describe(val))
	}
	err := walkObject(path, val, at, false, func(key string, v []byte, vat int64) error {
		switch key {
		case "dtype":
			dtype, dtypeAt = v, vat
		case "shape":
			shape, shapeAt = v, vat
		case "data_offsets":
			offsets, offsetsAt = v, vat
		default:
			return fail(vat, "unknown entry key %s (an entry has dtype, shape and data_offsets)", quote(key))
		}
		return nil
	})
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Tensor == "" {
			e.Tensor = name
		}
		return t, err
	}
	switch {
	case dtype == nil:
		return t, fail(at, "the entry has no dtype")
	case shape == nil:
		return t, fail(at, "the entry has no shape")
	case offsets == nil:
		return t, fail(at, "the entry has no data_offsets")
	}
	var ds string
	if json.Unmarshal(dtype, &ds) != nil {
		return t, fail(dtypeAt, "dtype is %s, not a string", describe(dtype))
	}
	t.DType = DType(ds)
	if t.DType.Size() == 0 {
		return t, fail(dtypeAt, "unknown dtype %s", quote(ds))
	}
	if t.Shape, err = uintList("shape", shape); err != nil {
		return t, fail(shapeAt, "%v", err)
	}
	if len(t.Shape) > MaxRank {
		return t, fail(shapeAt, "shape has %d dims, more than %d", len(t.Shape), MaxRank)
	}
	off, err := uintList("data_offsets", offsets)
	if err != nil {
		return t, fail(offsetsAt, "%v", err)
	}
	if len(off) != 2 {
		return t, fail(offsetsAt, "data_offsets has %d numbers, want 2 (begin, end)", len(off))
	}
	t.Begin, t.End = off[0], off[1]
	if t.Begin > t.End {
		return t, fail(offsetsAt, "data_offsets [%d, %d) end before they begin", t.Begin, t.End)
	}
	// The shape must account for exactly the bytes the offsets span. The
	// product is computed with overflow checks; a shape whose size does not
	// fit in 64 bits cannot match any span.
	size := t.DType.Size()
	for _, d := range t.Shape {
		hi, lo := bits.Mul64(size, d)
		if hi != 0 {
			return t, fail(shapeAt, "%s %v is more bytes than 2^64", t.DType, t.Shape)
		}
		size = lo
	}
	if size != t.End-t.Begin {
		return t, fail(offsetsAt, "%s %v is %d bytes but data_offsets [%d, %d) span %d", t.DType, t.Shape, size, t.Begin, t.End, t.End-t.Begin)
	}
	return t, nil
}

// checkLayout checks that the tensors' data lies in the file's data
// section (dataLen bytes), that no two overlap, and that together they
// cover it with no gap, as the safetensors library requires: a gap or a
// tail of stray bytes means offsets that were damaged or a file that was
// pieced together wrong.
func (f *File) checkLayout(dataLen uint64) error {
	base := int64(f.DataOffset())
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.End > dataLen {
			return errorf(f.Path, t.Name, base+int64(min(t.Begin, dataLen)), "data_offsets [%d, %d) run past the end of the file: the data section is %d bytes (file bytes [%d, %d), the file is %d)",
				t.Begin, t.End, dataLen, base, base+int64(dataLen), f.size)
		}
	}
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ta, tb := &f.Tensors[a], &f.Tensors[b]
		if ta.Begin != tb.Begin {
			return cmpU64(ta.Begin, tb.Begin)
		}
		return cmpU64(ta.End, tb.End)
	})
	var end uint64
	prev := ""
	for _, i := range order {
		t := &f.Tensors[i]
		switch {
		case t.Begin < end:
			return errorf(f.Path, t.Name, base+int64(t.Begin), "data [%d, %d) overlaps tensor %s, which ends at %d", t.Begin, t.End, quote(prev), end)
		case t.Begin > end && prev == "":
			return errorf(f.Path, t.Name, base, "data section bytes [0, %d) before the first tensor belong to no tensor", t.Begin)
		case t.Begin > end:
			return errorf(f.Path, t.Name, base+int64(end), "data section bytes [%d, %d) between tensor %s and this one belong to no tensor", end, t.Begin, quote(prev))
		}
		end, prev = t.End, t.Name
	}
	if end != dataLen {
		return errorf(f.Path, "", base+int64(end), "the last %d bytes of the file belong to no tensor (the tensors end at data offset %d, the data section is %d bytes)", dataLen-end, end, dataLen)
	}
	return nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// walkObject calls fn for each member of the JSON object in raw, in order,
// with the value's raw bytes and the absolute file offset (base + position
// in raw) just after its key. A duplicate key is an error: JSON decoders
// disagree on which copy wins, so a file that has one means two things.
// top says raw is the whole header, which may be followed only by
// whitespace (the safetensors library pads with spaces).
func walkObject(path string, raw []byte, base int64, top bool, fn func(key string, val []byte, at int64) error) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	syntax := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return errorf(path, "", base+se.Offset, "invalid JSON: %v", se)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return errorf(path, "", base+int64(len(raw)), "the JSON ends early")
		}
		return errorf(path, "", base+dec.InputOffset(), "invalid JSON: %v", err)
	}
	tok, err := dec.Token()
	if err != nil {
		return syntax(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errorf(path, "", base, "not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		keyAt := base + dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return syntax(err)
		}
		key, ok := tok.(string)
		if !ok {
			return errorf(path, "", keyAt, "invalid JSON: an object key is not a string")
		}
		at := base + dec.InputOffset()
		if seen[key] {
			return errorf(path, "", at, "key %s appears twice", quote(key))
		}
		seen[key] = true
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return syntax(err)
		}
		if err := fn(key, val, at+skipColon(raw[at-base:])); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return syntax(err)
	}
	if top {
		rest := raw[dec.InputOffset():]
		for i, c := range rest {
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				return errorf(path, "", base+dec.InputOffset()+int64(i), "bytes after the JSON object (only spaces may follow it)")
			}
		}
	}
	return nil
}

// skipColon is how far past a key its value starts (whitespace and the
// colon), so that offsets in messages point at the value itself.
func skipColon(b []byte) int64 {
	for i, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != ':' {
			return int64(i)
		}
	}
	return int64(len(b))
}

// uintList reads a JSON array of non-negative integers, the field what.
func uintList(what string, raw []byte) ([]uint64, error) {
	var nums []json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&nums); err != nil {
		return nil, fmt.Errorf("%s is %s, not a list of integers", what, describe(raw))
	}
	out := make([]uint64, len(nums))
	for i, n := range nums {
		v, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] = %s is not a non-negative integer below 2^64", what, i, quote(string(n)))
		}
		out[i] = v
	}
	return out, nil
}

// describe names the JSON type of raw for a message.
func describe(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
