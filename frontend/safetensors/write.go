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
	// Produce, when Data is nil, writes the elements while the file is
	// written, so that a tensor need not be held in memory; it must write
	// exactly the bytes its dtype and shape give.
	Produce func(io.Writer) error
}

// Size is the tensor's byte size from its dtype and shape (0 for an
// unknown dtype).
func (t *WriteTensor) Size() uint64 {
	size := t.DType.Size()
	for _, d := range t.Shape {
		size *= d
	}
	return size
}

// Write writes a safetensors file: the metadata first, then the tensors'
// entries and data in the order given. The header is padded with spaces
// to a multiple of align: 8 as the safetensors library writes it (every
// tensor 8-byte aligned), 1 for no padding as mlx writes it. It is for
// tests and synthetic models (synth writes model directories with it,
// streaming each tensor through Produce); it refuses a tensor whose data
// does not match its dtype and shape.
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
		size := t.Size()
		if t.DType.Size() == 0 {
			return fmt.Errorf("safetensors: tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		if t.Data == nil && t.Produce == nil {
			return fmt.Errorf("safetensors: tensor %q has neither data nor a producer", t.Name)
		}
		if t.Data != nil && size != uint64(len(t.Data)) {
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
		if t.Data != nil {
			if _, err := w.Write(t.Data); err != nil {
				return err
			}
			continue
		}
		cw := &countWriter{w: w}
		if err := t.Produce(cw); err != nil {
			return fmt.Errorf("safetensors: tensor %q: %w", t.Name, err)
		}
		if cw.n != t.Size() {
			return fmt.Errorf("safetensors: tensor %q: %s %v is %d bytes, its producer wrote %d", t.Name, t.DType, t.Shape, t.Size(), cw.n)
		}
	}
	return nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n uint64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	return n, err
}
