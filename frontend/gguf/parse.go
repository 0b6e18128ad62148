package gguf

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

const (
	// maxDims is GGML_MAX_DIMS: ggml tensors have at most four dimensions.
	maxDims = 4
	// maxNesting bounds arrays of arrays. Real files nest at most once
	// (merges are strings, not pairs); the limit keeps a hostile file from
	// recursing deep enough to exhaust the stack.
	maxNesting = 16
	// maxNestedArrays bounds the arrays inside arrays in one file. Each
	// costs ~200 bytes of memory for as little as 13 bytes of file, so
	// without a cap a hostile file could cost fifteen times its size;
	// real files have none or a few.
	maxNestedArrays = 1 << 16
	// Smallest encodings, used to reject counts no file of this size could
	// hold before allocating for them.
	minKVSize     = 8 + 4 + 1         // empty key, type, one-byte value
	minTensorSize = 8 + 4 + 8 + 4 + 8 // empty name, n_dims=1, one dim, type, offset
	// preallocCap caps capacity reserved from a count: counts are already
	// bounded by the file size, this only avoids reserving more than a small
	// file needs.
	preallocCap = 1024
	// maxNameInError keeps error lines short when a hostile name is huge.
	maxNameInError = 64
)

// Parse reads a GGUF file held in memory. The File's tensor data aliases
// data, which must not change while the File is in use.
func Parse(data []byte) (*File, error) {
	p := &parser{d: decoder{data: data}}
	f, err := p.parse()
	if err != nil {
		return nil, err
	}
	return f, nil
}

type parser struct {
	d decoder
	f *File

	// where the parser is, for error messages: "kv 3 ("key")", "tensor 7"
	section string
	index   int
	name    string
	hasName bool
	path    []int // indices into nested arrays
	nested  int   // arrays read inside other arrays so far
}

// subject names the item being read, e.g. `kv 3 ("general.name")`.
func (p *parser) subject() string {
	s := p.section + " " + strconv.Itoa(p.index)
	if p.hasName {
		s += " (" + quoteShort(p.name) + ")"
	}
	return s
}

// valueField names the value (or array element) being read, e.g.
// `kv 3 ("tokenizer.ggml.tokens") value[17]`.
func (p *parser) valueField() string {
	var b strings.Builder
	b.WriteString(p.subject())
	b.WriteString(" value")
	for _, i := range p.path {
		b.WriteString("[" + strconv.Itoa(i) + "]")
	}
	return b.String()
}

func quoteShort(s string) string {
	if len(s) > maxNameInError {
		return strconv.Quote(s[:maxNameInError]) + "..."
	}
	return strconv.Quote(s)
}

func (p *parser) short(off int, field string, need uint64) error {
	return truncated(off, len(p.d.data), field, need)
}

func (p *parser) parse() (*File, error) {
	d := &p.d
	size := len(d.data)
	if size < 4 {
		return nil, p.short(0, "magic", 4)
	}
	if string(d.data[:4]) != Magic {
		return nil, errorAt(0, "bad magic %q, want \"GGUF\"", d.data[:4])
	}
	d.off = 4

	version, ok := d.u32()
	if !ok {
		return nil, p.short(4, "version", 4)
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, errorAt(4, "version 1 is not supported (only versions 2 and 3 are)")
	case bits.ReverseBytes32(version) == 2 || bits.ReverseBytes32(version) == 3:
		return nil, errorAt(4, "version %d looks byte-swapped: big-endian files are not supported", version)
	default:
		return nil, errorAt(4, "unsupported version %d (want 2 or 3)", version)
	}

	tensorCount, ok := d.u64()
	if !ok {
		return nil, p.short(8, "tensor_count", 8)
	}
	kvCount, ok := d.u64()
	if !ok {
		return nil, p.short(16, "kv_count", 8)
	}
	rem := uint64(d.rem())
	if tensorCount > rem/minTensorSize {
		return nil, errorAt(8, "tensor_count %d is larger than the file could hold (%d bytes remain, a tensor info takes at least %d)", tensorCount, rem, minTensorSize)
	}
	if kvCount > rem/minKVSize {
		return nil, errorAt(16, "kv_count %d is larger than the file could hold (%d bytes remain, a kv takes at least %d)", kvCount, rem, minKVSize)
	}
	if tensorCount*minTensorSize+kvCount*minKVSize > rem { // no overflow: each term <= rem
		return nil, errorAt(8, "tensor_count %d and kv_count %d are larger than the file could hold (%d bytes remain)", tensorCount, kvCount, rem)
	}

	p.f = &File{
		Version:   version,
		Alignment: DefaultAlignment,
		KV:        make([]KV, 0, min(kvCount, preallocCap)),
		Tensors:   make([]TensorInfo, 0, min(tensorCount, preallocCap)),
		data:      d.data,
		keys:      make(map[string]int, min(kvCount, preallocCap)),
		names:     make(map[string]int, min(tensorCount, preallocCap)),
		fileSize:  int64(size),
	}
	for i := 0; i < int(kvCount); i++ {
		if err := p.kv(i); err != nil {
			return nil, err
		}
	}
	offsetAt := make([]int, 0, min(tensorCount, preallocCap)) // where each tensor's offset field is
	for i := 0; i < int(tensorCount); i++ {
		at, err := p.tensorInfo(i)
		if err != nil {
			return nil, err
		}
		offsetAt = append(offsetAt, at)
	}
	if err := p.dataSection(offsetAt); err != nil {
		return nil, err
	}
	return p.f, nil
}

// str reads a GGUF string (uint64 length + bytes), copying it out of the
// file so that it outlives the mapping.
func (p *parser) str(field func() string) (string, error) {
	d := &p.d
	off := d.off
	n, ok := d.u64()
	if !ok {
		return "", p.short(off, field()+" length", 8)
	}
	b, ok := d.bytes(n)
	if !ok {
		return "", (&Error{Offset: int64(off), Msg: fmt.Sprintf("%s length %d runs past end of file (%d bytes remain after it)", field(), n, d.rem())}).eof()
	}
	return string(b), nil
}

func (p *parser) kv(i int) error {
	d := &p.d
	p.section, p.index, p.hasName, p.path = "kv", i, false, p.path[:0]
	keyAt := d.off
	key, err := p.str(func() string { return p.subject() + " key" })
	if err != nil {
		return err
	}
	p.name, p.hasName = key, true
	if j, dup := p.f.keys[key]; dup {
		return errorAt(keyAt, "duplicate key %s (kv %d and kv %d)", quoteShort(key), j, i)
	}
	typeAt := d.off
	t, ok := d.u32()
	if !ok {
		return p.short(typeAt, p.subject()+" value type", 4)
	}
	if !ValueType(t).Valid() {
		return errorAt(typeAt, "%s has unknown value type %d", p.subject(), t)
	}
	valueAt := d.off
	v, err := p.value(ValueType(t), 0)
	if err != nil {
		return err
	}
	if key == "general.alignment" {
		if v.Type() != TypeUint32 {
			return errorAt(valueAt, "general.alignment has type %s, want uint32", v.Type())
		}
		a := v.bits
		if a == 0 || a&(a-1) != 0 {
			return errorAt(valueAt, "general.alignment %d is not a nonzero power of two", a)
		}
		p.f.Alignment = a
	}
	p.f.keys[key] = len(p.f.KV)
	p.f.KV = append(p.f.KV, KV{Key: key, Value: v})
	return nil
}

// value reads one value of type t; depth counts the arrays around it.
func (p *parser) value(t ValueType, depth int) (Value, error) {
	d := &p.d
	switch t {
	case TypeString:
		s, err := p.str(p.valueField)
		if err != nil {
			return Value{}, err
		}
		return String(s), nil
	case TypeArray:
		return p.array(depth + 1)
	}
	off := d.off
	size := uint64(t.fixedSize())
	b, ok := d.bytes(size)
	if !ok {
		return Value{}, p.short(off, p.valueField()+" ("+t.String()+")", size)
	}
	if t == TypeBool && b[0] > 1 {
		return Value{}, errorAt(off, "%s: bool byte %d is neither 0 nor 1", p.valueField(), b[0])
	}
	return scalar(t, decodeScalar(t, b)), nil
}

// array reads an array's element type, count and elements. depth is the
// nesting level of this array (1 for a kv's own array).
func (p *parser) array(depth int) (Value, error) {
	d := &p.d
	off := d.off
	if depth > maxNesting {
		return Value{}, errorAt(off, "%s: arrays nested deeper than %d", p.valueField(), maxNesting)
	}
	if depth > 1 {
		if p.nested++; p.nested > maxNestedArrays {
			return Value{}, errorAt(off, "%s: more than %d nested arrays in the file", p.valueField(), maxNestedArrays)
		}
	}
	et, ok := d.u32()
	if !ok {
		return Value{}, p.short(off, p.valueField()+" array element type", 4)
	}
	elem := ValueType(et)
	if !elem.Valid() {
		return Value{}, errorAt(off, "%s has unknown array element type %d", p.valueField(), et)
	}
	countAt := d.off
	n, ok := d.u64()
	if !ok {
		return Value{}, p.short(countAt, p.valueField()+" array count", 8)
	}
	// A count is judged against the whole file, not the bytes left, so that
	// a file cut short inside an array reports the element where it ends
	// rather than an implausible count. Memory stays bounded either way:
	// variable-size elements are appended as they are read, and fixed-size
	// ones are sliced only once their bytes are known to be there.
	if minSize := uint64(elem.minSize()); n > uint64(len(d.data))/minSize {
		return Value{}, errorAt(countAt, "%s array count %d is larger than the file could hold (%d bytes, a %s takes at least %d)",
			p.valueField(), n, len(d.data), elem, minSize)
	}
	a := &arrayData{elem: elem, n: int(n)}
	switch elem {
	case TypeString:
		a.strs = make([]string, 0, min(n, preallocCap))
		p.path = append(p.path, 0)
		for i := 0; i < int(n); i++ {
			p.path[len(p.path)-1] = i
			s, err := p.str(p.valueField)
			if err != nil {
				return Value{}, err
			}
			a.strs = append(a.strs, s)
		}
		p.path = p.path[:len(p.path)-1]
	case TypeArray:
		a.vals = make([]Value, 0, min(n, preallocCap))
		p.path = append(p.path, 0)
		for i := 0; i < int(n); i++ {
			p.path[len(p.path)-1] = i
			v, err := p.array(depth + 1)
			if err != nil {
				return Value{}, err
			}
			a.vals = append(a.vals, v)
		}
		p.path = p.path[:len(p.path)-1]
	default:
		start := d.off
		size := n * uint64(elem.fixedSize()) // no overflow: n <= file size
		b, ok := d.bytes(size)
		if !ok {
			return Value{}, (&Error{Offset: int64(start), Msg: fmt.Sprintf("%s: %d %s elements (%d bytes) run past end of file (%d bytes remain)",
				p.valueField(), n, elem, size, d.rem())}).eof()
		}
		if elem == TypeBool {
			for i, x := range b {
				if x > 1 {
					p.path = append(p.path, i)
					return Value{}, errorAt(start+i, "%s: bool byte %d is neither 0 nor 1", p.valueField(), x)
				}
			}
		}
		a.raw = append([]byte(nil), b...) // copied: values outlive the mapping
	}
	return a.value(), nil
}
