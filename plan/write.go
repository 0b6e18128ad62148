package plan

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strings"

	"github.com/minerva-llm/minerva/ir"
)

// castagnoli is CRC-32C, computed with SSE4.2 on amd64 and the CRC32
// instructions on arm64: fast enough to check gigabytes of weights at load.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Fixed layout of the file's first bytes (see doc.go).
const (
	prefixSize   = 24      // magic, version, flags, header length, header CRC
	maxHeader    = 1 << 20 // header body limit: names and a section table
	maxName      = 4096    // longest string field of the header
	maxSections  = 256
	flagEmbedded = 1 << 0 // the weights section holds the weights
	knownFlags   = flagEmbedded
)

// Section names.
const (
	secGraph     = "graph"
	secTokenizer = "tokenizer"
	secConfig    = "config"
	secSampling  = "sampling"
	secMemory    = "memory"
	secWeights   = "weights"
	kernelPrefix = "kernels/"
)

// required are the sections every plan has, in file order.
var required = []string{secGraph, secTokenizer, secConfig, secSampling, secMemory}

// configJSON is the config section.
type configJSON struct {
	Config  Config `json:"config"`
	Context int    `json:"context"`
}

// section is one section being written.
type section struct {
	name   string
	data   []byte   // the bytes, for every section but weights
	parts  [][]byte // weights: index, then tensors at their offsets
	offs   []uint64 // weights: offset of each part within the section
	length uint64
	crc    uint32
	offset uint64 // in the file
}

// Write writes p as a plan file. With weights == nil the plan refers to the
// model file p.Model (Path must be absolute, and Size and HeaderSHA256 set:
// see Identify); otherwise every tensor a weight value of p.Graph names is
// copied into the plan, each at a 64-byte aligned file offset, so that a
// runtime can use them straight from a mapping of the plan.
//
// Write streams: the header, which holds every section's offset and
// checksum, comes first, so embedded weights are read twice (once for their
// checksum). Nothing is written when p is invalid.
func Write(w io.Writer, p *Plan, weights Weights) error {
	return write(w, p, weights, nil)
}

// write is Write with a test hook: edit replaces the bytes of the named
// sections (nil drops the section), so tests can make plans whose
// checksums hold but whose contents are wrong.
func write(w io.Writer, p *Plan, weights Weights, edit map[string][]byte) error {
	secs, flags, err := buildSections(p, weights)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if edit != nil {
		kept := secs[:0]
		for _, s := range secs {
			data, ok := edit[s.name]
			switch {
			case !ok:
			case data == nil:
				continue
			default:
				*s = section{name: s.name, data: data, length: uint64(len(data)), crc: crc32.Checksum(data, castagnoli)}
			}
			kept = append(kept, s)
		}
		secs = kept
	}
	header, err := buildHeader(p, secs, flags)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	pos := uint64(len(header))
	if _, err := bw.Write(header); err != nil {
		return fmt.Errorf("plan: write: %w", err)
	}
	var zeros [Align]byte
	pad := func(to uint64) error {
		if _, err := bw.Write(zeros[:to-pos]); err != nil {
			return err
		}
		pos = to
		return nil
	}
	for _, s := range secs {
		if err := pad(s.offset); err != nil {
			return fmt.Errorf("plan: write: %w", err)
		}
		if s.parts == nil {
			if _, err := bw.Write(s.data); err != nil {
				return fmt.Errorf("plan: write: %w", err)
			}
			pos += uint64(len(s.data))
			continue
		}
		for i, part := range s.parts {
			if err := pad(s.offset + s.offs[i]); err != nil {
				return fmt.Errorf("plan: write: %w", err)
			}
			if _, err := bw.Write(part); err != nil {
				return fmt.Errorf("plan: write: %w", err)
			}
			pos += uint64(len(part))
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("plan: write: %w", err)
	}
	return nil
}

// validName accepts the compiler, target and kernel names: printable ASCII
// without spaces, so they print on one line and make safe section names.
func validName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

func checkPlan(p *Plan, embedded bool) error {
	switch {
	case p == nil:
		return fmt.Errorf("no plan")
	case p.Graph == nil:
		return fmt.Errorf("plan has no graph")
	case p.Compiler == "" || len(p.Compiler) > maxName || strings.ContainsAny(p.Compiler, "\n\r"):
		return fmt.Errorf("compiler version %q must be one non-empty line", p.Compiler)
	case !validName(p.Target):
		return fmt.Errorf("target %q is not a name", p.Target)
	case p.Context <= 0:
		return fmt.Errorf("default context %d must be positive", p.Context)
	}
	if err := checkSampling(p.Sampling); err != nil {
		return err
	}
	if err := checkModelRef(p.Model, !embedded); err != nil {
		return err
	}
	if err := ir.Verify(p.Graph); err != nil {
		return fmt.Errorf("graph does not verify: %w", err)
	}
	for t := range p.Kernels {
		if !validName(t) {
			return fmt.Errorf("kernel target %q is not a name", t)
		}
	}
	return nil
}

func checkSampling(s Sampling) error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"temperature", s.Temperature}, {"top-p", s.TopP}, {"min-p", s.MinP}, {"repeat penalty", s.RepeatPenalty}} {
		if !finite(f.v) || f.v < 0 {
			return fmt.Errorf("sampling %s %v must be a number ≥ 0", f.name, f.v)
		}
	}
	if s.TopK < 0 {
		return fmt.Errorf("sampling top-k %d must be ≥ 0", s.TopK)
	}
	return nil
}

// checkModelRef checks the strings of a model reference; a reference that
// the runtime will resolve (referenced weights) must also be complete.
func checkModelRef(m ModelRef, resolve bool) error {
	for _, s := range []string{m.Path, m.HeaderSHA256, m.Name, m.Arch, m.WeightsDigest} {
		if len(s) > maxName {
			return fmt.Errorf("model reference field of %d bytes is too long", len(s))
		}
	}
	if m.Size < 0 {
		return fmt.Errorf("model size %d is negative", m.Size)
	}
	if m.HeaderSHA256 != "" {
		if b, err := hex.DecodeString(m.HeaderSHA256); err != nil || len(b) != 32 || strings.ToLower(m.HeaderSHA256) != m.HeaderSHA256 {
			return fmt.Errorf("model header hash %q is not a lower-case hex SHA-256", m.HeaderSHA256)
		}
	}
	if m.WeightsDigest != "" && !validDigest(m.WeightsDigest) {
		return fmt.Errorf("model weights digest %q is not crc32c: and 8 lower-case hex digits", m.WeightsDigest)
	}
	if !resolve {
		return nil
	}
	switch {
	case m.Path == "" || !filepath.IsAbs(m.Path):
		return fmt.Errorf("model path %q must be absolute when the weights are not embedded", m.Path)
	case m.Size <= 0 || m.HeaderSHA256 == "":
		return fmt.Errorf("model reference of %s lacks its size or header hash (use Identify)", m.Path)
	}
	return nil
}

// memoryOf derives the memory plan summary from a graph.
func memoryOf(g *ir.Graph) (Memory, error) {
	m := Memory{
		ArenaBytesPerToken:           g.Attrs.Int(attrArena, 0),
		ArenaLowerBoundBytesPerToken: g.Attrs.Int(attrLowerBound, 0),
		NaiveBytesPerToken:           g.Attrs.Int(attrNaive, 0),
		Unplanned:                    g.Attrs.Str(attrUnplanned, ""),
	}
	for _, v := range g.Values {
		if v.Op != ir.OpState && v.Op != ir.OpWeight {
			continue
		}
		n, err := elements(v.Type.Shape, true)
		if err != nil {
			return Memory{}, fmt.Errorf("%s %q: %w", v.Op, v.Name(), err)
		}
		b, err := v.Type.DType.RowBytes(n)
		if err != nil {
			return Memory{}, fmt.Errorf("%s %q: %w", v.Op, v.Name(), err)
		}
		if v.Op == ir.OpState {
			m.KVBytesPerPosition += b
		} else {
			m.WeightBytes += b
		}
	}
	return m, nil
}

// elements is the element count of a shape; symbolic dims count as 1 when
// skipSyms is set and are an error otherwise.
func elements(s ir.Shape, skipSyms bool) (int64, error) {
	n := int64(1)
	for _, d := range s {
		switch {
		case !d.IsConst() && skipSyms:
		case !d.IsConst():
			return 0, fmt.Errorf("shape %s is symbolic", s)
		case d.N < 0 || d.N > 0 && n > math.MaxInt64/d.N:
			return 0, fmt.Errorf("shape %s is too large", s)
		default:
			n *= d.N
		}
	}
	return n, nil
}

// weightBytes returns the byte size a weight value's type needs.
func weightBytes(v *ir.Value) (int64, error) {
	n, err := elements(v.Type.Shape, false)
	if err != nil {
		return 0, fmt.Errorf("weight %q: %w", v.Name(), err)
	}
	return v.Type.DType.RowBytes(n)
}

func buildSections(p *Plan, weights Weights) ([]*section, uint32, error) {
	embedded := weights != nil
	if err := checkPlan(p, embedded); err != nil {
		return nil, 0, err
	}
	var secs []*section
	add := func(name string, data []byte) {
		secs = append(secs, &section{name: name, data: data, length: uint64(len(data)), crc: crc32.Checksum(data, castagnoli)})
	}
	add(secGraph, []byte(ir.Print(p.Graph)))
	voc, err := encodeVocab(p.Vocab)
	if err != nil {
		return nil, 0, err
	}
	add(secTokenizer, voc)
	cfg, err := json.Marshal(configJSON{Config: p.Config, Context: p.Context})
	if err != nil {
		return nil, 0, fmt.Errorf("config: %w", err)
	}
	add(secConfig, cfg)
	smp, err := json.Marshal(p.Sampling)
	if err != nil {
		return nil, 0, fmt.Errorf("sampling: %w", err)
	}
	add(secSampling, smp)
	mem, err := memoryOf(p.Graph)
	if err != nil {
		return nil, 0, fmt.Errorf("memory plan: %w", err)
	}
	memJSON, err := json.Marshal(mem)
	if err != nil {
		return nil, 0, fmt.Errorf("memory plan: %w", err)
	}
	add(secMemory, memJSON)
	targets := make([]string, 0, len(p.Kernels))
	for t := range p.Kernels {
		targets = append(targets, t)
	}
	sort.Strings(targets)
	for _, t := range targets {
		add(kernelPrefix+t, p.Kernels[t])
	}
	var flags uint32
	if embedded {
		s, err := weightsSection(p.Graph, weights)
		if err != nil {
			return nil, 0, err
		}
		secs = append(secs, s)
		flags |= flagEmbedded
	}
	if len(secs) > maxSections {
		return nil, 0, fmt.Errorf("%d sections, more than %d", len(secs), maxSections)
	}
	return secs, flags, nil
}

// weightsSection lays out the weights section: an index, then each tensor
// at an offset that is a multiple of Align (the section itself starts at
// one, so the tensors are aligned in the file). The checksum is computed
// here, over the bytes Write will write, padding included.
func weightsSection(g *ir.Graph, weights Weights) (*section, error) {
	type entry struct {
		name string
		data []byte
	}
	var entries []entry
	indexSize := uint64(4)
	for _, v := range g.Values {
		if v.Op != ir.OpWeight {
			continue
		}
		want, err := weightBytes(v)
		if err != nil {
			return nil, err
		}
		data, err := weights.WeightBytes(v.Name())
		if err != nil {
			return nil, fmt.Errorf("embedding weights: %w", err)
		}
		if int64(len(data)) != want {
			return nil, fmt.Errorf("embedding weights: tensor %q has %d bytes, %s%s needs %d", v.Name(), len(data), v.Type.DType, v.Type.Shape, want)
		}
		if len(v.Name()) > maxName {
			return nil, fmt.Errorf("embedding weights: tensor name of %d bytes is too long", len(v.Name()))
		}
		entries = append(entries, entry{v.Name(), data})
		indexSize += 4 + uint64(len(v.Name())) + 16
	}
	s := &section{name: secWeights}
	idx := &enc{}
	idx.u32(uint32(len(entries)))
	s.parts = append(s.parts, nil) // the index, filled below
	s.offs = append(s.offs, 0)
	off := indexSize
	for _, e := range entries {
		off = alignUp(off)
		idx.str(e.name)
		idx.u64(off)
		idx.u64(uint64(len(e.data)))
		s.parts = append(s.parts, e.data)
		s.offs = append(s.offs, off)
		off += uint64(len(e.data))
	}
	s.parts[0] = idx.b
	s.length = off
	var zeros [Align]byte
	crc, pos := uint32(0), uint64(0)
	for i, part := range s.parts {
		crc = crc32.Update(crc, castagnoli, zeros[:s.offs[i]-pos])
		crc = crc32.Update(crc, castagnoli, part)
		pos = s.offs[i] + uint64(len(part))
	}
	s.crc = crc
	return s, nil
}

// buildHeader lays the sections out and returns the file's first bytes:
// the fixed prefix and the header body.
func buildHeader(p *Plan, secs []*section, flags uint32) ([]byte, error) {
	body := func() []byte {
		e := &enc{}
		last := secs[len(secs)-1]
		e.u64(last.offset + last.length) // file size
		e.str(p.Compiler)
		e.str(p.Target)
		e.str(p.Model.Path)
		e.u64(uint64(p.Model.Size))
		e.str(p.Model.HeaderSHA256)
		e.str(p.Model.Name)
		e.str(p.Model.Arch)
		e.str(p.Model.WeightsDigest)
		e.u32(uint32(len(secs)))
		for _, s := range secs {
			e.str(s.name)
			e.u64(s.offset)
			e.u64(s.length)
			e.u32(s.crc)
		}
		return e.b
	}
	// The body's size does not depend on the offsets: lay out, then fill.
	size := uint64(prefixSize + len(body()))
	if size-prefixSize > maxHeader {
		return nil, fmt.Errorf("header of %d bytes is larger than %d", size-prefixSize, maxHeader)
	}
	off := size
	for _, s := range secs {
		s.offset = alignUp(off)
		off = s.offset + s.length
	}
	b := body()
	out := make([]byte, prefixSize, prefixSize+len(b))
	copy(out, Magic)
	binary.LittleEndian.PutUint32(out[8:], FormatVersion)
	binary.LittleEndian.PutUint32(out[12:], flags)
	binary.LittleEndian.PutUint32(out[16:], uint32(len(b)))
	out = append(out, b...)
	binary.LittleEndian.PutUint32(out[20:], headerCRC(out[:20], b))
	return out, nil
}

// headerCRC covers the prefix before the CRC field and the header body.
func headerCRC(prefix, body []byte) uint32 {
	return crc32.Update(crc32.Checksum(prefix, castagnoli), castagnoli, body)
}
