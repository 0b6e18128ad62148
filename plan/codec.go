package plan

import (
	"encoding/binary"
	"math"
)

// enc appends little-endian fields to a buffer.
type enc struct{ b []byte }

func (e *enc) u8(v uint8)   { e.b = append(e.b, v) }
func (e *enc) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *enc) i32(v int32)  { e.u32(uint32(v)) }
func (e *enc) str(s string) { e.u32(uint32(len(s))); e.b = append(e.b, s...) }

// dec reads little-endian fields from a bounded buffer. The first read past
// the end sets short (and what) and makes every later read return zero, so a
// decoder reads a whole record and checks once.
type dec struct {
	b     []byte
	off   int
	short bool
	what  string // the field that ran short
}

func (d *dec) rem() int { return len(d.b) - d.off }

func (d *dec) take(n int, what string) []byte {
	if d.short {
		return nil
	}
	if n < 0 || n > d.rem() {
		d.short, d.what = true, what
		return nil
	}
	s := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return s
}

func (d *dec) u8(what string) uint8 {
	if s := d.take(1, what); s != nil {
		return s[0]
	}
	return 0
}

func (d *dec) u32(what string) uint32 {
	if s := d.take(4, what); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

func (d *dec) u64(what string) uint64 {
	if s := d.take(8, what); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}

func (d *dec) i32(what string) int32 { return int32(d.u32(what)) }

// str reads a length-prefixed string; the length is checked against the
// bytes left before anything is allocated.
func (d *dec) str(what string) string {
	n := d.u32(what)
	if uint64(n) > uint64(d.rem()) {
		if !d.short {
			d.short, d.what = true, what
		}
		return ""
	}
	return string(d.take(int(n), what))
}

// count reads an element count and checks that the bytes left can hold that
// many elements of at least minSize bytes each, so a forged count cannot
// make the caller allocate more than the input's size.
func (d *dec) count(minSize int, what string) int {
	n := d.u32(what)
	if d.short {
		return 0
	}
	if uint64(n)*uint64(max(minSize, 1)) > uint64(d.rem()) {
		d.short, d.what = true, what
		return 0
	}
	return int(n)
}

func alignUp(n uint64) uint64 { return (n + Align - 1) &^ (Align - 1) }

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
