package gguf

import (
	"math"
	"strconv"
	"strings"
)

// maxShown is how many array elements String prints before abbreviating:
// enough to recognise a token table, short enough for one terminal line.
const maxShown = 8

// String renders v for humans (`minervac inspect`): numbers in decimal,
// strings quoted, arrays as [a, b, c, ... 31992 more] after maxShown elements.
func (v Value) String() string {
	var b strings.Builder
	v.render(&b)
	return b.String()
}

func (v Value) render(b *strings.Builder) {
	if !v.ok {
		b.WriteString("<invalid>")
		return
	}
	switch v.typ {
	case TypeString:
		b.WriteString(strconv.Quote(v.str))
	case TypeBool:
		b.WriteString(strconv.FormatBool(v.bits != 0))
	case TypeFloat32:
		b.WriteString(strconv.FormatFloat(float64(math.Float32frombits(uint32(v.bits))), 'g', -1, 32))
	case TypeFloat64:
		b.WriteString(strconv.FormatFloat(math.Float64frombits(v.bits), 'g', -1, 64))
	case TypeArray:
		a := v.arr
		if a.err != "" {
			b.WriteString("<invalid array: " + a.err + ">")
			return
		}
		b.WriteByte('[')
		for i := 0; i < a.n && i < maxShown; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			v.Index(i).render(b)
		}
		if a.n > maxShown {
			b.WriteString(", ... " + itoa(a.n-maxShown) + " more")
		}
		b.WriteByte(']')
	default:
		if v.typ.isSigned() {
			b.WriteString(strconv.FormatInt(int64(v.bits), 10))
		} else {
			b.WriteString(strconv.FormatUint(v.bits, 10))
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
