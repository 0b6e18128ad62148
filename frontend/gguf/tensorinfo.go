package gguf

import (
	"fmt"
	"math"
	"sort"

	"github.com/minerva-llm/minerva/ir"
)

// tensorInfo reads tensor i's description and returns the byte offset of
// its offset field, for the data checks that need the data section start.
func (p *parser) tensorInfo(i int) (int, error) {
	d := &p.d
	p.section, p.index, p.hasName, p.path = "tensor", i, false, p.path[:0]
	nameAt := d.off
	name, err := p.str(func() string { return p.subject() + " name" })
	if err != nil {
		return 0, err
	}
	p.name, p.hasName = name, true
	if j, dup := p.f.names[name]; dup {
		return 0, errorAt(nameAt, "duplicate tensor name %s (tensor %d and tensor %d)", quoteShort(name), j, i)
	}

	ndAt := d.off
	nd, ok := d.u32()
	if !ok {
		return 0, p.short(ndAt, p.subject()+" n_dims", 4)
	}
	if nd == 0 || nd > maxDims {
		return 0, errorAt(ndAt, "%s n_dims %d is out of range (1..%d)", p.subject(), nd, maxDims)
	}
	dims := make([]uint64, nd)
	elements := uint64(1)
	for j := range dims {
		at := d.off
		ne, ok := d.u64()
		if !ok {
			return 0, p.short(at, fmt.Sprintf("%s dim %d", p.subject(), j), 8)
		}
		if ne == 0 {
			return 0, errorAt(at, "%s dim %d is 0", p.subject(), j)
		}
		if ne > math.MaxInt64 || elements > math.MaxInt64/ne {
			return 0, errorAt(at, "%s dim %d = %d: element count overflows int64", p.subject(), j, ne)
		}
		dims[j] = ne
		elements *= ne
	}

	typeAt := d.off
	tid, ok := d.u32()
	if !ok {
		return 0, p.short(typeAt, p.subject()+" type", 4)
	}
	typ := ir.DType(tid)
	if !typ.Known() {
		return 0, errorAt(typeAt, "%s has unknown ggml type %d", p.subject(), tid)
	}
	if bs := uint64(typ.BlockSize()); dims[0]%bs != 0 {
		return 0, errorAt(typeAt, "%s row length %d is not a multiple of the %s block size %d", p.subject(), dims[0], typ, bs)
	}
	rowBytes, err := typ.RowBytes(int64(dims[0]))
	if err != nil {
		return 0, errorAt(typeAt, "%s row size: %v", p.subject(), err)
	}
	rows := elements / dims[0]
	if rows > math.MaxInt64/uint64(rowBytes) {
		return 0, errorAt(typeAt, "%s size overflows: %d rows of %d bytes", p.subject(), rows, rowBytes)
	}
	size := rows * uint64(rowBytes)

	offAt := d.off
	offset, ok := d.u64()
	if !ok {
		return 0, p.short(offAt, p.subject()+" offset", 8)
	}
	if offset%p.f.Alignment != 0 {
		return 0, errorAt(offAt, "%s offset %d is not a multiple of the alignment %d (misaligned data)", p.subject(), offset, p.f.Alignment)
	}
	p.f.names[name] = len(p.f.Tensors)
	p.f.Tensors = append(p.f.Tensors, TensorInfo{Name: name, Dims: dims, Type: typ, Offset: offset, Size: size})
	return offAt, nil
}

// dataSection places the data section after the padding and checks that
// every tensor lies inside the file and that no two overlap.
func (p *parser) dataSection(offsetAt []int) error {
	f, d := p.f, &p.d
	size := uint64(len(d.data))
	end := uint64(d.off)
	start := (end + f.Alignment - 1) &^ (f.Alignment - 1) // no overflow: end < 2^63, alignment <= 2^31
	if start > size {
		if len(f.Tensors) > 0 {
			return (&Error{Offset: int64(end), Msg: fmt.Sprintf("padding to alignment %d truncated: the data section would start at byte %d but the file is %d bytes", f.Alignment, start, size)}).eof()
		}
		// Files without tensors (vocab-only) often end right after the
		// header, with no padding; the empty data section is at EOF.
		start = size
	}
	f.DataOffset = start
	avail := size - start
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset > avail || t.Size > avail-t.Offset {
			p.section, p.index, p.name, p.hasName = "tensor", i, t.Name, true
			return (&Error{Offset: int64(offsetAt[i]), Msg: fmt.Sprintf("%s offset %d + size %d runs past end of file (%d bytes, data section starts at byte %d)",
				p.subject(), t.Offset, t.Size, size, start)}).eof()
		}
	}
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return f.Tensors[order[a]].Offset < f.Tensors[order[b]].Offset })
	for k := 1; k < len(order); k++ {
		prev, cur := &f.Tensors[order[k-1]], &f.Tensors[order[k]]
		if cur.Offset < prev.Offset+prev.Size {
			return errorAt(offsetAt[order[k]], "tensor %d (%s) data [%d, %d) overlaps tensor %d (%s) data [%d, %d)",
				order[k], quoteShort(cur.Name), cur.Offset, cur.Offset+cur.Size,
				order[k-1], quoteShort(prev.Name), prev.Offset, prev.Offset+prev.Size)
		}
	}
	return nil
}
