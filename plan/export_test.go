package plan

import (
	"io"
)

// ParseUnchecked parses without verifying checksums, so that fuzzed bytes
// reach the section decoders.
func ParseUnchecked(data []byte) (*Plan, error) {
	return Parse(data, ParseOptions{skipChecksums: true})
}

// WriteEdited writes p with the named sections' bytes replaced (nil: the
// section dropped), checksums recomputed.
func WriteEdited(w io.Writer, p *Plan, weights Weights, edit map[string][]byte) error {
	return write(w, p, weights, edit)
}

// Span is a section's place in a plan file.
type Span struct {
	Name           string
	Offset, Length uint64
}

// Sections lists the sections of a plan file, header first.
func Sections(data []byte) ([]Span, error) {
	h, err := parseHeader(data, ParseOptions{})
	if err != nil {
		return nil, err
	}
	spans := []Span{{"header", prefixSize, h.end - prefixSize}}
	for _, s := range h.sections {
		spans = append(spans, Span{s.name, s.offset, s.length})
	}
	return spans, nil
}
