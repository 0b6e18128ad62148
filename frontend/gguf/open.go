package gguf

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/minerva-llm/minerva/internal/mmap"
)

// Open maps the file at path read-only (reads it into memory on systems
// without mmap support here) and parses it. Call Close when done with the
// tensor data. A file that is truncated by someone else while mapped makes
// reads of the lost pages fault; GGUF files are not edited in place, so this
// is accepted for the sake of zero-copy weights.
//
// Commands open model files through frontend.Open, which opens each file
// once and hands the descriptor to OpenFile.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close() // a mapping outlives its descriptor
	return OpenFile(fh)
}

// OpenFile is Open of a file the caller has opened (fh.Name() names it in
// errors). The mapping outlives fh, which the caller closes.
func OpenFile(fh *os.File) (*File, error) {
	path := fh.Name()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("gguf: %s is a directory, not a GGUF file", path)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s is not a regular file", path)
	}
	size := st.Size()
	if size == 0 {
		return nil, &Error{Path: path, Msg: "file is empty", err: io.ErrUnexpectedEOF}
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("gguf: %s is too large to map (%d bytes)", path, size)
	}
	data, unmap, err := mmap.File(fh, int(size))
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f, err := Parse(data)
	if err != nil {
		_ = unmap()
		var e *Error
		if errors.As(err, &e) {
			e.Path = path
		}
		return nil, err
	}
	f.closeFn = unmap
	return f, nil
}
