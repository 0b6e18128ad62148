package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// WriteTensor is a tensor for Write.
type WriteTensor struct {
	Name  string
	DType DType
	Shape []uint64 // outermost first
	Data  []byte   // the elements, little-endian, row-major
}

// Write writes a safetensors file: the metadata first, then the tensors'
// entries and data in the order given. The header is padded with spaces
// to a multiple of align: 8 as the safetensors library writes it (every
// tensor 8-byte aligned), 1 for no padding as mlx writes it. It is for
// tests and synthetic models; it refuses a tensor whose data does not
// match its dtype and shape.
func Write(w io.Writer, metadata map[string]string, tensors []WriteTensor, align int) error {
	if align < 1 {
		return fmt.Errorf("safetensors: alignment %d is not positive", align)
	}
	var h bytes.Buffer
	h.WriteByte('{')
	if metadata != nil {
		h.WriteString(`"__metadata__":`)
		b, err := json.Marshal(metadata) // sorted keys
		if err != nil {
			return err
		}
		h.Write(b)
	}
	var off uint64
	for i, t := range tensors {
		size := t.DType.Size()
		if size == 0 {
			return fmt.Errorf("safetensors: tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		for _, d := range t.Shape {
			size *= d
		}
		if size != uint64(len(t.Data)) {
			return fmt.Errorf("safetensors: tensor %q: %s %v is %d bytes, the data %d", t.Name, t.DType, t.Shape, size, len(t.Data))
		}
		if i > 0 || metadata != nil {
			h.WriteByte(',')
		}
		name, err := json.Marshal(t.Name)
		if err != nil {
			return err
		}
		h.Write(name)
		h.WriteString(`:{"dtype":"` + string(t.DType) + `","shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				h.WriteByte(',')
			}
			h.WriteString(strconv.FormatUint(d, 10))
		}
		fmt.Fprintf(&h, `],"data_offsets":[%d,%d]}`, off, off+size)
		off += size
	}
	h.WriteByte('}')
	for (8+h.Len())%align != 0 {
		h.WriteByte(' ')
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(h.Len()))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(h.Bytes()); err != nil {
		return err
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}
