// Package frontend is the one way a model comes in. Open recognizes what a
// path names (a GGUF model file, a Hugging Face model directory or a file
// inside one, or a Minerva plan), opens, maps and identifies each file
// once, and returns a Source: the one value every minervac command starts
// from.
//
// The formats themselves live below: frontend/gguf reads and writes GGUF
// files, frontend/safetensors the SafeTensors container, frontend/hf a
// model directory (config.json and its shards), package plan reads and
// writes plans (a floor lower, so that reading a plan needs no frontend),
// and frontend/arch turns a model's metadata and tensors into a graph.
package frontend

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/frontend/hf"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/plan"
	"github.com/minerva-llm/minerva/tokenizer"
)

// Format is the kind of model source Open recognized.
type Format string

const (
	// FormatGGUF is a GGUF model file: metadata, tokenizer and tensors; its
	// graph is built by frontend/arch (Source.Build).
	FormatGGUF Format = "GGUF"
	// FormatPlan is a plan written by minervac compile: a compiled graph,
	// tokenizer, config and kernels, with its weights embedded or in the
	// model file it refers to.
	FormatPlan Format = "plan"
	// FormatHF is a Hugging Face model directory: config.json, SafeTensors
	// weights (one file or shards), generation config and tokenizer, as
	// transformers and mlx-lm write them; its graph is built by
	// frontend/arch from what frontend/hf translates.
	FormatHF Format = "hf"
)

// Source is a model opened once. Its files stay mapped until Close; nothing
// of it opens, maps or hashes a file a second time.
type Source struct {
	// Path is the file as named to Open (a model directory when Open was
	// given a file inside one); "" for a model parsed from memory
	// (ParseGGUF).
	Path string
	// Name names the source in messages: Path, or what ParseGGUF was told.
	Name   string
	Format Format

	// GGUF is the parsed, mapped model file (FormatGGUF).
	GGUF *gguf.File
	// HF is the opened model directory, its shards mapped (FormatHF).
	HF *hf.Model
	// Plan is the decoded plan (FormatPlan).
	Plan *plan.Plan
	// App is the metadata an app carries beside its plan (a program
	// minervac build wrote; plan.OpenApp), nil otherwise.
	App []byte
	// Model is the model file a plan without embedded weights refers to,
	// opened and checked against the plan's record (plan.ModelRef); nil for
	// an embedded plan, and for a plan opened with Options.Unresolved until
	// ResolveModel.
	Model *Source

	abs      string         // Path made absolute
	size     int64          // the file's size when opened
	ref      *plan.ModelRef // Identity, computed once
	planFile *plan.File     // FormatPlan: the plan's mapping
	borrowed bool           // Model was lent (Options.Lend): Close leaves it open
}

// Options tune OpenWith.
type Options struct {
	// Lend is a model source the caller already has open (a GGUF file). A
	// plan that refers to the same file borrows it instead of opening and
	// hashing it again, after checking Lend's identity against the plan's
	// record. The caller keeps owning Lend and closes it after the plan.
	Lend *Source
	// Unresolved leaves the model file a plan refers to unopened: Model
	// stays nil until ResolveModel (inspect shows a plan whose model has
	// moved).
	Unresolved bool
	// Inspect opens a model directory that this build cannot run (an
	// unsupported architecture or quantization, tensors that disagree with
	// config.json) with the reason in HF.Err instead of failing, so that
	// inspect can show it; Build, Vocab and Identity then fail with it.
	Inspect bool
}

// Open opens the model at path: a GGUF file, a model directory (or any
// file of one: its config.json, a shard), or a plan (and the model it
// refers to). Errors are one line naming the file.
func Open(path string) (*Source, error) { return OpenWith(path, Options{}) }

// OpenWith is Open with options.
func OpenWith(path string, o Options) (*Source, error) {
	path = modelDirOf(path)
	fh, st, err := openFile(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close() // the mappings outlive the descriptor
	format, err := sniff(fh, st, path)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	s := &Source{Path: path, Name: path, Format: format, abs: abs, size: st.Size()}
	switch format {
	case FormatGGUF:
		// gguf's errors name the file.
		if s.GGUF, err = gguf.OpenFile(fh); err != nil {
			return nil, err
		}
	case FormatHF:
		// hf's errors name the file at fault.
		open := hf.Open
		if o.Inspect {
			open = hf.Inspect
		}
		if s.HF, err = open(path, openOnly); err != nil {
			return nil, err
		}
		_, s.size = s.HF.Fingerprint()
	case FormatPlan:
		open := plan.OpenFile
		if isApp(fh) {
			open = plan.OpenApp // a program minervac build wrote: its plan is at the end
		}
		if s.planFile, err = open(fh); err != nil {
			return nil, err
		}
		s.Plan, s.App = s.planFile.Plan, s.planFile.App
		if !s.Plan.Embedded && !o.Unresolved {
			if err := s.ResolveModel(o.Lend); err != nil {
				s.Close()
				return nil, err
			}
		}
	}
	return s, nil
}

// ParseGGUF makes a Source of a GGUF file held in memory (the built-in
// synthetic model), named name in messages. It has no file: Identity fails,
// so a plan cannot refer to it.
func ParseGGUF(name string, data []byte) (*Source, error) {
	f, err := gguf.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Source{Name: name, Format: FormatGGUF, GGUF: f, size: int64(len(data))}, nil
}

// openFile opens path for reading, counting the open (Opens), and turns
// the common mistakes into one line.
func openFile(path string) (*os.File, fs.FileInfo, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, err
	}
	opens.Lock()
	opens.n[abs]++
	opens.Unlock()
	fh, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, noFile(path)
	case err != nil:
		return nil, nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, nil, err
	}
	return fh, st, nil
}

// openOnly is openFile for frontend/hf, which opens a directory's files
// through it so that each is counted.
func openOnly(path string) (*os.File, error) {
	fh, _, err := openFile(path)
	return fh, err
}

// modelDirOf turns a file of a model directory (a shard, the index,
// config.json, the tokenizer files) into the directory, so that
// "minervac run DIR/model.safetensors" runs the model. It only looks
// (stat), opening nothing: the directory's files are opened once, by
// hf.Open. Any other path is returned as it is.
func modelDirOf(path string) string {
	base := filepath.Base(path)
	if !strings.HasSuffix(base, ".safetensors") && !strings.HasSuffix(base, ".json") {
		return path
	}
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return path
	}
	dir := filepath.Dir(path)
	if st, err := os.Stat(filepath.Join(dir, hf.ConfigName)); err != nil || !st.Mode().IsRegular() {
		return path
	}
	return dir
}

// noFile is the error of a path that names nothing: one line, and
// errors.Is(err, fs.ErrNotExist).
type noFile string

func (e noFile) Error() string { return string(e) + ": no such file" }
func (e noFile) Unwrap() error { return fs.ErrNotExist }

// sniff tells the format of the file fh (at path) from its first bytes. A
// directory is a model directory: frontend/hf tells from its files whether
// it is one.
func sniff(fh *os.File, st fs.FileInfo, path string) (Format, error) {
	if st.IsDir() {
		return FormatHF, nil
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	head := make([]byte, len(plan.Magic))
	n, err := fh.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	head = head[:n]
	switch {
	case n == 0:
		return "", fmt.Errorf("%s: file is empty: not a GGUF model or a plan", path)
	case bytes.HasPrefix([]byte(plan.Magic), head) || bytes.HasPrefix(head, []byte(plan.Magic)):
		return FormatPlan, nil // a file cut inside the magic is the plan reader's to report
	case bytes.HasPrefix(head, []byte(gguf.Magic)) || bytes.HasPrefix([]byte(gguf.Magic), head):
		return FormatGGUF, nil
	}
	switch _, err := plan.ReadAppTrailer(fh, st.Size()); {
	case err == nil:
		return FormatPlan, nil // an app (minervac build): a program carrying a plan
	case !errors.Is(err, plan.ErrNoApp):
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return "", fmt.Errorf("%s: unknown magic %q: neither a GGUF model (%q) nor a Minerva plan (%q) nor a file of a model directory", path, head[:min(n, 4)], gguf.Magic, plan.Magic)
}

// isApp reports whether fh, sniffed as a plan, is a program carrying one
// (an app) rather than a plan file.
func isApp(fh *os.File) bool {
	head := make([]byte, len(plan.Magic))
	n, _ := fh.ReadAt(head, 0)
	return !bytes.HasPrefix([]byte(plan.Magic), head[:n]) && !bytes.HasPrefix(head[:n], []byte(plan.Magic))
}

// opens counts the files Open has opened, by absolute path.
var opens = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

// Opens returns how many times this process has opened each file through
// Open (and ResolveModel), by absolute path: a command that starts from
// Open opens each of its files once, and cmd/minervac's tests hold it to
// that.
func Opens() map[string]int {
	opens.Lock()
	defer opens.Unlock()
	out := make(map[string]int, len(opens.n))
	for k, v := range opens.n {
		out[k] = v
	}
	return out
}

// Build builds the graph of a model file with frontend/arch. Each call
// builds afresh (the passes rewrite a graph in place), so a command calls
// it once. A plan is already compiled: its graph is Plan.Graph. Errors do
// not name the file; the caller does.
func (s *Source) Build(opts arch.Options) (*arch.Model, error) {
	switch s.Format {
	case FormatGGUF:
		return arch.Load(s.GGUF, opts)
	case FormatHF:
		if s.HF.Err != nil {
			return nil, s.HF.Err
		}
		return arch.LoadFile(s.HF, opts)
	}
	return nil, fmt.Errorf("it is a compiled plan, not a model file (run it, or compile the model it was compiled from)")
}

// Vocab returns the vocabulary of the model's tokenizer: read from a GGUF
// file's metadata, or the plan's. Errors do not name the file.
func (s *Source) Vocab() (tokenizer.Vocab, error) {
	switch s.Format {
	case FormatPlan:
		return s.Plan.Vocab, nil
	case FormatHF:
		if s.HF.Err != nil {
			return tokenizer.Vocab{}, s.HF.Err
		}
		if !s.HF.HasTokenizer {
			return tokenizer.Vocab{}, fmt.Errorf("the model directory has no %s: it runs from token ids only", hf.TokenizerName)
		}
		return s.HF.Vocab()
	}
	return arch.LoadVocab(s.GGUF)
}

// Sampling is the model's sampling defaults: a directory's
// generation_config.json (as transformers would sample), a plan's record,
// or greedy decoding for a GGUF file, which carries none.
func (s *Source) Sampling() plan.Sampling {
	switch s.Format {
	case FormatHF:
		return s.HF.Generation.Sampling()
	case FormatPlan:
		return s.Plan.Sampling
	}
	return plan.Sampling{TopP: 1, RepeatPenalty: 1}
}

// ChatTemplate is the model's chat template: a GGUF file's
// tokenizer.chat_template, a directory's tokenizer_config.json
// chat_template; "" when there is none.
func (s *Source) ChatTemplate() string {
	switch s.Format {
	case FormatHF:
		return s.HF.ChatTemplate()
	case FormatGGUF:
		t, _ := s.GGUF.String("tokenizer.chat_template")
		return t
	}
	return ""
}

// Weights serves the model's tensors, valid until Close: from the GGUF
// file, from the plan's own mapping when it embeds them, or from the model
// file it refers to.
func (s *Source) Weights() eval.Weights {
	switch {
	case s.Format == FormatGGUF:
		return s.GGUF
	case s.Format == FormatHF:
		return s.HF
	case s.Model != nil:
		return s.Model.Weights()
	}
	return s.Plan.EmbeddedWeights()
}

// Size is the size in bytes of the file Open mapped (the plan, for a plan;
// the files read, for a model directory).
func (s *Source) Size() int64 { return s.size }

// Files lists the absolute paths of the files the source holds open: the
// model file, a model directory and the files read from it, or the plan and
// the model it refers to.
func (s *Source) Files() []string {
	var out []string
	if s.abs != "" {
		out = append(out, s.abs)
	}
	if s.HF != nil {
		for _, p := range s.HF.Parts {
			if abs, err := filepath.Abs(p.Path); err == nil {
				out = append(out, abs)
			}
		}
	}
	if s.Model != nil {
		out = append(out, s.Model.Files()...)
	}
	return out
}

// Close releases the mappings (a lent model stays open). Closing twice is
// harmless.
func (s *Source) Close() error {
	var errs []error
	if s.GGUF != nil {
		errs = append(errs, s.GGUF.Close())
	}
	if s.HF != nil {
		errs = append(errs, s.HF.Close())
	}
	if s.planFile != nil {
		errs = append(errs, s.planFile.Close())
	}
	if s.Model != nil && !s.borrowed {
		errs = append(errs, s.Model.Close())
	}
	return errors.Join(errs...)
}
