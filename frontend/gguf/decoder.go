package gguf

import "encoding/binary"

// decoder walks a byte slice. Every read checks the bytes that remain first
// and reports failure with ok=false instead of panicking; the caller, which
// knows which field it was reading, turns that into an Error.
type decoder struct {
	data []byte
	off  int
}

// rem is the number of unread bytes.
func (d *decoder) rem() int { return len(d.data) - d.off }

// bytes returns the next n bytes (aliasing data) and advances past them.
func (d *decoder) bytes(n uint64) ([]byte, bool) {
	if n > uint64(d.rem()) {
		return nil, false
	}
	b := d.data[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return b, true
}

func (d *decoder) u32() (uint32, bool) {
	b, ok := d.bytes(4)
	if !ok {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b), true
}

func (d *decoder) u64() (uint64, bool) {
	b, ok := d.bytes(8)
	if !ok {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b), true
}
