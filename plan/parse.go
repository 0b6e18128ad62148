package plan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/minerva-llm/minerva/ir"
)

// ParseOptions tune Parse. Parse never touches the file system: resolving a
// referenced model file is Open's job.
type ParseOptions struct {
	// ExpectTarget, when not empty, makes a plan compiled for another
	// target an error (ErrTarget).
	ExpectTarget string

	// skipChecksums lets a test's fuzzed section bytes reach the decoders
	// (a mutation would otherwise almost always stop at a checksum).
	skipChecksums bool
}

// sectionEntry is one row of the header's section table.
type sectionEntry struct {
	name           string
	offset, length uint64
	crc            uint32
}

// header is the decoded fixed prefix and header body.
type header struct {
	flags    uint32
	end      uint64 // first byte after the header body
	fileSize uint64
	compiler string
	target   string
	model    ModelRef
	sections []sectionEntry
}

// Parse decodes and checks a whole plan file: magic, format version, the
// header's checksum, the section table against the file's size, every
// section's checksum, then every section's contents. Errors are *Error,
// one line, naming the section at fault; Parse never panics and allocates
// no more than a small multiple of len(data), whatever the input.
//
// For an embedded plan the weights stay in data (no copy): data must stay
// valid and unchanged while the plan's weights are used. Everything else is
// copied out.
func Parse(data []byte, opts ParseOptions) (*Plan, error) {
	h, err := parseHeader(data, opts)
	if err != nil {
		return nil, err
	}
	secs := map[string][]byte{}
	for _, s := range h.sections {
		b := data[s.offset : s.offset+s.length : s.offset+s.length]
		if !opts.skipChecksums {
			if got := crc32.Checksum(b, castagnoli); got != s.crc {
				return nil, errorf(ErrChecksum, "checksum mismatch in section %q (bytes [%d, %d): stored crc32c %08x, computed %08x): the file is corrupt",
					s.name, s.offset, s.offset+s.length, s.crc, got)
			}
		}
		secs[s.name] = b
	}
	p := &Plan{
		Compiler: h.compiler,
		Target:   h.target,
		Model:    h.model,
		Embedded: h.flags&flagEmbedded != 0,
	}
	if err := decodeSections(p, secs); err != nil {
		return nil, err
	}
	return p, nil
}

func undecodable(section string, err error) *Error {
	return errorf(ErrCorrupt, "section %q does not decode: %v", section, err)
}

func parseHeader(data []byte, opts ParseOptions) (*header, error) {
	n := uint64(len(data))
	switch {
	case n == 0:
		return nil, errorf(ErrNotPlan, "file is empty: not a plan (make one with minervac compile)")
	case n < uint64(len(Magic)) && strings.HasPrefix(Magic, string(data)):
		return nil, errorf(ErrTruncated, "truncated: the file ends at byte %d, inside the magic", n)
	case n >= 4 && string(data[:4]) == "GGUF":
		return nil, errorf(ErrNotPlan, "not a plan but a GGUF model file (compile it with minervac compile)")
	case n < uint64(len(Magic)) || string(data[:len(Magic)]) != Magic:
		return nil, errorf(ErrNotPlan, "not a plan file (it starts with %q, not %q)", data[:min(n, uint64(len(Magic)))], Magic)
	case n < 12:
		return nil, errorf(ErrTruncated, "truncated: the file ends at byte %d, inside the %d-byte fixed header", n, prefixSize)
	}
	if v := binary.LittleEndian.Uint32(data[8:]); v != FormatVersion {
		return nil, errorf(ErrVersion, "format version %d (this minervac reads version %d; recompile the model)", v, FormatVersion)
	}
	if n < prefixSize {
		return nil, errorf(ErrTruncated, "truncated: the file ends at byte %d, inside the %d-byte fixed header", n, prefixSize)
	}
	h := &header{flags: binary.LittleEndian.Uint32(data[12:])}
	size := uint64(binary.LittleEndian.Uint32(data[16:]))
	if size > maxHeader {
		return nil, errorf(ErrCorrupt, "header length %d is larger than the limit %d", size, maxHeader)
	}
	h.end = prefixSize + size
	if h.end > n {
		return nil, errorf(ErrTruncated, "truncated inside the header: it spans bytes [0, %d) but the file has %d bytes", h.end, n)
	}
	body := data[prefixSize:h.end]
	if stored, got := binary.LittleEndian.Uint32(data[20:]), headerCRC(data[:20], body); stored != got && !opts.skipChecksums {
		return nil, errorf(ErrChecksum, "checksum mismatch in the header (stored crc32c %08x, computed %08x): the file is corrupt", stored, got)
	}
	if h.flags&^knownFlags != 0 {
		return nil, errorf(ErrCorrupt, "unknown header flags %#x", h.flags&^knownFlags)
	}
	d := &dec{b: body}
	h.fileSize = d.u64("file size")
	h.compiler = d.str("compiler version")
	h.target = d.str("target")
	h.model.Path = d.str("model path")
	h.model.Size = int64(d.u64("model size"))
	h.model.HeaderSHA256 = d.str("model header hash")
	h.model.Name = d.str("model name")
	h.model.Arch = d.str("model architecture")
	h.model.WeightsDigest = d.str("model weights digest")
	count := d.count(4+16+4, "section count")
	if !d.short && count > maxSections {
		return nil, errorf(ErrCorrupt, "header lists %d sections, more than %d", count, maxSections)
	}
	h.sections = make([]sectionEntry, count)
	for i := range h.sections {
		s := &h.sections[i]
		s.name = d.str("section name")
		s.offset = d.u64("section offset")
		s.length = d.u64("section length")
		s.crc = d.u32("section checksum")
	}
	switch {
	case d.short:
		return nil, errorf(ErrCorrupt, "header ends inside the %s (byte %d of %d)", d.what, prefixSize+d.off, h.end)
	case d.rem() != 0:
		return nil, errorf(ErrCorrupt, "%d unused bytes at the end of the header", d.rem())
	case h.compiler == "" || len(h.compiler) > maxName || strings.ContainsAny(h.compiler, "\n\r"):
		return nil, errorf(ErrCorrupt, "compiler version %q is not one line", h.compiler)
	case !validName(h.target):
		return nil, errorf(ErrCorrupt, "target %q is not a name", h.target)
	}
	embedded := h.flags&flagEmbedded != 0
	if err := checkModelRef(h.model, !embedded); err != nil {
		return nil, errorf(ErrCorrupt, "%v", err)
	}
	if opts.ExpectTarget != "" && h.target != opts.ExpectTarget {
		return nil, targetError(h.target, opts.ExpectTarget)
	}
	if err := checkSectionTable(h, data, embedded); err != nil {
		return nil, err
	}
	return h, nil
}

func targetError(have, want string) *Error {
	return errorf(ErrTarget, "compiled for target %s, not %s: recompile with -target %s", have, want, want)
}

// checkSectionTable checks names, alignment and order, then that every
// section lies inside the file, naming the first section the file's end cuts.
func checkSectionTable(h *header, data []byte, embedded bool) error {
	n := uint64(len(data))
	seen := map[string]bool{}
	prevEnd := h.end
	for _, s := range h.sections {
		switch {
		case !knownSection(s.name):
			return errorf(ErrCorrupt, "unknown section %q", s.name)
		case seen[s.name]:
			return errorf(ErrCorrupt, "section %q is listed twice", s.name)
		case s.offset%Align != 0:
			return errorf(ErrCorrupt, "section %q starts at byte %d, not a multiple of %d", s.name, s.offset, Align)
		case s.offset < prevEnd:
			return errorf(ErrCorrupt, "section %q starts at byte %d, inside the header or the previous section (which ends at %d)", s.name, s.offset, prevEnd)
		case s.length > h.fileSize || s.offset > h.fileSize-s.length:
			return errorf(ErrCorrupt, "section %q spans bytes [%d, %d), past the end of the plan at %d", s.name, s.offset, s.offset+s.length, h.fileSize)
		}
		seen[s.name] = true
		prevEnd = s.offset + s.length
	}
	prevEnd = h.end
	for _, s := range h.sections {
		if s.offset+s.length > n {
			return errorf(ErrTruncated, "truncated inside section %q: it spans bytes [%d, %d) but the file has %d bytes", s.name, s.offset, s.offset+s.length, n)
		}
		// Padding is not under a checksum; zero padding makes every byte
		// of a plan checked.
		for i := prevEnd; i < s.offset; i++ {
			if data[i] != 0 {
				return errorf(ErrCorrupt, "nonzero byte %d in the padding before section %q", i, s.name)
			}
		}
		prevEnd = s.offset + s.length
	}
	switch {
	case n < h.fileSize:
		return errorf(ErrTruncated, "truncated: the file has %d bytes, the plan %d", n, h.fileSize)
	case n > h.fileSize:
		return errorf(ErrCorrupt, "%d unexpected bytes after the end of the plan at byte %d", n-h.fileSize, h.fileSize)
	}
	for _, name := range required {
		if !seen[name] {
			return errorf(ErrCorrupt, "missing required section %q", name)
		}
	}
	switch {
	case embedded && !seen[secWeights]:
		return errorf(ErrCorrupt, "missing required section %q (the header says the weights are embedded)", secWeights)
	case !embedded && seen[secWeights]:
		return errorf(ErrCorrupt, "has a %q section but the header says the weights are not embedded", secWeights)
	}
	return nil
}

func knownSection(name string) bool {
	switch name {
	case secGraph, secTokenizer, secConfig, secSampling, secMemory, secWeights:
		return true
	}
	t, ok := strings.CutPrefix(name, kernelPrefix)
	return ok && validName(t)
}

// strictJSON decodes one JSON value into v, rejecting unknown fields and
// anything after the value.
func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return fmt.Errorf("unexpected data after the JSON value")
	}
	return nil
}

func decodeSections(p *Plan, secs map[string][]byte) error {
	g, err := ir.Parse(string(secs[secGraph]))
	if err != nil {
		return undecodable(secGraph, err)
	}
	p.Graph = g
	if p.Vocab, err = decodeVocab(secs[secTokenizer]); err != nil {
		return undecodable(secTokenizer, err)
	}
	var cfg configJSON
	if err := strictJSON(secs[secConfig], &cfg); err != nil {
		return undecodable(secConfig, err)
	}
	if cfg.Context <= 0 {
		return undecodable(secConfig, fmt.Errorf("default context %d is not positive", cfg.Context))
	}
	p.Config, p.Context = cfg.Config, cfg.Context
	if err := strictJSON(secs[secSampling], &p.Sampling); err != nil {
		return undecodable(secSampling, err)
	}
	if err := checkSampling(p.Sampling); err != nil {
		return undecodable(secSampling, err)
	}
	if err := strictJSON(secs[secMemory], &p.Memory); err != nil {
		return undecodable(secMemory, err)
	}
	if want, err := memoryOf(g); err != nil || want != p.Memory {
		return errorf(ErrCorrupt, "section %q disagrees with the graph: it says %+v, the graph gives %+v", secMemory, p.Memory, want)
	}
	for name, b := range secs {
		if t, ok := strings.CutPrefix(name, kernelPrefix); ok {
			if p.Kernels == nil {
				p.Kernels = map[string][]byte{}
			}
			p.Kernels[t] = bytes.Clone(b)
			if p.Kernels[t] == nil {
				p.Kernels[t] = []byte{}
			}
		}
	}
	if p.Embedded {
		if p.weights, err = decodeWeights(secs[secWeights], g); err != nil {
			return undecodable(secWeights, err)
		}
	}
	return nil
}

// decodeWeights reads the weights index and checks that it holds every
// weight of the graph, at the size its type needs. The tensors are slices
// of b.
func decodeWeights(b []byte, g *ir.Graph) (map[string][]byte, error) {
	d := &dec{b: b}
	count := d.count(4+16, "tensor count")
	type entry struct {
		name      string
		off, size uint64
	}
	entries := make([]entry, count)
	for i := range entries {
		e := &entries[i]
		e.name = d.str("tensor name")
		e.off = d.u64("tensor offset")
		e.size = d.u64("tensor size")
	}
	if d.short {
		return nil, fmt.Errorf("index ends inside the %s at byte %d of %d", d.what, d.off, len(b))
	}
	n := uint64(len(b))
	end := uint64(d.off) // the tensors follow the index, in order
	out := make(map[string][]byte, count)
	for _, e := range entries {
		switch {
		case e.off%Align != 0:
			return nil, fmt.Errorf("tensor %q starts at section byte %d, not a multiple of %d", e.name, e.off, Align)
		case e.off < end:
			return nil, fmt.Errorf("tensor %q at section byte %d overlaps the index or the previous tensor (which ends at %d)", e.name, e.off, end)
		case e.size > n || e.off > n-e.size:
			return nil, fmt.Errorf("tensor %q spans section bytes [%d, %d), past the section's end at %d", e.name, e.off, e.off+e.size, n)
		}
		if _, dup := out[e.name]; dup {
			return nil, fmt.Errorf("tensor %q is listed twice", e.name)
		}
		end = e.off + e.size
		out[e.name] = b[e.off:end:end]
	}
	for _, v := range g.Values {
		if v.Op != ir.OpWeight {
			continue
		}
		data, ok := out[v.Name()]
		if !ok {
			return nil, fmt.Errorf("no tensor %q, which the graph uses", v.Name())
		}
		want, err := weightBytes(v)
		if err != nil {
			return nil, err
		}
		if int64(len(data)) != want {
			return nil, fmt.Errorf("tensor %q has %d bytes, %s%s needs %d", v.Name(), len(data), v.Type.DType, v.Type.Shape, want)
		}
	}
	return out, nil
}
