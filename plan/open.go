package plan

import (
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/minerva-llm/minerva/internal/mmap"
	"github.com/minerva-llm/minerva/ir"
)

// Weights serves tensor bytes by name: ir/eval.Weights, named here so that
// the plan format does not link the interpreter.
type Weights interface {
	WeightBytes(name string) ([]byte, error)
}

// File is a plan file mapped read-only and decoded (see Parse). Embedded
// weights are served from the mapping; a plan that refers to its model file
// has no weights here: resolving the reference is opening another model
// file, which is frontend.Open's job (it checks the model against
// Plan.Model and serves its tensors).
type File struct {
	Plan *Plan
	Path string // the plan file
	// App is the metadata of an app (OpenApp): opaque bytes its program
	// wrote beside the plan; nil for a plan file.
	App []byte

	unmap func() error
}

// Open maps the plan file at path read-only and decodes it (see OpenFile).
// Call Close when done.
//
// A plan file that is truncated by someone else while mapped makes reads of
// the lost pages fault; plans are not edited in place, so this is accepted
// for the sake of zero-copy weights.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("plan %s: no such file", path)
		}
		return nil, fmt.Errorf("plan: %w", err)
	}
	defer fh.Close() // a mapping outlives its descriptor
	return OpenFile(fh)
}

// OpenFile is Open of a file the caller has opened (fh.Name() names it in
// errors): it maps the file and checks and decodes it with Parse. The
// mapping outlives fh, which the caller closes.
func OpenFile(fh *os.File) (*File, error) {
	path := fh.Name()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	switch {
	case st.IsDir():
		return nil, &Error{Path: path, Kind: ErrNotPlan, Msg: "is a directory, not a plan file"}
	case !st.Mode().IsRegular():
		return nil, &Error{Path: path, Kind: ErrNotPlan, Msg: "is not a regular file"}
	case st.Size() == 0:
		return nil, withPath(errorf(ErrNotPlan, "file is empty: not a plan (make one with minervac compile)"), path)
	case st.Size() > math.MaxInt:
		return nil, fmt.Errorf("plan %s is too large to map (%d bytes)", path, st.Size())
	}
	data, unmap, err := mmap.File(fh, int(st.Size()))
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", path, err)
	}
	p, err := Parse(data, ParseOptions{})
	if err != nil {
		_ = unmap()
		return nil, withPath(err, path)
	}
	return &File{Plan: p, Path: path, unmap: unmap}, nil
}

// Check returns an ErrTarget error unless the plan was compiled for target.
func (f *File) Check(target string) error {
	if f.Plan.Target != target {
		return withPath(targetError(f.Plan.Target, target), f.Path)
	}
	return nil
}

// Close releases the mapping. The Plan's graph, vocabulary and other
// decoded sections stay usable; embedded weight bytes do not (lookups fail
// from then on).
func (f *File) Close() error {
	var err error
	if f.unmap != nil {
		err = f.unmap()
		f.unmap = nil
	}
	if f.Plan != nil {
		f.Plan.weights = nil
	}
	return err
}

// EmbeddedWeights serves the weights inside a plan that Parse decoded with
// them (slices of Parse's data); for other plans every lookup fails.
func (p *Plan) EmbeddedWeights() Weights { return planWeights{p} }

type planWeights struct{ p *Plan }

func (w planWeights) WeightBytes(name string) ([]byte, error) {
	b, ok := w.p.weights[name]
	if !ok {
		if !w.p.Embedded {
			return nil, fmt.Errorf("plan does not embed its weights (tensor %q)", name)
		}
		return nil, fmt.Errorf("tensor %q is not in the plan (or the plan was closed)", name)
	}
	return b, nil
}

// WeightSize is the number of bytes a weight value's type needs: what a
// plan's embedded tensor, or the referenced model file's, must hold.
func WeightSize(v *ir.Value) (int64, error) { return weightBytes(v) }

// WeightsDigest is what a plan records of the tensor data it was compiled
// against (ModelRef.WeightsDigest): "crc32c:" and the hex CRC-32C of the
// bytes of every weight value of g, in name order, as w serves them. It
// reads every weight.
func WeightsDigest(g *ir.Graph, w Weights) (string, error) {
	var names []string
	for _, v := range g.Values {
		if v.Op == ir.OpWeight {
			names = append(names, v.Name())
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var crc uint32
	for _, name := range names {
		b, err := w.WeightBytes(name)
		if err != nil {
			return "", err
		}
		crc = crc32.Update(crc, castagnoli, b)
	}
	return fmt.Sprintf("crc32c:%08x", crc), nil
}

// validDigest reports whether s has the form WeightsDigest writes.
func validDigest(s string) bool {
	hexPart, ok := strings.CutPrefix(s, "crc32c:")
	if !ok || len(hexPart) != 8 {
		return false
	}
	_, err := hex.DecodeString(hexPart)
	return err == nil && strings.ToLower(hexPart) == hexPart
}
