package safetensors

import (
	"fmt"
	"strconv"
)

// Error is a malformed file. Its text is one line, prefixed
// "safetensors: ", naming the file, the tensor at fault (if one is) and the
// byte offset in that file where the fault was read, so that a report can
// be checked with a hex dump.
type Error struct {
	Path   string // the file ("" from Parse given no name)
	Tensor string // the tensor at fault; "" when the fault is the file's
	Offset int64  // byte offset in the file; -1 when no one byte is at fault
	Msg    string // what is wrong
}

func (e *Error) Error() string {
	s := "safetensors: "
	if e.Path != "" {
		s += e.Path + ": "
	}
	if e.Tensor != "" {
		s += "tensor " + quote(e.Tensor) + ": "
	}
	s += e.Msg
	if e.Offset >= 0 {
		s += " (at byte " + strconv.FormatInt(e.Offset, 10) + ")"
	}
	return s
}

func errorf(path, tensor string, off int64, format string, args ...any) *Error {
	return &Error{Path: path, Tensor: tensor, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// quote quotes s for a message, cut to 120 bytes: names come from the
// file, and a megabyte-long one must not make a megabyte-long line.
func quote(s string) string {
	if len(s) > 120 {
		return strconv.Quote(s[:120]) + "…"
	}
	return strconv.Quote(s)
}
