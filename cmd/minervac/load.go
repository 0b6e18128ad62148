package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/runtime/plan"
	"github.com/minerva-llm/minerva/synth"
	"github.com/minerva-llm/minerva/tokenizer"
)

// openGGUF opens a model file, turning the common mistakes into one line.
func openGGUF(path string) (*gguf.File, error) {
	st, err := os.Stat(path)
	switch {
	case os.IsNotExist(err):
		return nil, fmt.Errorf("%s: no such file", path)
	case err != nil:
		return nil, err
	case st.IsDir():
		return nil, fmt.Errorf("%s is a directory, not a GGUF file", path)
	}
	// gguf's errors already name the file.
	return gguf.Open(path)
}

// loaded is a model ready to run.
type loaded struct {
	file  *gguf.File
	model *arch.Model
	tok   *tokenizer.Tokenizer
	ref   *plan.ModelRef // identity (identify), computed once
}

// identify is plan.Identify of the model file at abs, computed once: the
// header hash is the expensive part of opening a model.
func (m *loaded) identify(abs string) (plan.ModelRef, error) {
	if m.ref != nil && m.ref.Path == abs {
		return *m.ref, nil
	}
	ref, err := plan.Identify(abs, m.file)
	if err != nil {
		return ref, err
	}
	m.ref = &ref
	return ref, nil
}

// loadModel opens path, or builds the built-in synthetic model when path is
// empty (and says so on stderr, since its output is gibberish by design).
func loadModel(path string, opts arch.Options) (*loaded, error) {
	var f *gguf.File
	var err error
	if path == "" {
		spec := synth.Default()
		fmt.Fprintf(os.Stderr, "minervac: no model given; using the built-in synthetic llama %q (random weights: the text is gibberish by design)\n", spec.Name)
		var buf bytes.Buffer
		if _, err := spec.Write(&buf); err != nil {
			return nil, err
		}
		f, err = gguf.Parse(buf.Bytes())
	} else {
		f, err = openGGUF(path)
	}
	if err != nil {
		return nil, err
	}
	m, err := arch.Load(f, opts)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", displayName(path), err)
	}
	tok, err := tokenizer.New(m.Vocab)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: tokenizer: %w", displayName(path), err)
	}
	return &loaded{file: f, model: m, tok: tok}, nil
}

func displayName(path string) string {
	if path == "" {
		return "built-in model"
	}
	return path
}
