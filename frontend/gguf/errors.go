package gguf

import (
	"fmt"
	"io"
)

// Error is the error for a malformed file. Its text is one line, prefixed
// "gguf: ", naming the field at fault and the byte offset where it was read,
// so a report about a broken file can be checked with a hex dump.
type Error struct {
	Path   string // file name when the error came from Open; "" from Parse
	Offset int64  // byte offset of the field at fault
	Msg    string // what is wrong, without the prefix and offset
	err    error  // io.ErrUnexpectedEOF for truncation
}

func (e *Error) Error() string {
	prefix := "gguf: "
	if e.Path != "" {
		prefix += e.Path + ": "
	}
	return fmt.Sprintf("%s%s at byte %d", prefix, e.Msg, e.Offset)
}

// Unwrap lets errors.Is(err, io.ErrUnexpectedEOF) detect truncated files.
func (e *Error) Unwrap() error { return e.err }

func errorAt(off int, format string, args ...any) *Error {
	return &Error{Offset: int64(off), Msg: fmt.Sprintf(format, args...)}
}

func truncated(off int, fileSize int, field string, need uint64) *Error {
	return &Error{
		Offset: int64(off),
		Msg:    fmt.Sprintf("%s truncated (needs %d bytes, the file is %d)", field, need, fileSize),
		err:    io.ErrUnexpectedEOF,
	}
}

// eof marks e as a truncation, so that errors.Is(e, io.ErrUnexpectedEOF).
func (e *Error) eof() *Error {
	e.err = io.ErrUnexpectedEOF
	return e
}
