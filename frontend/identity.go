package frontend

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/frontend/hf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/plan"
)

// Errors of a plan's referenced model file (ResolveModel); each is the
// Kind of a one-line error naming the plan and the model.
var (
	ErrModelMissing = errors.New("model file of the plan is missing")
	ErrModelChanged = errors.New("model file of the plan has changed")
)

// refError is a ResolveModel failure: the whole line, and its kind.
type refError struct {
	kind error
	msg  string
}

func (e *refError) Error() string { return e.msg }
func (e *refError) Unwrap() error { return e.kind }

// Identity is what a plan records of this model file (plan.ModelRef):
// absolute path, size, the SHA-256 of the bytes before the tensor data
// (header, metadata and tensor table), name and architecture. It is hashed
// from the mapping, once per Source: the hash is the expensive part of
// opening a model. For a model directory the path is the directory's, the
// size that of the files read, and the hash covers each file's name and
// size, the JSON files whole and each shard's header (hf.Fingerprint).
func (s *Source) Identity() (plan.ModelRef, error) {
	if s.ref != nil {
		return *s.ref, nil
	}
	switch {
	case s.Format == FormatPlan:
		return plan.ModelRef{}, fmt.Errorf("%s is a plan: only a model file can be referred to", s.Name)
	case s.abs == "":
		return plan.ModelRef{}, fmt.Errorf("plan: the model has no file to refer to: embed its weights")
	case s.Format == FormatHF && s.HF.Err != nil:
		return plan.ModelRef{}, s.HF.Err
	case s.Format == FormatHF:
		sum, size := s.HF.Fingerprint()
		s.ref = &plan.ModelRef{
			Path:         s.abs,
			Size:         size,
			HeaderSHA256: hex.EncodeToString(sum[:]),
			Name:         filepath.Base(s.abs),
			Arch:         s.HF.Architecture(),
		}
		return *s.ref, nil
	}
	header := s.GGUF.Header()
	if header == nil {
		return plan.ModelRef{}, fmt.Errorf("%s: the model file was closed", s.Name)
	}
	sum := sha256.Sum256(header)
	name, _ := s.GGUF.String("general.name")
	s.ref = &plan.ModelRef{
		Path:         s.abs,
		Size:         s.size,
		HeaderSHA256: hex.EncodeToString(sum[:]),
		Name:         name,
		Arch:         s.GGUF.Architecture(),
	}
	return *s.ref, nil
}

// ResolveModel opens the model file a plan without embedded weights refers
// to and checks that it is the one the plan was compiled against: same
// size, same header hash, and every weight of the graph in it with the
// graph's type. lend, when not nil, is that model already open (Options.Lend):
// it is checked and borrowed instead. Open does this unless told
// Options.Unresolved.
func (s *Source) ResolveModel(lend *Source) error {
	if s.Format != FormatPlan || s.Plan.Embedded || s.Model != nil {
		return nil
	}
	ref := s.Plan.Model
	if lend != nil && lend.Format != FormatPlan && lend.abs == ref.Path {
		now, err := lend.Identity()
		if err != nil {
			return err
		}
		if err := checkModel(s.Path, s.Plan, lend.tensors(), now); err != nil {
			return err
		}
		s.Model, s.borrowed = lend, true
		return nil
	}
	changed := func(format string, args ...any) error { return modelChanged(s.Path, ref.Path, format, args...) }
	fh, st, err := openFile(ref.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &refError{ErrModelMissing, fmt.Sprintf("plan %s refers to model %s, which is missing: recompile or use --embed-weights", s.Path, ref.Path)}
	case err != nil:
		return fmt.Errorf("plan %s refers to model %s: %w", s.Path, ref.Path, err)
	}
	defer fh.Close()
	var m *Source
	switch {
	case st.IsDir() && !isFile(filepath.Join(ref.Path, hf.ConfigName)):
		return changed("it is no longer a regular file or a model directory")
	case st.IsDir():
		// A model directory: its files are opened, each once, and it is
		// identified as Identity does; checkModel compares.
		d, err := hf.Open(ref.Path, openOnly)
		if err != nil {
			return changed("it no longer loads: %v", err)
		}
		_, size := d.Fingerprint()
		m = &Source{Path: ref.Path, Name: ref.Path, Format: FormatHF, HF: d, abs: ref.Path, size: size}
	case !st.Mode().IsRegular():
		return changed("it is no longer a regular file")
	case st.Size() != ref.Size:
		return changed("size %d bytes, now %d", ref.Size, st.Size())
	default:
		f, err := gguf.OpenFile(fh)
		if err != nil {
			return changed("it no longer parses: %v", err)
		}
		m = &Source{Path: ref.Path, Name: ref.Path, Format: FormatGGUF, GGUF: f, abs: ref.Path, size: st.Size()}
	}
	now, err := m.Identity()
	if err == nil {
		err = checkModel(s.Path, s.Plan, m.tensors(), now)
	}
	if err != nil {
		m.Close()
		return err
	}
	s.Model = m
	return nil
}

// modelChanged is the ErrModelChanged error of the plan at planPath, whose
// model file model differs from what it was compiled against (why).
func modelChanged(planPath, model, format string, args ...any) error {
	return &refError{ErrModelChanged, fmt.Sprintf("model file %s has changed since the plan was compiled (%s): recompile %s",
		model, fmt.Sprintf(format, args...), planPath)}
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// tensorTable is what checkModel reads of a model: a GGUF file or a model
// directory (arch.File has both methods).
type tensorTable interface {
	Tensor(name string) (*gguf.TensorInfo, bool)
	WeightBytes(name string) ([]byte, error)
}

// tensors is the model source's tensor table.
func (s *Source) tensors() tensorTable {
	if s.Format == FormatHF {
		return s.HF
	}
	return s.GGUF
}

// checkModel checks that model f, identified as now, is the one plan p
// (at planPath) was compiled against.
func checkModel(planPath string, p *plan.Plan, f tensorTable, now plan.ModelRef) error {
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
		want, err := plan.WeightSize(v)
		var data []byte
		if ok && err == nil {
			data, err = f.WeightBytes(v.Name())
		}
		if !ok || err != nil || t.Type != v.Type.DType || int64(len(data)) != want {
			return changed("tensor %q does not match the graph's %s", v.Name(), v.Type)
		}
	}
	return nil
}
