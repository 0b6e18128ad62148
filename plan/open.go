package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/internal/mmap"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
)

// Loaded is a plan opened from a file, with the weights it runs on: inside
// the plan's own mapping (embedded) or in the referenced model file, which
// Open has mapped and checked.
type Loaded struct {
	Plan *Plan
	Path string // the plan file

	unmap    func() error // the plan's mapping
	model    *gguf.File   // the referenced model, nil when embedded
	borrowed bool         // model is the caller's (OpenOptions): Close leaves it open
}

// Open maps the plan file at path read-only and checks it (see Parse). For
// a plan without embedded weights it opens the model file the plan refers
// to and checks that it is the one the plan was compiled against: same size
// and same header hash (metadata and tensor table). Call Close when done.
//
// A plan or model file that is truncated by someone else while mapped makes
// reads of the lost pages fault; neither is edited in place, so this is
// accepted for the sake of zero-copy weights.
func Open(path string) (*Loaded, error) { return OpenWith(path, OpenOptions{}) }

// OpenOptions lend Open what the caller already has open.
type OpenOptions struct {
	// Model is the model file a referenced plan names, already open and
	// identified (Ref, from Identify) by the caller, who keeps owning it:
	// the plan then neither opens nor hashes it again, and checks Ref
	// against what the plan recorded instead.
	Model *gguf.File
	Ref   ModelRef
}

// OpenWith is Open using what o lends.
func OpenWith(path string, o OpenOptions) (*Loaded, error) {
	fh, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("plan %s: no such file", path)
		}
		return nil, fmt.Errorf("plan: %w", err)
	}
	defer fh.Close() // a mapping outlives its descriptor
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
	l := &Loaded{Plan: p, Path: path, unmap: unmap}
	if !p.Embedded {
		if o.Model != nil && o.Ref.Path == p.Model.Path {
			if err := checkModel(path, p, o.Model, o.Ref); err != nil {
				_ = unmap()
				return nil, err
			}
			l.model, l.borrowed = o.Model, true
		} else if l.model, err = openModel(path, p); err != nil {
			_ = unmap()
			return nil, err
		}
	}
	return l, nil
}

// openModel opens and checks the model file a referenced plan names.
func openModel(planPath string, p *Plan) (*gguf.File, error) {
	ref := p.Model
	changed := func(format string, args ...any) error { return modelChanged(planPath, ref.Path, format, args...) }
	st, err := os.Stat(ref.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &Error{Path: planPath, Kind: ErrModelMissing, whole: true,
			Msg: fmt.Sprintf("plan %s refers to model %s, which is missing: recompile or use --embed-weights", planPath, ref.Path)}
	case err != nil:
		return nil, fmt.Errorf("plan %s refers to model %s: %w", planPath, ref.Path, err)
	case !st.Mode().IsRegular():
		return nil, changed("it is no longer a regular file")
	case st.Size() != ref.Size:
		return nil, changed("size %d bytes, now %d", ref.Size, st.Size())
	}
	f, err := gguf.Open(ref.Path)
	if err != nil {
		return nil, changed("it no longer parses: %v", err)
	}
	now, err := Identify(ref.Path, f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("plan %s refers to model %s: %w", planPath, ref.Path, err)
	}
	if err := checkModel(planPath, p, f, now); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// modelChanged is the ErrModelChanged error of the plan at planPath, whose
// model file model differs from what it was compiled against (why).
func modelChanged(planPath, model, format string, args ...any) error {
	return &Error{Path: planPath, Kind: ErrModelChanged, whole: true,
		Msg: fmt.Sprintf("model file %s has changed since the plan was compiled (%s): recompile %s",
			model, fmt.Sprintf(format, args...), planPath)}
}

// checkModel checks that model file f, identified as now, is the one plan p
// (at planPath) was compiled against.
func checkModel(planPath string, p *Plan, f *gguf.File, now ModelRef) error {
	ref := p.Model
	changed := func(format string, args ...any) error { return modelChanged(planPath, ref.Path, format, args...) }
	if now.Size != ref.Size || now.HeaderSHA256 != ref.HeaderSHA256 {
		return changed("header sha256 %.12s…, now %.12s…", ref.HeaderSHA256, now.HeaderSHA256)
	}
	// Same header, so the same tensor table; checked anyway, cheaply, so
	// that a plan compiled against some other file fails here, not mid-run.
	for _, v := range p.Graph.Values {
		if v.Op != ir.OpWeight {
			continue
		}
		t, ok := f.Tensor(v.Name())
		want, err := weightBytes(v)
		if !ok || err != nil || t.Type != v.Type.DType || int64(len(f.TensorData(t))) != want {
			return changed("tensor %q does not match the graph's %s", v.Name(), v.Type)
		}
	}
	return nil
}

// Check returns an ErrTarget error unless the plan was compiled for target.
func (l *Loaded) Check(target string) error {
	if l.Plan.Target != target {
		return withPath(targetError(l.Plan.Target, target), l.Path)
	}
	return nil
}

// Weights serves the plan's weights to a session: from the plan's own
// mapping when they are embedded, else from the referenced model file's.
// The bytes are valid until Close.
func (l *Loaded) Weights() eval.Weights {
	if l.model != nil {
		return modelWeights{l.model}
	}
	return l.Plan.EmbeddedWeights()
}

// Close releases the mappings. The Plan's graph, vocabulary and other
// decoded sections stay usable; weight bytes do not.
func (l *Loaded) Close() error {
	var errs []error
	if l.model != nil && !l.borrowed {
		errs = append(errs, l.model.Close())
	}
	l.model = nil
	if l.unmap != nil {
		errs = append(errs, l.unmap())
		l.unmap = nil
	}
	if l.Plan != nil {
		l.Plan.weights = nil
	}
	return errors.Join(errs...)
}

// EmbeddedWeights serves the weights inside a plan that Parse decoded with
// them (slices of Parse's data); for other plans every lookup fails.
func (p *Plan) EmbeddedWeights() eval.Weights { return planWeights{p} }

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

type modelWeights struct{ f *gguf.File }

func (w modelWeights) WeightBytes(name string) ([]byte, error) {
	t, ok := w.f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("tensor %q is not in the model file", name)
	}
	b := w.f.TensorData(t)
	if b == nil {
		return nil, fmt.Errorf("tensor %q: the model file was closed", name)
	}
	return b, nil
}

// Identify computes the reference a plan keeps to model file path, which f
// is the parsed form of: absolute path, size, SHA-256 of the bytes before
// the tensor data, name and architecture.
func Identify(path string, f *gguf.File) (ModelRef, error) {
	if path == "" {
		return ModelRef{}, fmt.Errorf("plan: the model has no file to refer to: embed its weights")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return ModelRef{}, fmt.Errorf("plan: %w", err)
	}
	fh, err := os.Open(abs)
	if err != nil {
		return ModelRef{}, fmt.Errorf("plan: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return ModelRef{}, fmt.Errorf("plan: %w", err)
	}
	if st.Size() != f.Size() || f.DataOffset > uint64(st.Size()) {
		return ModelRef{}, fmt.Errorf("plan: %s has %d bytes but the parsed model %d: not the same file", abs, st.Size(), f.Size())
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(fh, 0, int64(f.DataOffset))); err != nil {
		return ModelRef{}, fmt.Errorf("plan: reading %s: %w", abs, err)
	}
	name, _ := f.String("general.name")
	return ModelRef{
		Path:         abs,
		Size:         st.Size(),
		HeaderSHA256: hex.EncodeToString(h.Sum(nil)),
		Name:         name,
		Arch:         f.Architecture(),
	}, nil
}
